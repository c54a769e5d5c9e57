#include "extender/binder.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "extender/claim_events.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "extender/vm_directory.h"
#include "api/json_util.h"
#include "rapidjson/document.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

namespace json = api::json;
using api::BindingArgs;
using api::PodRequest;

namespace {

std::string ClaimList(const BindOutcome& o) {
  std::vector<std::string> parts;
  for (const BoundClaim& c : o.claims) parts.push_back(c.key.ToString());
  return absl::StrJoin(parts, ",");
}

std::string DeviceList(const BindOutcome& o) {
  std::vector<std::string> parts;
  for (const BoundClaim& c : o.claims) {
    for (const PciAddress& a : c.devices) parts.push_back(a.ToString());
  }
  return absl::StrJoin(parts, ",");
}

BindResult Failure(BindStatus status, std::string_view why) {
  BindResult r;
  r.status = status;
  r.error = std::string(why);
  return r;
}

}  // namespace

std::string_view ToString(BindStatus status) {
  switch (status) {
    case BindStatus::kBound:
      return "Bound";
    case BindStatus::kPodNotFound:
      return "PodNotFound";
    case BindStatus::kAllocatorRefused:
      return "AllocatorRefused";
    case BindStatus::kAnnotateFailed:
      return "AnnotateFailed";
    case BindStatus::kKubeBindFailed:
      return "KubeBindFailed";
    case BindStatus::kOutcomeUnknown:
      return "OutcomeUnknown";
    case BindStatus::kTooLate:
      return "TooLate";
    case BindStatus::kNotRecorded:
      return "NotRecorded";
    case BindStatus::kNotLeader:
      return "NotLeader";
  }
  return "Unknown";
}

uint64_t Binder::Begin() const {
  absl::MutexLock lock(&attempts_mu_);
  return ++next_attempt_;
}

void Binder::Take(uint64_t attempt, const BindOutcome& outcome) const {
  absl::MutexLock lock(&attempts_mu_);
  for (const BoundClaim& c : outcome.claims) attempt_of_[c.key] = attempt;
}

BindOutcome Binder::Own(uint64_t attempt, const BindOutcome& outcome) const {
  BindOutcome mine = outcome;
  mine.claims.clear();
  absl::MutexLock lock(&attempts_mu_);
  for (const BoundClaim& c : outcome.claims) {
    auto it = attempt_of_.find(c.key);
    if (it == attempt_of_.end() || it->second != attempt) continue;
    attempt_of_.erase(it);
    mine.claims.push_back(c);
  }
  if (mine.claims.size() != outcome.claims.size()) {
    // A Released mark goes back only with the claim that took it.
    mine.took_released.clear();
  }
  return mine;
}

void Binder::Finish(uint64_t attempt, const BindOutcome& outcome) const {
  absl::MutexLock lock(&attempts_mu_);
  for (const BoundClaim& c : outcome.claims) {
    auto it = attempt_of_.find(c.key);
    if (it != attempt_of_.end() && it->second == attempt) attempt_of_.erase(it);
  }
}

absl::StatusOr<PodRequest> Binder::PodForBind(const BindingArgs& args,
                                              const BindBudget& budget) const {
  if (std::optional<PodRequest> cached = ctx_->pod_cache->Get(args.pod_uid)) {
    return *std::move(cached);
  }
  ASSIGN_OR_RETURN(const std::string text, ctx_->bind_target->ReadPod(args, budget));
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(text, &doc));
  ASSIGN_OR_RETURN(PodRequest pod, PodForScheduling(doc, ctx_->managed, ctx_->vms));
  if (pod.request.pod_uid != args.pod_uid) {
    return absl::AbortedError(absl::StrCat(
        "pod ", args.pod_namespace, "/", args.pod_name, " now has uid ",
        pod.request.pod_uid, ", not ", args.pod_uid,
        " (it was deleted and re-created)"));
  }
  return pod;
}

BindResult Binder::UndoAfter(uint64_t attempt, BindStatus status, std::string why,
                             BindOutcome outcome) const {
  // Only what this attempt still owns: a later attempt for the same pod
  // (kube-scheduler's retry) may rely on the same claims, and its pod may
  // run on them.
  const BindOutcome mine = Own(attempt, outcome);
  absl::Status undo = absl::OkStatus();
  if (!mine.claims.empty()) {
    undo = ctx_->allocator->Undo(mine);
    if (ctx_->metrics) ctx_->metrics->CountRollback();
  }
  BindResult r = Failure(status, why);
  if (mine.claims.size() != outcome.claims.size()) {
    absl::StrAppend(&r.error, "; ", outcome.claims.size() - mine.claims.size(),
                    " claim(s) of this bind were taken over by a later bind of the pod and "
                    "are left to it");
  }
  if (!undo.ok()) {
    absl::StrAppend(&r.error, "; undoing the allocation also failed: ", undo.message());
  }
  r.allocation = std::move(outcome);
  r.undo_status = std::move(undo);
  return r;
}

BindResult Binder::Fail(const BindingArgs& args, BindResult result) const {
  if (ctx_->metrics) {
    if (result.status == BindStatus::kOutcomeUnknown) {
      ctx_->metrics->CountBindUnknown();
    } else {
      ctx_->metrics->CountBind(false);
    }
  }
  spdlog::warn("bind {}/{} to {} failed: {}", args.pod_namespace,
               args.pod_name, args.node, result.error);
  return result;
}

absl::Time Binder::DeadlineFromNow() const { return ctx_->clock->Now() + options_.deadline; }

BindResult Binder::Keep(uint64_t attempt, BindTarget::Verdict verdict,
                        BindOutcome outcome) const {
  Finish(attempt, outcome);
  if (verdict.status == BindStatus::kOutcomeUnknown) {
    absl::StrAppend(&verdict.why, "; its devices stay reserved for it, so a retry or the pod's "
                                  "start finds them");
  }
  BindResult r = Failure(verdict.status, verdict.why);
  r.allocation = std::move(outcome);
  return r;
}

BindResult Binder::Bind(const BindingArgs& args, absl::Time deadline) const {
  const BindTarget& target = *ctx_->bind_target;
  const BindBudget budget{deadline, options_.read_back};
  if (deadline - ctx_->clock->Now() <= absl::ZeroDuration()) {
    return Fail(args, Failure(BindStatus::kTooLate,
                              absl::StrCat("the bind waited for a free bind thread past its "
                                           "deadline (", absl::FormatDuration(options_.deadline),
                                           ", extender.bindDeadline); nothing was done")));
  }
  absl::StatusOr<PodRequest> pod = PodForBind(args, budget);
  if (!pod.ok()) {
    return Fail(args, Failure(BindStatus::kPodNotFound,
                              StdSv(pod.status().message())));
  }
  // The bind args are authoritative for the pod's identity.
  pod->request.pod_name = args.pod_name;
  pod->request.ns = args.pod_namespace;
  pod->request.pod_uid = args.pod_uid;

  if (pod->pass_through) {
    // The target sends nothing once this replica is not sure it leads.
    BindTarget::Verdict v = target.Publish(args, nullptr, budget);
    if (v.status != BindStatus::kBound) return Fail(args, Failure(v.status, v.why));
    if (ctx_->metrics) ctx_->metrics->CountBind(true);
    ctx_->pod_cache->Erase(args.pod_uid);
    return BindResult{};
  }

  if (!target.MayWrite()) {
    return Fail(args, Failure(BindStatus::kNotLeader,
                              "this replica of pdc-extender is no longer sure it leads; nothing "
                              "was done, kube-scheduler retries the pod with the leader"));
  }
  const uint64_t attempt = Begin();
  absl::StatusOr<BindOutcome> outcome =
      ctx_->allocator->Bind(pod->request, args.node);
  if (!outcome.ok()) {
    return Fail(args, Failure(BindStatus::kAllocatorRefused,
                              StdSv(outcome.status().message())));
  }
  Take(attempt, *outcome);
  // Acknowledged only once every claim's record is in the API as this
  // bind made it (the allocator's Sync returned; a write that found
  // another object under a claim's name did not record it).
  if (ctx_->recorded) {
    if (absl::Status rec = ctx_->recorded(*outcome); !rec.ok()) {
      return Fail(args, UndoAfter(attempt, BindStatus::kNotRecorded,
                                  absl::StrCat("the claims of the bind are not recorded in the "
                                               "Kubernetes API: ", rec.message()),
                                  *std::move(outcome)));
    }
  }

  // Not bound by this attempt yet: undoing what it still owns is safe
  // (claims a later attempt of the pod took over are left to it).
  BindTarget::Verdict v = target.Publish(args, &*outcome, budget);
  switch (v.status) {
    case BindStatus::kBound:
      break;
    case BindStatus::kNotLeader:
    case BindStatus::kOutcomeUnknown:
      return Fail(args, Keep(attempt, std::move(v), *std::move(outcome)));
    default:  // kAnnotateFailed, kKubeBindFailed: nothing of the bind stands.
      return Fail(args, UndoAfter(attempt, v.status, std::move(v.why), *std::move(outcome)));
  }
  if (ctx_->metrics) ctx_->metrics->CountBind(true);
  Finish(attempt, *outcome);
  ctx_->pod_cache->Erase(args.pod_uid);
  if (target.MayWrite()) {
    RecordPodBound(ctx_->events, args.pod_namespace, args.pod_name, args.pod_uid, *outcome);
  }
  spdlog::info("bind vm={}/{} pod={} uid={} node={} claims=[{}] devices=[{}] "
               "revision={}",
               pod->request.ns, pod->request.vm, args.pod_name, args.pod_uid,
               args.node, ClaimList(*outcome), DeviceList(*outcome),
               outcome->revision);
  BindResult r;
  r.allocation = *std::move(outcome);
  return r;
}

}  // namespace pdc::extender
