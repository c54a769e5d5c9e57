#include "extender/bind_queue.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pdc::extender {

BindQueue::BindQueue(const Binder* binder, Notifier* notifier, BindQueueOptions options)
    : binder_(binder), notifier_(notifier), options_(options), jobs_(options_.max_jobs) {
  threads_.reserve(static_cast<size_t>(options_.threads));
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { Work(); });
}

BindQueue::~BindQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

absl::StatusOr<Binds::Ticket> InlineBinds::Start(const api::BindingArgs& args) {
  BindResult result = binder_->Bind(args);
  absl::MutexLock lock(&mu_);
  Ticket t;
  t.token = ++next_;
  ended_.emplace(t.token, std::move(result));
  return t;
}

std::optional<BindResult> InlineBinds::Take(uint64_t token) {
  absl::MutexLock lock(&mu_);
  auto it = ended_.find(token);
  if (it == ended_.end()) return std::nullopt;
  BindResult out = std::move(it->second);
  ended_.erase(it);
  return out;
}

std::string BindQueue::Topic(uint64_t token) { return absl::StrCat("bind/", token); }

absl::StatusOr<Binds::Ticket> BindQueue::Start(const api::BindingArgs& args) {
  absl::MutexLock lock(&mu_);
  if (waiting_.size() + running_ >= options_.max_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        options_.max_jobs, " binds are already waiting for the Kubernetes API; kube-scheduler "
                           "will retry the pod"));
  }
  Ticket t;
  t.token = jobs_.Add(Job{args, binder_->DeadlineFromNow()});
  t.topic = Topic(t.token);
  // Read before the job can end: its bump moves the topic past `seen`.
  t.seen = notifier_->version(t.topic);
  waiting_.push_back(t.token);
  return t;
}

std::optional<BindResult> BindQueue::Take(uint64_t token) {
  std::optional<BindResult> out;
  {
    absl::MutexLock lock(&mu_);
    auto entry = jobs_.Take(token);
    if (!entry.has_value()) return std::nullopt;
    out = std::move(entry->result);
  }
  notifier_->Retire(Topic(token));
  return out;
}

void BindQueue::Abandon(uint64_t token) {
  bool retire = false;
  {
    absl::MutexLock lock(&mu_);
    retire = jobs_.Abandon(token);  // Else skipped if waiting; dropped when it ends.
  }
  if (retire) notifier_->Retire(Topic(token));
}

size_t BindQueue::jobs() const {
  absl::MutexLock lock(&mu_);
  return jobs_.size();
}

bool BindQueue::HasWorkLocked() const { return stopping_ || !waiting_.empty(); }

void BindQueue::Work() {
  for (;;) {
    uint64_t token = 0;
    api::BindingArgs args;
    absl::Time deadline;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &BindQueue::HasWorkLocked));
      if (stopping_) return;
      token = waiting_.front();
      waiting_.pop_front();
      if (jobs_.DropIfAbandoned(token)) continue;
      const Job& job = jobs_.Find(token)->job;
      args = job.args;
      deadline = job.deadline;
      ++running_;
    }
    BindResult result = binder_->Bind(args, deadline);
    std::vector<uint64_t> dropped;
    bool kept = false;
    {
      absl::MutexLock lock(&mu_);
      --running_;
      kept = jobs_.Finish(token, std::move(result), &dropped);
      if (!kept) dropped.push_back(token);
    }
    if (kept) notifier_->Bump(std::vector<std::string>{Topic(token)});
    for (uint64_t t : dropped) notifier_->Retire(Topic(t));
  }
}

}  // namespace pdc::extender
