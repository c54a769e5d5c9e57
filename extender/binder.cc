#include "extender/binder.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "api/json_util.h"
#include "rapidjson/document.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

namespace json = api::json;
using api::BindingArgs;
using api::kDevicesAnnotation;
using api::PodRequest;
using api::PodToRequest;

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
  for (auto& [res, addrs] : by_resource) {
    std::sort(addrs.begin(), addrs.end());
    json::Key(w, res);
    w.StartArray();
    for (const std::string& a : addrs) json::Str(w, a);
    w.EndArray();
  }
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<PodRequest> Binder::PodForBind(const BindingArgs& args) const {
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
  absl::StatusOr<std::string> text =
      ctx_->kube->GetPod(args.pod_namespace, args.pod_name);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("reading pod ", args.pod_namespace, "/",
                                     args.pod_name, " from the Kubernetes API: ",
                                     text.status().message()));
  }
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(*text, &doc));
  ASSIGN_OR_RETURN(PodRequest pod, PodToRequest(doc, ctx_->managed));
  if (pod.request.pod_uid != args.pod_uid) {
    return absl::AbortedError(absl::StrCat(
        "pod ", args.pod_namespace, "/", args.pod_name, " now has uid ",
        pod.request.pod_uid, ", not ", args.pod_uid,
        " (it was deleted and re-created)"));
  }
  return pod;
}

BindResult Binder::Fail(const BindingArgs& args, BindResult result) const {
  if (ctx_->metrics) ctx_->metrics->CountBind(false);
  spdlog::warn("bind {}/{} to {} failed: {}", args.pod_namespace,
               args.pod_name, args.node, result.error);
  return result;
}

BindResult Binder::Bind(const BindingArgs& args) const {
  absl::StatusOr<PodRequest> pod = PodForBind(args);
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
      absl::Status s = ctx_->kube->BindPod(args.pod_namespace, args.pod_name,
                                           args.pod_uid, args.node);
      if (!s.ok()) {
        return Fail(args,
                    Failure(BindStatus::kKubeBindFailed, StdSv(s.message())));
      }
    }
    if (ctx_->metrics) ctx_->metrics->CountBind(true);
    ctx_->pod_cache->Erase(args.pod_uid);
    return BindResult{};
  }

  absl::StatusOr<BindOutcome> outcome =
      ctx_->allocator->Bind(pod->request, args.node);
  if (!outcome.ok()) {
    return Fail(args, Failure(BindStatus::kAllocatorRefused,
                              StdSv(outcome.status().message())));
  }

  if (ctx_->kube != nullptr) {
    BindStatus failed = BindStatus::kAnnotateFailed;
    absl::Status s = ctx_->kube->AnnotatePod(
        args.pod_namespace, args.pod_name, kDevicesAnnotation,
        DevicesAnnotation(*outcome));
    if (s.ok()) {
      failed = BindStatus::kKubeBindFailed;
      s = ctx_->kube->BindPod(args.pod_namespace, args.pod_name, args.pod_uid,
                              args.node);
    }
    if (!s.ok()) {
      absl::Status undo = ctx_->allocator->Undo(*outcome);
      if (ctx_->metrics) ctx_->metrics->CountRollback();
      BindResult r =
          Failure(failed, absl::StrCat("Kubernetes API: ", s.message()));
      if (!undo.ok()) {
        absl::StrAppend(&r.error, "; undoing the allocation also failed: ",
                        undo.message());
      }
      r.allocation = *std::move(outcome);
      r.undo_status = std::move(undo);
      return Fail(args, std::move(r));
    }
  }
  if (ctx_->metrics) ctx_->metrics->CountBind(true);
  ctx_->pod_cache->Erase(args.pod_uid);
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
