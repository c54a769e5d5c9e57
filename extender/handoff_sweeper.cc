#include "extender/handoff_sweeper.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "common/strings.h"
#include "rapidjson/document.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

namespace json = api::json;

HandoffSweeper::HandoffSweeper(Options options, Allocator* allocator, KubeClient* kube,
                               const Clock* clock)
    : options_(options),
      allocator_(allocator),
      kube_(kube),
      clock_(clock) {}

HandoffSweeper::~HandoffSweeper() { Stop(); }

PodFate AskPodFate(KubeClient* kube, std::string_view ns, std::string_view pod_name,
                   std::string_view pod_uid, absl::Duration timeout, std::string* why) {
  absl::StatusOr<std::string> pod = kube->GetPod(ns, pod_name, timeout);
  if (!pod.ok()) {
    if (pod.status().code() == absl::StatusCode::kNotFound) {
      *why = "the pod was deleted";
      return PodFate::kGone;
    }
    *why = std::string(pod.status().message());
    return PodFate::kUnknown;
  }
  rapidjson::Document doc;
  if (absl::Status s = json::Parse(*pod, &doc); !s.ok() || !doc.IsObject()) {
    *why = "kube-apiserver answered with a pod that is not a JSON object";
    return PodFate::kUnknown;
  }
  std::string_view uid;
  std::string_view phase;
  if (const json::Value* meta = json::Find(doc, "metadata"); meta && meta->IsObject()) {
    if (const json::Value* u = json::Find(*meta, "uid"); u && u->IsString()) {
      uid = json::StringOf(*u);
    }
  }
  if (const json::Value* st = json::Find(doc, "status"); st && st->IsObject()) {
    if (const json::Value* ph = json::Find(*st, "phase"); ph && ph->IsString()) {
      phase = json::StringOf(*ph);
    }
  }
  if (!uid.empty() && uid != pod_uid) {
    *why = absl::StrCat("the pod was replaced (now UID ", Sv(uid), ")");
    return PodFate::kGone;
  }
  if (phase == "Failed" || phase == "Succeeded") {
    *why = absl::StrCat("the pod is ", Sv(phase));
    return PodFate::kGone;
  }
  return PodFate::kAlive;
}

PodFate HandoffSweeper::AskApiserver(const PendingHandoff& p, std::string* why) {
  return AskPodFate(kube_, p.ns, p.pod.pod_name, p.pod.pod_uid, options_.api_timeout, why);
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
      if (now - since >= options_.grace) due.push_back(p);
    }
    first_seen_ = std::move(still);  // Forget pods no longer pending.
  }
  size_t cancelled = 0;
  absl::flat_hash_map<std::string, bool> asked;  // One GET per pod per pass.
  for (const PendingHandoff& p : due) {
    auto [it, first] = asked.try_emplace(p.pod.pod_uid, false);
    if (!first) continue;
    std::string why;
    const PodFate fate = AskApiserver(p, &why);
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
  }
  return cancelled;
}

void HandoffSweeper::Start() {
  thread_ = std::thread([this] {
    while (clock_->WaitFor(options_.interval, &stop_)) SweepOnce();
  });
}

void HandoffSweeper::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

}  // namespace pdc::extender
