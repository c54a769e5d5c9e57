#include "extender/scheduler_handlers.h"

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "extender/json_response.h"
#include "rapidjson/document.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

using api::BindingArgs;
using api::ExtenderArgs;
using api::FilterOutput;
using api::NodeVictims;
using api::ParseExtenderArgs;
using api::PodRequest;
using api::PodToRequest;
using api::PreemptionArgs;
using api::ReadBindingArgs;
using api::ReadPreemptionArgs;
using api::WriteBindingResult;
using api::WriteFilterError;
using api::WriteFilterResult;
using api::WriteHostPriorityList;
using api::WritePreemptionResult;
using api::kDevicesAnnotation;
namespace {

// Filter outcome counters by FilterReason value (a power of two above the
// largest reason, so a new reason never indexes out of range).
constexpr size_t kFilterReasonSlots = 16;

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
  absl::StatusOr<ExtenderArgs> args = ParseExtenderArgs(body, &doc);
  if (!args.ok()) return ErrorResponse(args.status());
  absl::StatusOr<PodRequest> pod = PodToRequest(*args->pod, ctx_->managed);
  if (!pod.ok()) {
    if (IsPodProblem(pod.status())) {
      return JsonResponse(
          200, WriteFilterError(StdSv(pod.status().message())));
    }
    return ErrorResponse(pod.status());
  }
  ctx_->pod_cache->Put(*pod);
  const size_t n = args->node_names.size();
  FilterOutput out;
  // Pods without a managed device: every node passes, no allocator call.
  if (pod->pass_through) {
    out.passed.resize(n);
    for (size_t i = 0; i < n; ++i) out.passed[i] = i;
    if (ctx_->metrics) ctx_->metrics->CountFilter(FilterReason::kPassThrough, n);
    return JsonResponse(200, WriteFilterResult(*args, out));
  }
  const FilterResult result = ctx_->allocator->Filter(pod->request, args->node_names);
  out.quoted_messages.reserve(result.messages.size() + 1);
  for (const std::string& m : result.messages) {
    out.quoted_messages.push_back(json::Quote(m));
  }
  if (out.quoted_messages.empty()) out.quoted_messages.push_back("\"\"");
  const uint32_t messages = static_cast<uint32_t>(out.quoted_messages.size());
  // Counted per request, one counter update per reason seen.
  std::array<size_t, kFilterReasonSlots> counts{};
  out.passed.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const NodeVerdict v = i < result.nodes.size() ? result.nodes[i] : NodeVerdict{};
    if (result.pass_through) {
      out.passed.push_back(i);
      ++counts[static_cast<size_t>(FilterReason::kPassThrough)];
      continue;
    }
    ++counts[static_cast<size_t>(v.reason) % kFilterReasonSlots];
    const uint32_t why = v.message < messages ? v.message : 0;
    switch (v.verdict) {
      case Verdict::kFits:
        out.passed.push_back(i);
        break;
      case Verdict::kFailed:
        out.failed.emplace_back(i, why);
        break;
      case Verdict::kUnresolvable:
        out.unresolvable.emplace_back(i, why);
        break;
    }
  }
  if (ctx_->metrics) {
    for (size_t r = 0; r < counts.size(); ++r) {
      if (counts[r] != 0) {
        ctx_->metrics->CountFilter(static_cast<FilterReason>(r), counts[r]);
      }
    }
  }
  if (out.passed.empty() && spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("filter: no node fits vm={}/{} pod={} ({} candidates{})",
                  pod->request.ns, pod->request.vm, pod->request.pod_name, n,
                  result.messages.size() > 1
                      ? absl::StrCat(", e.g. ", result.messages[1])
                      : std::string());
  }
  return JsonResponse(200, WriteFilterResult(*args, out));
}

HttpResponse SchedulerHandlers::Prioritize(std::string& body) const {
  rapidjson::Document doc;
  absl::StatusOr<ExtenderArgs> args = ParseExtenderArgs(body, &doc);
  if (!args.ok()) return ErrorResponse(args.status());
  absl::StatusOr<PodRequest> pod = PodToRequest(*args->pod, ctx_->managed);
  // HostPriorityList has no Error field: a pod problem scores 0 everywhere
  // (filter already reported it).
  std::vector<int> scores;
  if (!pod.ok() && !IsPodProblem(pod.status())) {
    return ErrorResponse(pod.status());
  }
  if (pod.ok() && !pod->pass_through) {
    scores = ctx_->allocator->Score(pod->request, args->node_names);
  }
  return JsonResponse(200,
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
    return ErrorResponse(s);
  }
  absl::StatusOr<BindingArgs> args = ReadBindingArgs(doc);
  if (!args.ok()) return ErrorResponse(args.status());
  auto fail = [&](std::string_view why) {
    if (ctx_->metrics) ctx_->metrics->CountBind(false);
    spdlog::warn("bind {}/{} to {} failed: {}", args->pod_namespace,
                 args->pod_name, args->node, why);
    return JsonResponse(200, WriteBindingResult(why));
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
    return JsonResponse(200, WriteBindingResult(""));
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
  return JsonResponse(200, WriteBindingResult(""));
}

// kube-scheduler's contract for the answer (pkg/scheduler/extender.go
// ProcessPreemption, framework/preemption callExtenders):
//  - the victims of a node are turned back into pods by UID from that node,
//    so a UID kube-scheduler did not send for the node fails the preemption:
//    we never add a victim, and keep its list (sorted by importance; it reads
//    Pods[0] when choosing a node) as sent, repeats dropped;
//  - a node answered with no victims fails the whole preemption of a
//    non-ignorable extender ("expected at least one victim pod"): such a
//    node is dropped;
//  - the answer is a Go map: a node sent twice counts once with its last
//    value (encoding/json), and we write nodes sorted by name, as Go
//    marshals a map, so the answer does not depend on the input order.
HttpResponse SchedulerHandlers::Preempt(std::string& body) const {
  rapidjson::Document doc;
  if (absl::Status s = json::ParseInsitu(body, &doc); !s.ok()) {
    return ErrorResponse(s);
  }
  absl::StatusOr<PreemptionArgs> args = ReadPreemptionArgs(doc);
  if (!args.ok()) return ErrorResponse(args.status());
  absl::StatusOr<PodRequest> pod = PodToRequest(*args->pod, ctx_->managed);
  if (!pod.ok()) {
    if (!IsPodProblem(pod.status())) return ErrorResponse(pod.status());
    // A pod that cannot be placed: no preemption helps.
    return JsonResponse(200, WritePreemptionResult(*args, {}));
  }
  // Candidates: one per node name (the last occurrence), with victims, in
  // name order.
  std::vector<size_t> candidates;
  {
    absl::flat_hash_map<std::string_view, size_t> last;
    for (size_t i = 0; i < args->nodes.size(); ++i) {
      last[args->nodes[i].node] = i;
    }
    for (const auto& [name, i] : last) {
      NodeVictims& nv = args->nodes[i];
      absl::flat_hash_set<std::string_view> seen;
      std::vector<std::string_view> uids;
      for (std::string_view uid : nv.pod_uids) {
        if (seen.insert(uid).second) uids.push_back(uid);
      }
      nv.pod_uids = std::move(uids);
      if (!nv.pod_uids.empty()) candidates.push_back(i);
    }
    std::sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
      return args->nodes[a].node < args->nodes[b].node;
    });
  }
  if (pod->pass_through || candidates.empty()) {
    return JsonResponse(200, WritePreemptionResult(*args, candidates));
  }
  std::vector<std::string_view> names;
  names.reserve(candidates.size());
  for (size_t i : candidates) names.push_back(args->nodes[i].node);
  const std::vector<std::string> ok =
      ctx_->allocator->Preemptable(pod->request, names);
  const absl::flat_hash_set<std::string> helpful(ok.begin(), ok.end());
  // Where another VM's pod holds this pod's bound claim, evicting helps only
  // if that pod is among the node's victims.
  absl::flat_hash_map<std::string, std::vector<std::string>> holders;
  if (absl::StatusOr<std::vector<ResolvedClaim>> claims =
          ctx_->allocator->Resolve(pod->request);
      claims.ok()) {
    for (const ResolvedClaim& rc : *claims) {
      const ClaimStatus& st = rc.claim.status;
      if (rc.exists && st.phase == ClaimPhase::kBound && st.reserved_for &&
          st.reserved_for->vm != pod->request.vm) {
        holders[st.node].push_back(st.reserved_for->pod_uid);
      }
    }
  }
  std::vector<size_t> keep;
  for (size_t i : candidates) {
    const NodeVictims& nv = args->nodes[i];
    if (!helpful.contains(Sv(nv.node))) continue;
    auto h = holders.find(Sv(nv.node));
    const bool holders_evicted =
        h == holders.end() ||
        std::all_of(h->second.begin(), h->second.end(),
                    [&](const std::string& uid) {
                      return std::find(nv.pod_uids.begin(), nv.pod_uids.end(),
                                       uid) != nv.pod_uids.end();
                    });
    if (holders_evicted) keep.push_back(i);
  }
  return JsonResponse(200, WritePreemptionResult(*args, keep));
}

}  // namespace pdc::extender
