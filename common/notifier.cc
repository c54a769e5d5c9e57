#include "common/notifier.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/strings.h"

namespace pdc {

uint64_t Notifier::version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

uint64_t Notifier::version(std::string_view topic) const {
  absl::MutexLock lock(&mu_);
  return TopicVersionLocked(topic);
}

uint64_t Notifier::TopicVersionLocked(std::string_view topic) const {
  if (topic.empty()) return version_;
  auto it = topic_version_.find(Sv(topic));
  return it == topic_version_.end() ? all_version_ : std::max(all_version_, it->second);
}

void Notifier::TakeTopicLocked(const std::string& topic, std::vector<Callback>* due) {
  auto it = by_topic_.find(topic);
  if (it == by_topic_.end()) return;
  for (auto& [id, cb] : it->second) {
    topic_of_.erase(id);
    due->push_back(std::move(cb));
  }
  by_topic_.erase(it);
}

void Notifier::Bump() {
  std::vector<Callback> due;
  {
    absl::MutexLock lock(&mu_);
    all_version_ = ++version_;
    due.reserve(pending_);
    for (auto& [id, cb] : any_) due.push_back(std::move(cb));
    any_.clear();
    for (auto& [topic, callbacks] : by_topic_) {
      for (auto& [id, cb] : callbacks) due.push_back(std::move(cb));
    }
    by_topic_.clear();
    topic_of_.clear();
    pending_ = 0;
    changed_.SignalAll();
  }
  // Outside the lock: a callback may take other locks (Asio's).
  for (Callback& cb : due) cb();
}

void Notifier::Bump(absl::Span<const std::string> topics) {
  std::vector<Callback> due;
  {
    absl::MutexLock lock(&mu_);
    ++version_;
    for (auto& [id, cb] : any_) due.push_back(std::move(cb));
    any_.clear();
    for (const std::string& topic : topics) {
      if (topic.empty()) continue;
      topic_version_[topic] = version_;
      TakeTopicLocked(topic, &due);
    }
    pending_ -= due.size();
    changed_.SignalAll();
  }
  for (Callback& cb : due) cb();
}

Notifier::SubscriptionId Notifier::Subscribe(std::string_view topic, uint64_t seen,
                                             Callback cb) {
  {
    absl::MutexLock lock(&mu_);
    if (TopicVersionLocked(topic) <= seen) {
      const SubscriptionId id = ++next_id_;
      if (topic.empty()) {
        any_.emplace(id, std::move(cb));
      } else {
        by_topic_[Sv(topic)].emplace(id, std::move(cb));
        topic_of_.emplace(id, std::string(topic));
      }
      ++pending_;
      return id;
    }
  }
  cb();
  return 0;
}

void Notifier::Retire(std::string_view topic) {
  absl::MutexLock lock(&mu_);
  if (by_topic_.contains(Sv(topic))) return;
  topic_version_.erase(Sv(topic));
}

void Notifier::Cancel(SubscriptionId id) {
  absl::MutexLock lock(&mu_);
  if (any_.erase(id) != 0) {
    --pending_;
    return;
  }
  auto t = topic_of_.find(id);
  if (t == topic_of_.end()) return;
  auto it = by_topic_.find(t->second);
  if (it != by_topic_.end() && it->second.erase(id) != 0) {
    --pending_;
    if (it->second.empty()) by_topic_.erase(it);
  }
  topic_of_.erase(t);
}

uint64_t Notifier::WaitFor(uint64_t seen, absl::Duration timeout) const {
  // A CondVar deadline is a wall-clock instant.
  const absl::Time deadline = RealClock()->Deadline(timeout);
  absl::MutexLock lock(&mu_);
  while (version_ <= seen) {
    if (changed_.WaitWithDeadline(&mu_, deadline)) break;
  }
  return version_;
}

size_t Notifier::pending() const {
  absl::MutexLock lock(&mu_);
  return pending_;
}

size_t Notifier::topics() const {
  absl::MutexLock lock(&mu_);
  return topic_version_.size();
}

}  // namespace pdc
