#include "extender/scheduler_handlers.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/strings.h"
#include "extender/bind_queue.h"
#include "extender/vm_directory.h"
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

}  // namespace

HttpResponse SchedulerHandlers::Filter(std::string& body) const {
  rapidjson::Document doc;
  absl::StatusOr<ExtenderArgs> args = ParseExtenderArgs(body, &doc);
  if (!args.ok()) return ErrorResponse(args.status());
  absl::StatusOr<PodRequest> pod = PodForScheduling(*args->pod, ctx_->managed, ctx_->vms);
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
    // Cut short: a message may name a node as kube-scheduler sent it.
    const std::string_view example =
        result.messages.size() > 1 ? std::string_view(result.messages[1]).substr(0, 512)
                                   : std::string_view();
    spdlog::debug("filter: no node fits vm={}/{} pod={} ({} candidates{}{})",
                  pod->request.ns, pod->request.vm, pod->request.pod_name, n,
                  example.empty() ? "" : ", e.g. ", example);
  }
  return JsonResponse(200, WriteFilterResult(*args, out));
}

HttpResponse SchedulerHandlers::Prioritize(std::string& body) const {
  rapidjson::Document doc;
  absl::StatusOr<ExtenderArgs> args = ParseExtenderArgs(body, &doc);
  if (!args.ok()) return ErrorResponse(args.status());
  absl::StatusOr<PodRequest> pod = PodForScheduling(*args->pod, ctx_->managed, ctx_->vms);
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

HttpResponse SchedulerHandlers::Bind(net::HttpRequest& request) const {
  if (request.resume_token != 0) return ResumeBind(request);
  rapidjson::Document doc;
  if (absl::Status s = json::ParseInsitu(request.body, &doc); !s.ok()) {
    return ErrorResponse(s);
  }
  absl::StatusOr<BindingArgs> args = ReadBindingArgs(doc);
  if (!args.ok()) return ErrorResponse(args.status());
  if (!request.allow_wait) {  // The server is stopping.
    return JsonResponse(200, WriteBindingResult("pdc-extender is stopping; kube-scheduler "
                                                "will retry the pod"));
  }
  absl::StatusOr<Binds::Ticket> t = binds_->Start(*args);
  if (!t.ok()) return JsonResponse(200, WriteBindingResult(StdSv(t.status().message())));
  if (std::optional<BindResult> result = binds_->Take(t->token)) {  // Ended already.
    return JsonResponse(200, WriteBindingResult(result->error));
  }
  HttpResponse r;
  r.long_poll = net::LongPoll{t->seen, binds_->max_wait(), t->topic, t->token};
  return r;
}

HttpResponse SchedulerHandlers::ResumeBind(const net::HttpRequest& request) const {
  const uint64_t token = request.resume_token;
  const std::string topic = BindQueue::Topic(token);
  // Read before Take: an end after a miss moves the topic past `seen`.
  const uint64_t seen = ctx_->notifier->version(topic);
  if (std::optional<BindResult> result = binds_->Take(token)) {
    return JsonResponse(200, WriteBindingResult(result->error));
  }
  if (request.allow_wait) {
    HttpResponse r;
    r.long_poll = net::LongPoll{seen, binds_->max_wait(), topic, token};
    return r;
  }
  binds_->Abandon(token);
  return JsonResponse(
      200, WriteBindingResult(absl::StrCat(
               "the bind did not end within ", absl::FormatDuration(binds_->max_wait()),
               " (the Kubernetes API is slow, or pdc-extender is stopping); if it was "
               "committed the pod runs with its devices, else kube-scheduler retries it")));
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
  absl::StatusOr<PodRequest> pod = PodForScheduling(*args->pod, ctx_->managed, ctx_->vms);
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
          !ReservedBySameVm(rc.claim, pod->request.ns, pod->request.vm, pod->request.vm_uid)) {
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
