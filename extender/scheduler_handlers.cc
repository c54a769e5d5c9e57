#include "extender/scheduler_handlers.h"

#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "extender/json_util.h"
#include "rapidjson/document.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {
namespace {

// Pod-level problems the user must fix: reported as Error, not HTTP 4xx.
bool IsPodProblem(const absl::Status& s) {
  return json::HttpStatusFor(s) == 422;
}

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

HttpResponse SchedulerHandlers::Filter(std::string& body) const {
  rapidjson::Document doc;
  if (absl::Status s = json::ParseInsitu(body, &doc); !s.ok()) {
    return json::ErrorResponse(s);
  }
  absl::StatusOr<ExtenderArgs> args = ReadExtenderArgs(doc);
  if (!args.ok()) return json::ErrorResponse(args.status());
  absl::StatusOr<PodRequest> pod = PodToRequest(*args->pod, ctx_->managed);
  if (!pod.ok()) {
    if (IsPodProblem(pod.status())) {
      return json::JsonResponse(
          200, WriteFilterError(StdSv(pod.status().message())));
    }
    return json::ErrorResponse(pod.status());
  }
  ctx_->pod_cache->Put(*pod);
  FilterOutput out;
  if (pod->pass_through) {
    out.passed.resize(args->node_names.size());
    for (size_t i = 0; i < out.passed.size(); ++i) out.passed[i] = i;
    if (ctx_->metrics) {
      ctx_->metrics->CountFilter(FilterReason::kPassThrough, out.passed.size());
    }
    return json::JsonResponse(200, WriteFilterResult(*args, out));
  }
  const FilterResult result =
      ctx_->allocator->Filter(pod->request, args->node_names);
  std::array<size_t, 16> counts{};
  out.quoted_messages.reserve(result.messages.size());
  for (const std::string& m : result.messages) {
    out.quoted_messages.push_back(json::Quote(m));
  }
  if (out.quoted_messages.empty()) out.quoted_messages.push_back("\"\"");
  const auto message = [&](const NodeVerdict& v) -> uint32_t {
    return v.message < out.quoted_messages.size() ? v.message : 0;
  };
  for (size_t i = 0; i < args->node_names.size(); ++i) {
    const NodeVerdict v =
        i < result.nodes.size() ? result.nodes[i] : NodeVerdict{};
    if (result.pass_through) {
      out.passed.push_back(i);
      ++counts[static_cast<size_t>(FilterReason::kPassThrough)];
      continue;
    }
    ++counts[static_cast<size_t>(v.reason) & 15];
    switch (v.verdict) {
      case Verdict::kFits:
        out.passed.push_back(i);
        break;
      case Verdict::kFailed:
        out.failed.emplace_back(i, message(v));
        break;
      case Verdict::kUnresolvable:
        out.unresolvable.emplace_back(i, message(v));
        break;
    }
  }
  if (ctx_->metrics) {
    for (size_t r = 0; r < counts.size(); ++r) {
      ctx_->metrics->CountFilter(static_cast<FilterReason>(r), counts[r]);
    }
  }
  if (out.passed.empty() && spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("filter: no node fits vm={}/{} pod={} ({} candidates{})",
                  pod->request.ns, pod->request.vm, pod->request.pod_name,
                  args->node_names.size(),
                  result.messages.size() > 1
                      ? absl::StrCat(", e.g. ", result.messages[1])
                      : std::string());
  }
  return json::JsonResponse(200, WriteFilterResult(*args, out));
}

HttpResponse SchedulerHandlers::Prioritize(std::string& body) const {
  rapidjson::Document doc;
  if (absl::Status s = json::ParseInsitu(body, &doc); !s.ok()) {
    return json::ErrorResponse(s);
  }
  absl::StatusOr<ExtenderArgs> args = ReadExtenderArgs(doc);
  if (!args.ok()) return json::ErrorResponse(args.status());
  absl::StatusOr<PodRequest> pod = PodToRequest(*args->pod, ctx_->managed);
  // HostPriorityList has no Error field: a pod problem scores 0 everywhere
  // (filter already reported it).
  std::vector<int> scores;
  if (!pod.ok() && !IsPodProblem(pod.status())) {
    return json::ErrorResponse(pod.status());
  }
  if (pod.ok() && !pod->pass_through) {
    scores = ctx_->allocator->Score(pod->request, args->node_names);
  }
  return json::JsonResponse(200,
                            WriteHostPriorityList(args->node_names, scores));
}

absl::StatusOr<PodRequest> SchedulerHandlers::PodForBind(
    const BindingArgs& args) const {
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

HttpResponse SchedulerHandlers::Bind(std::string& body) const {
  rapidjson::Document doc;
  if (absl::Status s = json::ParseInsitu(body, &doc); !s.ok()) {
    return json::ErrorResponse(s);
  }
  absl::StatusOr<BindingArgs> args = ReadBindingArgs(doc);
  if (!args.ok()) return json::ErrorResponse(args.status());
  auto fail = [&](std::string_view why) {
    if (ctx_->metrics) ctx_->metrics->CountBind(false);
    spdlog::warn("bind {}/{} to {} failed: {}", args->pod_namespace,
                 args->pod_name, args->node, why);
    return json::JsonResponse(200, WriteBindingResult(why));
  };
  absl::StatusOr<PodRequest> pod = PodForBind(*args);
  if (!pod.ok()) return fail(StdSv(pod.status().message()));
  // The bind args are authoritative for the pod's identity.
  pod->request.pod_name = args->pod_name;
  pod->request.ns = args->pod_namespace;
  pod->request.pod_uid = args->pod_uid;

  if (pod->pass_through) {
    if (ctx_->kube != nullptr) {
      absl::Status s = ctx_->kube->BindPod(args->pod_namespace, args->pod_name,
                                           args->pod_uid, args->node);
      if (!s.ok()) return fail(StdSv(s.message()));
    }
    if (ctx_->metrics) ctx_->metrics->CountBind(true);
    ctx_->pod_cache->Erase(args->pod_uid);
    return json::JsonResponse(200, WriteBindingResult(""));
  }

  absl::StatusOr<BindOutcome> outcome =
      ctx_->allocator->Bind(pod->request, args->node);
  if (!outcome.ok()) return fail(StdSv(outcome.status().message()));
  ctx_->notifier->Bump();

  if (ctx_->kube != nullptr) {
    absl::Status s = ctx_->kube->AnnotatePod(
        args->pod_namespace, args->pod_name, kDevicesAnnotation,
        DevicesAnnotation(*outcome));
    if (s.ok()) {
      s = ctx_->kube->BindPod(args->pod_namespace, args->pod_name,
                              args->pod_uid, args->node);
    }
    if (!s.ok()) {
      absl::Status undo = ctx_->allocator->Undo(*outcome);
      ctx_->notifier->Bump();
      if (ctx_->metrics) ctx_->metrics->CountRollback();
      std::string why = absl::StrCat("Kubernetes API: ", s.message());
      if (!undo.ok()) {
        absl::StrAppend(&why, "; undoing the allocation also failed: ",
                        undo.message());
      }
      return fail(why);
    }
  }
  if (ctx_->metrics) ctx_->metrics->CountBind(true);
  ctx_->pod_cache->Erase(args->pod_uid);
  spdlog::info("bind vm={}/{} pod={} uid={} node={} claims=[{}] devices=[{}] "
               "revision={}",
               pod->request.ns, pod->request.vm, args->pod_name, args->pod_uid,
               args->node, ClaimList(*outcome), DeviceList(*outcome),
               outcome->revision);
  return json::JsonResponse(200, WriteBindingResult(""));
}

HttpResponse SchedulerHandlers::Preempt(std::string& body) const {
  rapidjson::Document doc;
  if (absl::Status s = json::ParseInsitu(body, &doc); !s.ok()) {
    return json::ErrorResponse(s);
  }
  absl::StatusOr<PreemptionArgs> args = ReadPreemptionArgs(doc);
  if (!args.ok()) return json::ErrorResponse(args.status());
  absl::StatusOr<PodRequest> pod = PodToRequest(*args->pod, ctx_->managed);
  if (!pod.ok()) {
    if (!IsPodProblem(pod.status())) return json::ErrorResponse(pod.status());
    // A pod that cannot be placed: no preemption helps.
    return json::JsonResponse(200, WritePreemptionResult(*args, {}));
  }
  std::vector<size_t> keep;
  if (pod->pass_through) {
    for (size_t i = 0; i < args->nodes.size(); ++i) keep.push_back(i);
  } else {
    std::vector<std::string_view> names;
    for (const NodeVictims& nv : args->nodes) names.push_back(nv.node);
    const std::vector<std::string> ok =
        ctx_->allocator->Preemptable(pod->request, names);
    const absl::flat_hash_set<std::string> helpful(ok.begin(), ok.end());
    for (size_t i = 0; i < names.size(); ++i) {
      if (helpful.contains(Sv(names[i]))) keep.push_back(i);
    }
  }
  return json::JsonResponse(200, WritePreemptionResult(*args, keep));
}

}  // namespace pdc::extender
