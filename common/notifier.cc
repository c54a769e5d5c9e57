#include "common/notifier.h"

#include <utility>
#include <vector>

namespace pdc {

uint64_t Notifier::version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

void Notifier::Bump() {
  std::map<SubscriptionId, Callback> due;
  {
    absl::MutexLock lock(&mu_);
    ++version_;
    due.swap(callbacks_);
    changed_.SignalAll();
  }
  // Outside the lock: a callback may take other locks (Asio's).
  for (auto& [id, cb] : due) cb();
}

Notifier::SubscriptionId Notifier::Subscribe(uint64_t seen, Callback cb) {
  {
    absl::MutexLock lock(&mu_);
    if (version_ <= seen) {
      const SubscriptionId id = ++next_id_;
      callbacks_.emplace(id, std::move(cb));
      return id;
    }
  }
  cb();
  return 0;
}

void Notifier::Cancel(SubscriptionId id) {
  absl::MutexLock lock(&mu_);
  callbacks_.erase(id);
}

uint64_t Notifier::WaitFor(uint64_t seen, absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (version_ <= seen) {
    if (changed_.WaitWithDeadline(&mu_, deadline)) break;
  }
  return version_;
}

size_t Notifier::pending() const {
  absl::MutexLock lock(&mu_);
  return callbacks_.size();
}

}  // namespace pdc
