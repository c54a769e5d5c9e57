#include "kube/work_queue.h"

#include <algorithm>
#include <utility>

namespace pdc::kube {

WorkQueue::WorkQueue(const Clock* clock, WorkQueueOptions options)
    : clock_(clock), options_(options), wake_(std::make_shared<absl::Notification>()) {}

void WorkQueue::WakeLocked() {
  wake_->Notify();
  wake_ = std::make_shared<absl::Notification>();
}

void WorkQueue::AddLocked(const std::string& key) {
  if (shut_down_ || dirty_.contains(key)) return;
  dirty_.insert(key);
  // A key being processed is queued again by Done().
  if (processing_.contains(key)) return;
  ready_.push_back(key);
  WakeLocked();
}

void WorkQueue::Add(std::string_view key) {
  absl::MutexLock lock(&mu_);
  AddLocked(std::string(key));
}

void WorkQueue::AddAfter(std::string_view key, absl::Duration delay) {
  if (delay <= absl::ZeroDuration()) {
    Add(key);
    return;
  }
  const absl::Time at = clock_->Now() + delay;
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  std::string k(key);
  auto it = delayed_at_.find(k);
  if (it != delayed_at_.end()) {
    if (it->second <= at) return;  // Already due earlier.
    auto range = delayed_.equal_range(it->second);
    for (auto d = range.first; d != range.second; ++d) {
      if (d->second == k) {
        delayed_.erase(d);
        break;
      }
    }
    it->second = at;
  } else {
    delayed_at_.emplace(k, at);
  }
  delayed_.emplace(at, std::move(k));
  WakeLocked();  // A waiting Get() may now wait less.
}

void WorkQueue::AddRateLimited(std::string_view key) {
  absl::Duration delay;
  {
    absl::MutexLock lock(&mu_);
    const int n = failures_[std::string(key)]++;
    // base * 2^n, capped (n beyond 40 is far past any cap).
    delay = options_.base_delay * static_cast<double>(int64_t{1} << std::min(n, 40));
    delay = std::min(delay, options_.max_delay);
  }
  AddAfter(key, delay);
}

void WorkQueue::Forget(std::string_view key) {
  absl::MutexLock lock(&mu_);
  failures_.erase(std::string(key));
}

int WorkQueue::Requeues(std::string_view key) const {
  absl::MutexLock lock(&mu_);
  auto it = failures_.find(std::string(key));
  return it == failures_.end() ? 0 : it->second;
}

void WorkQueue::PromoteDueLocked(absl::Time now) {
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    std::string key = std::move(delayed_.begin()->second);
    delayed_.erase(delayed_.begin());
    delayed_at_.erase(key);
    AddLocked(key);
  }
}

std::optional<std::string> WorkQueue::PopLocked() {
  if (shut_down_ || ready_.empty()) return std::nullopt;
  std::string key = std::move(ready_.front());
  ready_.pop_front();
  dirty_.erase(key);
  processing_.insert(key);
  return key;
}

std::optional<std::string> WorkQueue::TryGet() {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  PromoteDueLocked(now);
  return PopLocked();
}

std::optional<std::string> WorkQueue::Get() {
  while (true) {
    std::shared_ptr<absl::Notification> wake;
    absl::Time next;
    {
      const absl::Time now = clock_->Now();
      absl::MutexLock lock(&mu_);
      if (shut_down_) return std::nullopt;
      PromoteDueLocked(now);
      if (auto key = PopLocked()) return key;
      wake = wake_;
      next = delayed_.empty() ? absl::InfiniteFuture() : delayed_.begin()->first;
    }
    clock_->WaitUntil(next, wake.get());
  }
}

void WorkQueue::Done(std::string_view key) {
  absl::MutexLock lock(&mu_);
  std::string k(key);
  processing_.erase(k);
  if (dirty_.contains(k) && !shut_down_) {
    ready_.push_back(std::move(k));
    WakeLocked();
  }
}

void WorkQueue::ShutDown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  ready_.clear();
  dirty_.clear();
  delayed_.clear();
  delayed_at_.clear();
  WakeLocked();
}

bool WorkQueue::shutting_down() const {
  absl::MutexLock lock(&mu_);
  return shut_down_;
}

size_t WorkQueue::size() const {
  absl::MutexLock lock(&mu_);
  // Keys added again while being processed wait for Done().
  size_t readded = 0;
  for (const std::string& k : processing_) readded += dirty_.contains(k) ? 1 : 0;
  return ready_.size() + delayed_.size() + readded;
}

absl::Time WorkQueue::NextDelayed() const {
  absl::MutexLock lock(&mu_);
  return delayed_.empty() ? absl::InfiniteFuture() : delayed_.begin()->first;
}

Controller::Controller(WorkQueue* queue, Reconciler* reconciler)
    : queue_(queue), reconciler_(reconciler) {}

Controller::~Controller() { Stop(); }

void Controller::ProcessOne(const std::string& key) {
  const absl::Status status = reconciler_->Reconcile(key);
  if (status.ok()) {
    queue_->Forget(key);
  } else {
    queue_->AddRateLimited(key);
  }
  queue_->Done(key);
}

void Controller::Run(int workers) {
  for (int i = 0; i < workers; ++i) {
    workers_.emplace_back([this] {
      while (auto key = queue_->Get()) ProcessOne(*key);
    });
  }
}

void Controller::Stop() {
  queue_->ShutDown();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

int Controller::ProcessReady() {
  int n = 0;
  while (auto key = queue_->TryGet()) {
    ProcessOne(*key);
    ++n;
  }
  return n;
}

}  // namespace pdc::kube
