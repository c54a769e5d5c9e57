// Time source for everything in pdc that depends on time (node staleness,
// reservation ages, metrics, polling intervals, background loops). Production
// code uses RealClock(); tests use tests/testing/fake_clock.h so they never
// sleep or read the wall clock. No other file reads the wall clock or sleeps
// (socket timeouts armed as Asio timers excepted).
// Thread-safety: implementations must be safe to call from any thread.
#ifndef PDC_COMMON_CLOCK_H_
#define PDC_COMMON_CLOCK_H_

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace pdc {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // Blocks the calling thread until Now() >= deadline or, when `wake` is not
  // null, until `wake` is notified (already notified: returns at once).
  // Returns true when the deadline was reached, false when woken.
  virtual bool WaitUntil(absl::Time deadline,
                         const absl::Notification* wake) const = 0;

  void SleepUntil(absl::Time deadline) const { WaitUntil(deadline, nullptr); }
  void SleepFor(absl::Duration d) const { WaitUntil(Now() + d, nullptr); }
  // For loops that a Stop() ends: `while (clock->WaitFor(every, &stop))`.
  bool WaitFor(absl::Duration d, const absl::Notification* wake) const {
    return WaitUntil(Now() + d, wake);
  }
  // The deadline `timeout` from now.
  absl::Time Deadline(absl::Duration timeout) const { return Now() + timeout; }
};

// The process-wide wall clock. Never null, never destroyed.
Clock* RealClock();

}  // namespace pdc

#endif  // PDC_COMMON_CLOCK_H_
