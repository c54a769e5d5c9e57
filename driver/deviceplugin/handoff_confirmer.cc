#include "driver/deviceplugin/handoff_confirmer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "driver/node_reconciler.h"
#include "spdlog/spdlog.h"

namespace pdc::driver::deviceplugin {

HandoffConfirmer::HandoffConfirmer(ExtenderApi* api, const HandoffBook* book,
                                   ConfirmerOptions options, NodeMetrics* metrics)
    : api_(api), book_(book), options_(options), metrics_(metrics) {}

HandoffConfirmer::~HandoffConfirmer() { Stop(); }

void HandoffConfirmer::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  if (options_.journal != nullptr) {
    for (HandoffRecord& r : options_.journal->Entries()) {
      spdlog::info("confirming again the hand-off of {} to pod {}/{} (uid {}) from {}",
                   r.resource_name, r.ns, r.pod_name, r.pod_uid, options_.journal->path());
      jobs_.push_back(Job{std::move(r), absl::InfinitePast(), absl::ZeroDuration()});
    }
  }
  thread_ = std::thread([this] { Loop(); });
}

void HandoffConfirmer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    ++wakeups_;
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  for (const Job& j : jobs_) {
    spdlog::warn("stopping with the {} hand-off to pod uid {} unconfirmed; the extender keeps "
                 "other pods off this node for it until it is confirmed or cancelled{}",
                 j.record.resource_name, j.record.pod_uid,
                 options_.journal != nullptr ? " (journaled: confirmed again at start)" : "");
  }
  jobs_.clear();
}

absl::Status HandoffConfirmer::Enqueue(HandoffRecord record) {
  std::sort(record.devices.begin(), record.devices.end());
  absl::Status journaled;
  if (options_.journal != nullptr) journaled = options_.journal->Put(record);
  if (!journaled.ok() && metrics_ != nullptr) metrics_->handoff_journal_errors->Increment();
  absl::MutexLock lock(&mu_);
  jobs_.push_back(Job{std::move(record), absl::InfinitePast(), absl::ZeroDuration()});
  ++wakeups_;
  return journaled;
}

void HandoffConfirmer::Forget(const HandoffRecord& r) {
  if (options_.journal == nullptr) return;
  if (absl::Status s = options_.journal->Remove(r.resource_name, r.pod_uid); !s.ok()) {
    if (metrics_ != nullptr) metrics_->handoff_journal_errors->Increment();
    // Harmless: confirming again at start is answered the same or NotFound.
    spdlog::warn("hand-off of {} to pod uid {} stays in the journal: {}", r.resource_name,
                 r.pod_uid, s.ToString());
  }
}

uint64_t HandoffConfirmer::confirmed() const {
  absl::MutexLock lock(&mu_);
  return confirmed_;
}

size_t HandoffConfirmer::queued() const {
  absl::MutexLock lock(&mu_);
  return jobs_.size() + in_flight_;
}

bool HandoffConfirmer::WaitUntilIdle(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return jobs_.empty() && in_flight_ == 0;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

void HandoffConfirmer::Loop() {
  mu_.Lock();
  while (!stop_) {
    // The earliest due job, if it is due.
    auto next = std::min_element(jobs_.begin(), jobs_.end(),
                                 [](const Job& a, const Job& b) { return a.due < b.due; });
    // Real time: the waits below are absl::Mutex timeouts.
    const absl::Time now = RealClock()->Now();
    if (next == jobs_.end() || next->due > now) {
      const uint64_t seen = wakeups_;
      const absl::Duration wait = next == jobs_.end() ? absl::InfiniteDuration() : next->due - now;
      auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return wakeups_ != seen;
      };
      mu_.AwaitWithTimeout(absl::Condition(&changed), wait);
      continue;
    }
    Job job = *next;
    jobs_.erase(next);
    ++in_flight_;
    mu_.Unlock();
    // The extender is called without the lock: Enqueue never waits on it.
    const HandoffRecord& r = job.record;
    absl::Status s = api_->ConfirmHandoff(book_->node(), r.pod_uid, r.resource_name, r.devices);
    const std::string devices = absl::StrJoin(r.devices, ",", [](std::string* out, PciAddress a) {
      out->append(a.ToString());
    });
    // Before the job counts as done: whoever waits for the confirmer to be
    // idle finds the journal already without it.
    const bool gone = !s.ok() && (absl::IsNotFound(s) ||
                                  (book_->has_answer() &&
                                   !book_->PendingUpstream(r.resource_name, r.pod_uid)));
    if (s.ok() || gone) Forget(r);
    mu_.Lock();
    --in_flight_;
    ++job.attempts;
    auto count = [this](const char* outcome) {
      if (metrics_) metrics_->handoff_confirmations->WithLabels({outcome})->Increment();
    };
    if (s.ok()) {
      count("confirmed");
      ++confirmed_;
      spdlog::info("hand-off of {} {} to pod uid {} confirmed to pdc-extender", r.resource_name,
                   devices, r.pod_uid);
      continue;
    }
    if (gone) {
      count("gone");
      spdlog::info("hand-off of {} {} to pod uid {}: nothing pending upstream any more ({})",
                   r.resource_name, devices, r.pod_uid, s.ToString());
      continue;
    }
    count("failed");
    job.backoff = NextBackoff(job.backoff, options_.backoff_initial, options_.backoff_max);
    job.due = RealClock()->Deadline(job.backoff);
    // The first failure and then every power of two: an outage is visible
    // without a line per retry.
    if ((job.attempts & (job.attempts - 1)) == 0) spdlog::warn("confirming the hand-off of {} {} to pod uid {} failed (attempt {}), retrying in "
                 "{}: {}",
                 r.resource_name, devices, r.pod_uid, job.attempts,
                 absl::FormatDuration(job.backoff), s.ToString());
    jobs_.push_back(std::move(job));
  }
  mu_.Unlock();
}

}  // namespace pdc::driver::deviceplugin
