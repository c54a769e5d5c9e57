#include "common/clock.h"

#include "absl/time/clock.h"

namespace pdc {
namespace {

class WallClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }

  bool WaitUntil(absl::Time deadline,
                 const absl::Notification* wake) const override {
    if (wake != nullptr) return !wake->WaitForNotificationWithDeadline(deadline);
    absl::SleepFor(deadline - absl::Now());
    return true;
  }
};

}  // namespace

Clock* RealClock() {
  static WallClock* const clock = new WallClock();
  return clock;
}

}  // namespace pdc
