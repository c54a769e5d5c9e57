#include "extender/handoff_sweeper.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

HandoffSweeper::HandoffSweeper(Options options, Allocator* allocator, kube::KubeClient* kube,
                               const Clock* clock)
    : options_(options),
      allocator_(allocator),
      kube_(kube),
      clock_(clock) {}

HandoffSweeper::~HandoffSweeper() { Stop(); }

PodFate HandoffSweeper::Ask(const PendingHandoff& p, std::string* why) {
  return AskPodFate(options_.pods, kube_, p.ns, p.pod.pod_name, p.pod.pod_uid,
                    options_.api_timeout, why);
}

size_t HandoffSweeper::SweepOnce() {
  const std::vector<PendingHandoff> pending = allocator_->PendingHandoffs("");
  const absl::Time now = clock_->Now();
  std::vector<PendingHandoff> due;
  {
    absl::MutexLock lock(&mu_);
    absl::flat_hash_map<std::string, absl::Time> still;
    for (const PendingHandoff& p : pending) {
      auto it = first_seen_.find(p.pod.pod_uid);
      const absl::Time since = it == first_seen_.end() ? now : it->second;
      still.emplace(p.pod.pod_uid, since);
      if (now - since >= options_.grace || gone_.contains(p.pod.pod_uid)) due.push_back(p);
    }
    first_seen_ = std::move(still);  // Forget pods no longer pending.
    gone_.clear();
  }
  size_t cancelled = 0;
  absl::flat_hash_map<std::string, bool> asked;  // One GET per pod per pass.
  for (const PendingHandoff& p : due) {
    auto [it, first] = asked.try_emplace(p.pod.pod_uid, false);
    if (!first) continue;
    std::string why;
    const PodFate fate = Ask(p, &why);
    if (fate == PodFate::kUnknown) {
      spdlog::warn("hand-off of pod {}/{} (uid {}) on node {}: cannot tell whether the pod is "
                   "gone, keeping it pending: {}",
                   p.ns, p.pod.pod_name, p.pod.pod_uid, p.node, why);
      continue;
    }
    if (fate == PodFate::kAlive) continue;
    absl::StatusOr<std::vector<ClaimKey>> released =
        allocator_->CancelHandoff(p.node, p.pod.pod_uid);
    if (!released.ok()) {
      if (released.status().code() != absl::StatusCode::kNotFound) {
        spdlog::warn("cancelling the hand-off of pod {}/{} on node {} failed: {}", p.ns,
                     p.pod.pod_name, p.node, released.status().ToString());
      }
      continue;
    }
    ++cancelled;
    spdlog::info("hand-off cancelled: pod {}/{} (uid {}) on node {} never received its devices "
                 "and {}; {} claim(s) released, the devices stay claimed",
                 p.ns, p.pod.pod_name, p.pod.pod_uid, p.node, why, released->size());
    if (options_.on_cancelled) options_.on_cancelled(p, *released, why);
  }
  return cancelled;
}

void HandoffSweeper::PodGone(std::string_view uid) {
  // Bounded: beyond it (a burst of deleted pods), the regular passes do.
  constexpr size_t kMaxGone = 4096;
  absl::MutexLock lock(&mu_);
  if (gone_.size() < kMaxGone) gone_.emplace(uid);
  if (!wake_->HasBeenNotified()) wake_->Notify();
}

void HandoffSweeper::Start() {
  thread_ = std::thread([this] {
    for (;;) {
      std::shared_ptr<absl::Notification> wake;
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        wake = wake_;
      }
      clock_->WaitFor(options_.interval, wake.get());
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        if (wake_->HasBeenNotified()) wake_ = std::make_shared<absl::Notification>();
      }
      SweepOnce();
    }
  });
}

void HandoffSweeper::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (!wake_->HasBeenNotified()) wake_->Notify();
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace pdc::extender
