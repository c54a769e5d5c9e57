// A Clock that only moves when a test (or the code under test) says so.
//
// Sleeps never block: WaitUntil/SleepFor/SleepUntil move fake time forward
// to their deadline at once (a deadline in the past moves nothing), so code
// that polls on a Clock runs through its whole schedule instantly and the
// test can assert how much fake time it took. A wait whose `wake` is
// already notified returns false without moving time. A background loop
// (`while (clock->WaitFor(every, &stop))`) therefore runs pass after pass
// until it is stopped; tests of such loops assert on what the passes did.
// Thread-safety: thread-safe.
#ifndef PDC_TESTS_TESTING_FAKE_CLOCK_H_
#define PDC_TESTS_TESTING_FAKE_CLOCK_H_

#include <cstdint>
#include <functional>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace pdc::testing {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000))
      : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }

  bool WaitUntil(absl::Time deadline,
                 const absl::Notification* wake) const override {
    if (wake != nullptr && wake->HasBeenNotified()) return false;
    std::function<void()> hook;
    {
      absl::MutexLock lock(&mu_);
      ++sleeps_;
      if (deadline > now_) {
        slept_ += deadline - now_;
        now_ = deadline;
      }
      hook = sleep_hook_;
    }
    if (hook) hook();
    return true;
  }

  // Runs after every sleep, on the sleeping thread (outside the clock's
  // lock): what the world does while the code under test waits.
  void SetSleepHook(std::function<void()> hook) {
    absl::MutexLock lock(&mu_);
    sleep_hook_ = std::move(hook);
  }

  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }

  // How many sleeps (waits that reached their deadline) there were, and the
  // fake time they moved in total.
  int64_t sleeps() const {
    absl::MutexLock lock(&mu_);
    return sleeps_;
  }
  absl::Duration slept() const {
    absl::MutexLock lock(&mu_);
    return slept_;
  }

 private:
  mutable absl::Mutex mu_;
  mutable absl::Time now_ ABSL_GUARDED_BY(mu_);
  mutable int64_t sleeps_ ABSL_GUARDED_BY(mu_) = 0;
  mutable absl::Duration slept_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  std::function<void()> sleep_hook_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_FAKE_CLOCK_H_
