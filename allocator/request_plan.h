// RequestPlan: a scheduling request resolved against one consistent state —
// which claims the pod needs (explicit, existing template, or template to be
// created at bind), which are already bound and where, which still need
// devices, and any problem that makes every node unsuitable.
// Internal to allocator/; pure over the ClusterState it is given.
// Thread-safety: none; built and used under the allocator's lock.
#ifndef PDC_ALLOCATOR_REQUEST_PLAN_H_
#define PDC_ALLOCATOR_REQUEST_PLAN_H_

#include <optional>
#include <string>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/cluster_state.h"
#include "allocator/placement.h"

namespace pdc {

struct RequestPlan {
  bool pass_through = false;  // The pod needs no managed device.
  std::string ns;             // The pod's (and its claims') namespace.
  std::string vm;             // The requesting VM.
  std::string vm_uid;         // Its UID, "" when unknown (docs/design.md §4.5).
  std::string pod_uid;        // The requesting pod.
  std::string pod_name;       // Its name, for messages.
  std::string vmi_uid;        // Its VMI's UID, "" when unknown (Kubernetes mode).
  // Non-empty: no node can run the pod until the claims change (a missing or
  // Lost claim, claims inconsistent with the pod's requests).
  std::string problem;
  // The problem clears without anyone acting on pdc (Verdict::kFailed, not
  // kUnresolvable): the template claim of an earlier VM of the same name,
  // which Kubernetes' garbage collector deletes with that VM, or an object
  // that still takes the template claim's name
  // (AllocatorOptions::template_name_taken).
  bool problem_may_clear = false;
  std::vector<ResolvedClaim> claims;  // Sorted by key.
  std::string bound_node;             // Where the bound claims are, or "".
  std::string pin_node;               // Node the pending claims are pinned to.
  std::vector<size_t> bound;          // Indices of Bound claims.
  std::vector<PendingClaim> pending;  // Point into `claims`; keep the plan still.
  std::vector<size_t> need;           // Devices wanted per class (pending only).
  std::vector<uint8_t> uses_class;    // 1 where any of the claims is of the class.
  // Messages for nodes that are not bound_node / pin_node, prepared once per
  // request.
  std::string bound_elsewhere;
  std::string pinned_elsewhere;

  RequestPlan() = default;
  RequestPlan(const RequestPlan&) = delete;  // `pending` points into `claims`.
  RequestPlan& operator=(const RequestPlan&) = delete;
};

// Fills `plan` (which must be fresh) from `request`.
void BuildRequestPlan(const ClusterState& state, const AllocatorOptions& options,
                      const SchedulingRequest& request, RequestPlan& plan);

// NUMA node of the plan's devices already bound on `node`, if any.
std::optional<int16_t> BoundNuma(const RequestPlan& plan, const NodeState& node);

// Deterministic claim uid from its key and the revision that created it.
std::string MakeClaimUid(const ClaimKey& key, uint64_t revision);

}  // namespace pdc

#endif  // PDC_ALLOCATOR_REQUEST_PLAN_H_
