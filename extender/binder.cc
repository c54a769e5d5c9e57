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
using api::kDevicesAnnotation;
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

std::string DevicesAnnotation(const BindOutcome& outcome) {
  std::map<std::string, std::vector<std::string>> by_resource;
  for (const BoundClaim& c : outcome.claims) {
    auto& v = by_resource[c.resource_name];
    for (const PciAddress& a : c.devices) v.push_back(a.ToString());
  }
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  for (auto& [res, addrs] : by_resource) {  // The outcome's hand-off order.
    json::Key(w, res);
    w.StartArray();
    for (const std::string& a : addrs) json::Str(w, a);
    w.EndArray();
  }
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::Duration Binder::Left(absl::Time deadline, absl::Duration reserve) const {
  return deadline - ctx_->clock->Now() - reserve;
}

bool Binder::MayWrite() const {
  return !ctx_->leadership_left || ctx_->leadership_left() > absl::ZeroDuration();
}

absl::Duration Binder::WriteTimeout(absl::Time deadline, absl::Duration reserve) const {
  absl::Duration left = Left(deadline, reserve);
  if (ctx_->leadership_left) left = std::min(left, ctx_->leadership_left());
  return left;
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
                                              absl::Time deadline) const {
  if (std::optional<PodRequest> cached = ctx_->pod_cache->Get(args.pod_uid)) {
    return *std::move(cached);
  }
  if (ctx_->kube == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pdc-extender has no record of pod ", args.pod_namespace, "/",
        args.pod_name, " (uid ", args.pod_uid,
        ") from a filter call, and no Kubernetes API is configured to read "
        "it; kube-scheduler will retry the pod"));
  }
  absl::StatusOr<std::string> text = ctx_->kube->GetPod(
      args.pod_namespace, args.pod_name, Left(deadline, options_.read_back));
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("reading pod ", args.pod_namespace, "/",
                                     args.pod_name, " from the Kubernetes API: ",
                                     text.status().message()));
  }
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(*text, &doc));
  ASSIGN_OR_RETURN(PodRequest pod, PodForScheduling(doc, ctx_->managed, ctx_->vms));
  if (pod.request.pod_uid != args.pod_uid) {
    return absl::AbortedError(absl::StrCat(
        "pod ", args.pod_namespace, "/", args.pod_name, " now has uid ",
        pod.request.pod_uid, ", not ", args.pod_uid,
        " (it was deleted and re-created)"));
  }
  return pod;
}

namespace {

// Answers after which the Binding certainly did not happen: the apiserver
// read the request and refused it (a bad request, no such pod, no right to
// bind). Everything else (timeouts, lost connections, 409, 429, 5xx) may
// come with a committed Binding: a 409 "already assigned" can be this very
// Binding, committed by an earlier attempt whose answer was lost.
bool RefusedForSure(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kFailedPrecondition:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<api::PodPlacement> PlacementOf(std::string_view pod_json) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(pod_json, &doc));
  return api::ReadPodPlacement(doc);
}

}  // namespace

Binder::ApiVerdict Binder::BindThroughApi(const BindingArgs& args, absl::Time deadline) const {
  const std::string pod = absl::StrCat(args.pod_namespace, "/", args.pod_name);
  if (!MayWrite()) {
    return {BindStatus::kNotLeader,
            "not bound: this replica of pdc-extender is no longer sure it leads, so it sends "
            "no Binding; kube-scheduler retries the pod with the leader"};
  }
  const absl::Status s = ctx_->kube->BindPod(args.pod_namespace, args.pod_name, args.pod_uid,
                                             args.node, WriteTimeout(deadline, options_.read_back));
  if (s.ok()) return {};
  const std::string bind_error = absl::StrCat("Kubernetes API: ", s.message());
  if (RefusedForSure(s.code())) return {BindStatus::kKubeBindFailed, bind_error};

  // The apiserver may have committed the Binding: the pod says.
  auto verdict = [&](ReadBack seen, BindStatus status, std::string_view what) {
    if (ctx_->metrics) ctx_->metrics->CountReadBack(seen);
    return ApiVerdict{status, absl::StrCat(bind_error, "; read back: ", Sv(what))};
  };
  absl::StatusOr<std::string> text =
      ctx_->kube->GetPod(args.pod_namespace, args.pod_name, Left(deadline));
  if (!text.ok()) {
    if (text.status().code() == absl::StatusCode::kNotFound) {
      return verdict(ReadBack::kNotBound, BindStatus::kKubeBindFailed,
                     absl::StrCat("pod ", pod, " was deleted"));
    }
    return verdict(ReadBack::kUnknown, BindStatus::kOutcomeUnknown,
                   absl::StrCat("pod ", pod, " could not be read: ", text.status().message()));
  }
  absl::StatusOr<api::PodPlacement> placement = PlacementOf(*text);
  if (!placement.ok()) {
    return verdict(ReadBack::kUnknown, BindStatus::kOutcomeUnknown,
                   absl::StrCat("the pod the API returned is unreadable: ",
                                placement.status().message()));
  }
  if (placement->uid != args.pod_uid) {
    return verdict(ReadBack::kNotBound, BindStatus::kKubeBindFailed,
                   absl::StrCat("pod ", pod, " now has uid ", placement->uid, ", not ",
                                args.pod_uid, " (it was deleted and re-created)"));
  }
  if (placement->node_name == args.node) {
    spdlog::info("bind {} to {}: the Binding was committed although the API answered: {}",
                 pod, args.node, StdSv(s.message()));
    if (ctx_->metrics) ctx_->metrics->CountReadBack(ReadBack::kBound);
    return {};
  }
  if (!placement->node_name.empty()) {
    return verdict(ReadBack::kNotBound, BindStatus::kKubeBindFailed,
                   absl::StrCat("pod ", pod, " is bound to node ", placement->node_name));
  }
  return verdict(ReadBack::kUnknown, BindStatus::kOutcomeUnknown,
                 absl::StrCat("pod ", pod, " is not bound yet; the Binding may still be "
                              "committed"));
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

BindResult Binder::Bind(const BindingArgs& args, absl::Time deadline) const {
  if (ctx_->kube != nullptr && Left(deadline) <= absl::ZeroDuration()) {
    return Fail(args, Failure(BindStatus::kTooLate,
                              absl::StrCat("the bind waited for a free bind thread past its "
                                           "deadline (", absl::FormatDuration(options_.deadline),
                                           ", extender.bindDeadline); nothing was done")));
  }
  absl::StatusOr<PodRequest> pod = PodForBind(args, deadline);
  if (!pod.ok()) {
    return Fail(args, Failure(BindStatus::kPodNotFound,
                              StdSv(pod.status().message())));
  }
  // The bind args are authoritative for the pod's identity.
  pod->request.pod_name = args.pod_name;
  pod->request.ns = args.pod_namespace;
  pod->request.pod_uid = args.pod_uid;

  if (pod->pass_through) {
    if (ctx_->kube != nullptr) {
      // BindThroughApi sends nothing once this replica is not sure it leads.
      ApiVerdict v = BindThroughApi(args, deadline);
      if (v.status != BindStatus::kBound) return Fail(args, Failure(v.status, v.why));
    }
    if (ctx_->metrics) ctx_->metrics->CountBind(true);
    ctx_->pod_cache->Erase(args.pod_uid);
    return BindResult{};
  }

  if (!MayWrite()) {
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

  if (ctx_->kube != nullptr) {
    if (!MayWrite()) {
      Finish(attempt, *outcome);
      BindResult r = Failure(
          BindStatus::kNotLeader,
          "not bound: this replica of pdc-extender is no longer sure it leads, so it sends no "
          "annotation and no Binding; the devices stay reserved for the pod, and "
          "kube-scheduler retries it with the leader");
      r.allocation = *std::move(outcome);
      return Fail(args, std::move(r));
    }
    // Not bound by this attempt yet: undoing what it still owns is safe
    // (claims a later attempt of the pod took over are left to it).
    const absl::Status annotated = ctx_->kube->AnnotatePod(
        args.pod_namespace, args.pod_name, kDevicesAnnotation, DevicesAnnotation(*outcome),
        WriteTimeout(deadline, options_.read_back));
    if (!annotated.ok()) {
      return Fail(args, UndoAfter(attempt, BindStatus::kAnnotateFailed,
                                  absl::StrCat("Kubernetes API: ", annotated.message()),
                                  *std::move(outcome)));
    }
    ApiVerdict v = BindThroughApi(args, deadline);
    if (v.status == BindStatus::kKubeBindFailed) {
      return Fail(args, UndoAfter(attempt, v.status, std::move(v.why), *std::move(outcome)));
    }
    if (v.status == BindStatus::kNotLeader || v.status == BindStatus::kOutcomeUnknown) {
      Finish(attempt, *outcome);
    }
    if (v.status == BindStatus::kNotLeader) {
      BindResult r = Failure(v.status, std::move(v.why));
      r.allocation = *std::move(outcome);
      return Fail(args, std::move(r));
    }
    if (v.status == BindStatus::kOutcomeUnknown) {
      BindResult r = Failure(
          v.status, absl::StrCat(v.why, "; its devices stay reserved for it, so a retry or the "
                                        "pod's start finds them"));
      r.allocation = *std::move(outcome);
      return Fail(args, std::move(r));
    }
  }
  if (ctx_->metrics) ctx_->metrics->CountBind(true);
  Finish(attempt, *outcome);
  ctx_->pod_cache->Erase(args.pod_uid);
  if (MayWrite()) {
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
