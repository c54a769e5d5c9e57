#include "extender/kube_bind_target.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "rapidjson/document.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

namespace json = api::json;
using api::BindingArgs;

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

absl::Duration KubeBindTarget::Left(const BindBudget& budget, absl::Duration reserve) const {
  return budget.at - options_.clock->Now() - reserve;
}

bool KubeBindTarget::MayWrite() const {
  return !options_.leadership_left || options_.leadership_left() > absl::ZeroDuration();
}

absl::Duration KubeBindTarget::WriteTimeout(const BindBudget& budget,
                                            absl::Duration reserve) const {
  absl::Duration left = Left(budget, reserve);
  if (options_.leadership_left) left = std::min(left, options_.leadership_left());
  return left;
}

absl::StatusOr<std::string> KubeBindTarget::ReadPod(const BindingArgs& args,
                                                    const BindBudget& budget) const {
  absl::StatusOr<std::string> text =
      kube_->GetPod(args.pod_namespace, args.pod_name, Left(budget, budget.read_back));
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("reading pod ", args.pod_namespace, "/", args.pod_name,
                                     " from the Kubernetes API: ", text.status().message()));
  }
  return text;
}

BindTarget::Verdict KubeBindTarget::Publish(const BindingArgs& args, const BindOutcome* outcome,
                                            const BindBudget& budget) const {
  if (outcome == nullptr) return PostBinding(args, budget);
  if (!MayWrite()) {
    return {BindStatus::kNotLeader,
            "not bound: this replica of pdc-extender is no longer sure it leads, so it sends no "
            "annotation and no Binding; the devices stay reserved for the pod, and "
            "kube-scheduler retries it with the leader"};
  }
  const absl::Status annotated =
      kube_->AnnotatePod(args.pod_namespace, args.pod_name, api::kDevicesAnnotation,
                         DevicesAnnotation(*outcome), WriteTimeout(budget, budget.read_back));
  if (!annotated.ok()) {
    return {BindStatus::kAnnotateFailed, absl::StrCat("Kubernetes API: ", annotated.message())};
  }
  return PostBinding(args, budget);
}

BindTarget::Verdict KubeBindTarget::PostBinding(const BindingArgs& args,
                                                const BindBudget& budget) const {
  const std::string pod = absl::StrCat(args.pod_namespace, "/", args.pod_name);
  if (!MayWrite()) {
    return {BindStatus::kNotLeader,
            "not bound: this replica of pdc-extender is no longer sure it leads, so it sends "
            "no Binding; kube-scheduler retries the pod with the leader"};
  }
  const absl::Status s = kube_->BindPod(args.pod_namespace, args.pod_name, args.pod_uid,
                                        args.node, WriteTimeout(budget, budget.read_back));
  if (s.ok()) return {};
  const std::string bind_error = absl::StrCat("Kubernetes API: ", s.message());
  if (RefusedForSure(s.code())) return {BindStatus::kKubeBindFailed, bind_error};

  // The apiserver may have committed the Binding: the pod says.
  auto verdict = [&](ReadBack seen, BindStatus status, std::string_view what) {
    if (options_.metrics) options_.metrics->CountReadBack(seen);
    return Verdict{status, absl::StrCat(bind_error, "; read back: ", Sv(what))};
  };
  absl::StatusOr<std::string> text =
      kube_->GetPod(args.pod_namespace, args.pod_name, Left(budget, absl::ZeroDuration()));
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
    spdlog::info("bind {} to {}: the Binding was committed although the API answered: {}", pod,
                 args.node, StdSv(s.message()));
    if (options_.metrics) options_.metrics->CountReadBack(ReadBack::kBound);
    return {};
  }
  if (!placement->node_name.empty()) {
    return verdict(ReadBack::kNotBound, BindStatus::kKubeBindFailed,
                   absl::StrCat("pod ", pod, " is bound to node ", placement->node_name));
  }
  return verdict(ReadBack::kUnknown, BindStatus::kOutcomeUnknown,
                 absl::StrCat("pod ", pod,
                              " is not bound yet; the Binding may still be committed"));
}

}  // namespace pdc::extender
