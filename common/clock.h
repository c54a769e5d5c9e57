// Time source for everything in pdc that depends on time (node staleness,
// reservation ages, metrics). Production code uses RealClock(); tests use
// tests/testing/fake_clock.h so they never sleep or read the wall clock.
// Thread-safety: implementations must be safe to call from any thread.
#ifndef PDC_COMMON_CLOCK_H_
#define PDC_COMMON_CLOCK_H_

#include "absl/time/time.h"

namespace pdc {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// The process-wide wall clock. Never null, never destroyed.
Clock* RealClock();

}  // namespace pdc

#endif  // PDC_COMMON_CLOCK_H_
