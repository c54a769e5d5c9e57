// The scheduling half of AllocatorImpl: resolve, filter, score, preempt, bind,
// undo (docs/design.md §5). Filter/Score/Preemptable only read; Bind/Undo
// mutate.
#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "allocator/allocator_impl.h"
#include "allocator/placement.h"
#include "common/status_macros.h"

namespace pdc {
namespace {

// A pod of the VirtualMachineInstance whose launcher pod holds `r`, and not
// that pod: a copy of the launcher's labels and owner references (anyone
// who may create pods in the namespace can make one). KubeVirt makes one
// launcher pod per VMI (virt-controller's CurrentVMIPod); the reservation
// goes over only to a pod of the VM's next VMI (a restart).
bool SecondPodOfVmi(const Reservation& r, const RequestPlan& plan) {
  return !r.vmi_uid.empty() && r.vmi_uid == plan.vmi_uid && r.pod_uid != plan.pod_uid;
}

// Collects distinct messages for a FilterResult.
class MessageTable {
 public:
  explicit MessageTable(std::vector<std::string>* messages) : messages_(messages) {
    messages_->assign(1, "");
  }
  // `stable`: `message` stays at its address for the whole request (it
  // points into the RequestPlan or the allocator). The few stable messages
  // repeat for thousands of nodes, so each is remembered by address and its
  // text hashed once per request. A per-node message is a temporary whose
  // address may be reused by the next node's different text: never
  // remembered by address.
  uint32_t Intern(std::string_view message, bool stable) {
    if (message.empty()) return 0;
    if (!stable) return InternText(message);
    // Runs of nodes failing alike are the common case: the last one first.
    if (message.data() == last_.data() && message.size() == last_.size()) return last_index_;
    auto [it, inserted] = by_address_.try_emplace(
        std::make_pair(static_cast<const void*>(message.data()), message.size()), 0);
    if (inserted) it->second = InternText(message);
    last_ = message;
    last_index_ = it->second;
    return it->second;
  }

 private:
  uint32_t InternText(std::string_view message) {
    auto [it, inserted] = index_.try_emplace(Sv(message), messages_->size());
    if (inserted) messages_->emplace_back(message);
    return it->second;
  }

  std::vector<std::string>* messages_;
  absl::flat_hash_map<std::string, uint32_t> index_;
  absl::flat_hash_map<std::pair<const void*, size_t>, uint32_t> by_address_;
  std::string_view last_;
  uint32_t last_index_ = 0;
};

// The request only needs fresh, unpinned devices: a node that reports, has
// no pending hand-off and enough free single-device groups fits, which
// NodeHot answers without the full NodeState.
bool FreshFastPathApplies(const RequestPlan& plan) {
  if (plan.pass_through || !plan.problem.empty() || !plan.bound.empty() ||
      !plan.pin_node.empty() || plan.pending.empty() || plan.need.size() > kHotClasses) {
    return false;
  }
  for (const PendingClaim& p : plan.pending) {
    if (p.spec->address.has_value() || !p.spec->serial.empty()) return false;
  }
  return true;
}

std::string InsufficientMessage(std::string_view resource, size_t want, size_t free) {
  // The words PlaceOnNode uses for the same case.
  return absl::StrCat("insufficient free ", Sv(resource), ": want ", want, ", free ", free);
}

// 1..9 for a node where a fresh allocation fits: the policy's fill level
// after placing (1..7) plus 2 when the devices can share one NUMA node.
int FreshScore(ScoringPolicy policy, size_t healthy, size_t used_after, bool aligned) {
  const double util = healthy == 0 ? 1.0 : std::min(1.0, double(used_after) / double(healthy));
  const double fill = policy == ScoringPolicy::kBinPack ? util : 1.0 - util;
  return 1 + static_cast<int>(std::lround(6.0 * fill)) + (aligned ? 2 : 0);
}

// Caches the insufficient-devices message per (class, free count): in a
// full cluster thousands of nodes share a handful of them.
class InsufficientMessages {
 public:
  InsufficientMessages(const std::vector<DeviceClass>& classes, MessageTable& table)
      : classes_(classes), table_(table) {}
  uint32_t Get(size_t cls, size_t want, size_t free) {
    auto [it, inserted] = cache_.try_emplace(std::make_pair(cls, free), 0);
    if (inserted) {
      it->second = table_.Intern(InsufficientMessage(classes_[cls].resource_name, want, free),
                                 /*stable=*/false);
    }
    return it->second;
  }

 private:
  const std::vector<DeviceClass>& classes_;
  MessageTable& table_;
  absl::flat_hash_map<std::pair<size_t, size_t>, uint32_t> cache_;
};

}  // namespace

std::string_view ToString(FilterReason reason) {
  switch (reason) {
    case FilterReason::kPassThrough:
      return "pass_through";
    case FilterReason::kStickyHit:
      return "sticky_hit";
    case FilterReason::kFreshFit:
      return "fresh_fit";
    case FilterReason::kBoundElsewhere:
      return "bound_elsewhere";
    case FilterReason::kReservedByOther:
      return "reserved_by_other";
    case FilterReason::kInsufficient:
      return "insufficient";
    case FilterReason::kNotReporting:
      return "not_reporting";
    case FilterReason::kUnhealthy:
      return "unhealthy";
    case FilterReason::kClaimProblem:
      return "claim_problem";
    case FilterReason::kPinned:
      return "pinned";
    case FilterReason::kHandoffPending:
      return "handoff_pending";
  }
  return "unknown";
}

AllocatorImpl::Evaluation AllocatorImpl::EvaluateLocked(const RequestPlan& plan,
                                                        std::string_view node_name,
                                                        absl::Time now) const {
  Evaluation e;
  if (plan.pass_through) return e;
  if (!plan.problem.empty()) {
    return {plan.problem_may_clear ? Verdict::kFailed : Verdict::kUnresolvable,
            FilterReason::kClaimProblem, plan.problem, {}, nullptr};
  }
  if (!plan.bound_node.empty() && plan.bound_node != node_name) {
    return {Verdict::kUnresolvable, FilterReason::kBoundElsewhere, plan.bound_elsewhere, {}, nullptr};
  }
  if (!plan.pin_node.empty() && plan.pin_node != node_name) {
    return {Verdict::kUnresolvable, FilterReason::kPinned, plan.pinned_elsewhere, {}, nullptr};
  }
  const NodeState* node = state_.FindNode(node_name);
  // The name is the key of the answer's map already; a message naming it
  // would be one distinct text per node, which kube-scheduler lists one by
  // one in the pod's event ("0/5000 nodes are available: 1 ..., 1 ...").
  if (node == nullptr || !node->has_record) {
    return {Verdict::kFailed, FilterReason::kNotReporting, messages_.never_reported, {}, nullptr};
  }
  if (!ReportingLocked(*node, now)) {
    return {Verdict::kFailed, FilterReason::kNotReporting,
            node->last_report == absl::InfinitePast() ? messages_.silent_since_start
                                                      : messages_.silent,
            {}, nullptr};
  }
  e.node = node;
  for (size_t i : plan.bound) {
    const Claim& c = plan.claims[i].claim;
    if (c.status.reserved_for && !ReservedBySameVm(c, plan.ns, plan.vm, plan.vm_uid)) {
      const Reservation& r = *c.status.reserved_for;
      return {Verdict::kFailed, FilterReason::kReservedByOther, {},
              r.vm == plan.vm
                  ? absl::StrCat("claim ", c.key.ToString(), " is in use by an earlier VM named ",
                                 c.key.ns, "/", r.vm, " (uid ", r.vm_uid,
                                 "); it is released once that VM is deleted")
                  : absl::StrCat("claim ", c.key.ToString(), " is in use by VM ", c.key.ns, "/",
                                 r.vm),
              node};
    }
    if (c.status.reserved_for && SecondPodOfVmi(*c.status.reserved_for, plan)) {
      const Reservation& r = *c.status.reserved_for;
      return {Verdict::kUnresolvable, FilterReason::kReservedByOther, {},
              absl::StrCat("claim ", c.key.ToString(), " is held by pod ", r.pod_name,
                           ", the launcher pod of VirtualMachineInstance uid ", r.vmi_uid,
                           "; a VirtualMachineInstance has one launcher pod (one with host "
                           "devices is never live-migrated), so pod ",
                           plan.pod_name, " of the same VirtualMachineInstance takes over nothing"),
              node};
    }
    for (const BoundDevice& b : c.status.devices) {
      const DeviceSlot* s = node->Find(b.address);
      if (s == nullptr || s->device.health != DeviceHealth::kHealthy) {
        return {Verdict::kFailed, FilterReason::kUnhealthy, {},
                absl::StrCat("device ", b.address.ToString(), " of claim ", c.key.ToString(),
                             " is unhealthy"),
                node};
      }
    }
  }
  if (!plan.pending.empty()) {
    if (FastFitApplies(*node, plan.pending)) {
      // Every free group is a single device: the summary decides, exactly as
      // PlaceOnNode would (first class, in class order, that is short).
      for (size_t c = 0; c < plan.need.size(); ++c) {
        if (node->summary[c].free_single < plan.need[c]) {
          return {Verdict::kUnresolvable, FilterReason::kInsufficient, {},
                  absl::StrCat(InsufficientMessage(state_.classes()[c].resource_name,
                                                   plan.need[c], node->summary[c].free_single),
                               HeldDevicesNote(node->summary[c])),
                  node};
        }
      }
    } else {
      auto placed = PlaceOnNode(*node, state_.classes(), plan.pending, BoundNuma(plan, *node));
      if (!placed.ok()) {
        return {Verdict::kUnresolvable, FilterReason::kInsufficient, {},
                std::string(placed.status().message()), node};
      }
    }
  }
  if (const ClaimEntry* other = BlockingHandoffLocked(plan, *node)) {
    const Reservation& r = *other->status.reserved_for;
    return {Verdict::kFailed, FilterReason::kHandoffPending, {},
            absl::StrCat("another VM is starting on this node: ", other->key.ns, "/", r.vm,
                         " (pod ", r.pod_name, ") has not received its ",
                         other->spec.resource_name(), " devices yet"),
            node};
  }
  e.reason = plan.bound.empty() ? FilterReason::kFreshFit : FilterReason::kStickyHit;
  return e;
}

AllocatorImpl::HotVerdict AllocatorImpl::HotEvaluateLocked(const RequestPlan& plan,
                                                           const NodeHot* hot,
                                                           int64_t reporting_since_ns) const {
  if (hot == nullptr || !hot->has_record || hot->last_report_ns < reporting_since_ns) return {};
  for (size_t c = 0; c < plan.need.size(); ++c) {
    if (plan.need[c] != 0 && hot->all_single[c] == 0) return {};
  }
  for (size_t c = 0; c < plan.need.size(); ++c) {
    if (hot->free_single[c] < plan.need[c]) {
      // Held devices make the message node-specific: EvaluateLocked says why.
      if (hot->held[c] != 0) return {};
      return {HotVerdict::kInsufficient, c, hot->free_single[c]};
    }
  }
  if (hot->handoffs_pending != 0 && options_.serialize_handoffs) return {};
  return {HotVerdict::kFits, 0, 0};
}

const ClaimEntry* AllocatorImpl::BlockingHandoffLocked(const RequestPlan& plan,
                                                  const NodeState& node) const {
  if (!options_.serialize_handoffs) return nullptr;
  for (const ClaimEntry* c : node.handoff_pending) {
    const Reservation& r = *c->status.reserved_for;
    // The pod's own claims, or an older pod of the same VM (it is replaced:
    // KubeVirt runs one launcher pod per VM, and this bind takes the
    // reservation over), never block it.
    if (r.pod_uid == plan.pod_uid ||
        ReservedBySameVm(c->key.ns, r, plan.ns, plan.vm, plan.vm_uid)) {
      continue;
    }
    const int16_t cls = state_.ClassIndex(c->spec.resource_name());
    if (cls != kNoClass && plan.uses_class[cls]) return c;
  }
  return nullptr;
}

absl::StatusOr<std::vector<ResolvedClaim>> AllocatorImpl::Resolve(
    const SchedulingRequest& request) const {
  absl::ReaderMutexLock lock(&mu_);
  RequestPlan plan;
  BuildRequestPlan(state_, options_, request, plan);
  if (!plan.problem.empty()) return absl::FailedPreconditionError(plan.problem);
  return std::move(plan.claims);
}

FilterResult AllocatorImpl::Filter(const SchedulingRequest& request,
                                   absl::Span<const std::string_view> nodes) const {
  FilterResult result;
  MessageTable messages(&result.messages);
  result.nodes.resize(nodes.size());
  absl::ReaderMutexLock lock(&mu_);
  RequestPlan plan;
  BuildRequestPlan(state_, options_, request, plan);
  result.pass_through = plan.pass_through;
  if (plan.pass_through) return result;
  const absl::Time now = clock_->Now();
  const bool fast = FreshFastPathApplies(plan);
  const int64_t reporting_since_ns = ReportingSinceNs(now);
  InsufficientMessages insufficient(state_.classes(), messages);
  std::vector<const NodeHot*> hots;
  if (fast) state_.FindHots(nodes, hots);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (fast) {
      const HotVerdict h = HotEvaluateLocked(plan, hots[i], reporting_since_ns);
      if (h.outcome == HotVerdict::kFits) {
        result.nodes[i] = NodeVerdict{Verdict::kFits, FilterReason::kFreshFit, 0};
        continue;
      }
      if (h.outcome == HotVerdict::kInsufficient) {
        result.nodes[i] = NodeVerdict{
            Verdict::kUnresolvable, FilterReason::kInsufficient,
            insufficient.Get(h.short_class, plan.need[h.short_class], h.free)};
        continue;
      }
    }
    Evaluation e = EvaluateLocked(plan, nodes[i], now);
    result.nodes[i] =
        NodeVerdict{e.verdict, e.reason, messages.Intern(e.message(), !e.shared.empty())};
  }
  return result;
}

int AllocatorImpl::ScoreLocked(const RequestPlan& plan, const Evaluation& e) const {
  if (e.verdict != Verdict::kFits) return 0;
  if (plan.pass_through) return 0;
  if (!plan.bound.empty()) return 10;
  const NodeState& node = *e.node;
  size_t healthy = 0;
  size_t used_after = 0;
  for (size_t c = 0; c < plan.need.size(); ++c) {
    if (plan.need[c] == 0) continue;
    healthy += node.summary[c].healthy;
    used_after += node.summary[c].allocated + plan.need[c];
  }
  bool aligned = false;
  if (FastFitApplies(node, plan.pending)) {
    // Some NUMA node has enough free single-device groups of every class.
    auto enough_on = [&](size_t c, int16_t numa) {
      for (const auto& [n, count] : node.summary[c].free_single_by_numa) {
        if (n == numa) return count >= plan.need[c];
      }
      return false;
    };
    size_t first = 0;
    while (first < plan.need.size() && plan.need[first] == 0) ++first;
    if (first == plan.need.size()) return 0;  // Nothing to place: not a fresh fit.
    for (const auto& [numa, count] : node.summary[first].free_single_by_numa) {
      bool all = true;
      for (size_t c = first; c < plan.need.size() && all; ++c) {
        all = plan.need[c] == 0 || enough_on(c, numa);
      }
      if (all) {
        aligned = true;
        break;
      }
    }
  } else {
    auto placed = PlaceOnNode(node, state_.classes(), plan.pending, std::nullopt);
    aligned = placed.ok() && placed->numa_aligned;
  }
  return FreshScore(options_.scoring, healthy, used_after, aligned);
}

int64_t AllocatorImpl::ReportingSinceNs(absl::Time now) const {
  // ReportingLocked: now - last_report <= stale  <=>  last_report >= now - stale.
  return absl::ToUnixNanos(now - options_.node_stale_after);
}

int AllocatorImpl::HotScoreLocked(const RequestPlan& plan, const NodeHot& hot) const {
  size_t healthy = 0;
  size_t used_after = 0;
  size_t classes_needed = 0;
  size_t cls = 0;
  for (size_t c = 0; c < plan.need.size(); ++c) {
    if (plan.need[c] == 0) continue;
    healthy += hot.healthy[c];
    used_after += hot.allocated[c] + plan.need[c];
    ++classes_needed;
    cls = c;
  }
  if (classes_needed != 1) return -1;  // NUMA alignment across classes: ScoreLocked.
  const bool aligned = hot.max_single_on_numa[cls] >= plan.need[cls];
  return FreshScore(options_.scoring, healthy, used_after, aligned);
}

std::vector<int> AllocatorImpl::Score(const SchedulingRequest& request,
                                      absl::Span<const std::string_view> nodes) const {
  std::vector<int> scores(nodes.size(), 0);
  absl::ReaderMutexLock lock(&mu_);
  RequestPlan plan;
  BuildRequestPlan(state_, options_, request, plan);
  if (plan.pass_through) return scores;
  const absl::Time now = clock_->Now();
  const bool fast = FreshFastPathApplies(plan);
  const int64_t reporting_since_ns = ReportingSinceNs(now);
  std::vector<const NodeHot*> hots;
  if (fast) state_.FindHots(nodes, hots);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (fast) {
      const HotVerdict h = HotEvaluateLocked(plan, hots[i], reporting_since_ns);
      if (h.outcome == HotVerdict::kInsufficient) continue;  // Score 0.
      if (h.outcome == HotVerdict::kFits) {
        if (int score = HotScoreLocked(plan, *hots[i]); score >= 0) {
          scores[i] = score;
          continue;
        }
      }
    }
    scores[i] = ScoreLocked(plan, EvaluateLocked(plan, nodes[i], now));
  }
  return scores;
}

std::vector<std::string> AllocatorImpl::Preemptable(
    const SchedulingRequest& request, absl::Span<const std::string_view> nodes) const {
  std::vector<std::string> out;
  absl::ReaderMutexLock lock(&mu_);
  RequestPlan plan;
  BuildRequestPlan(state_, options_, request, plan);
  const absl::Time now = clock_->Now();
  for (std::string_view n : nodes) {
    Evaluation e = EvaluateLocked(plan, n, now);
    // Evicting pods helps where the pod already fits on devices, or where
    // another VM's pod holds the pod's bound claim.
    if (e.verdict == Verdict::kFits || e.reason == FilterReason::kReservedByOther) {
      out.emplace_back(n);
    }
  }
  return out;
}

}  // namespace pdc
