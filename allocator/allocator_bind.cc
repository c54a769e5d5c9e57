// Bind and Undo of AllocatorImpl: the only scheduling paths that mutate.
#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "allocator/allocator_impl.h"
#include "allocator/placement.h"
#include "common/status_macros.h"

namespace pdc {

absl::StatusOr<BindOutcome> AllocatorImpl::Bind(const SchedulingRequest& request,
                                                std::string_view node_name) {
  if (request.pod_uid.empty()) {
    return absl::InvalidArgumentError("pod uid: must not be empty for a bind");
  }
  BindOutcome out;
  out.node = std::string(node_name);
  out.pod_uid = request.pod_uid;
  Commit commit;
  Store::Ticket prior = 0;  // A retried bind: what it relies on.
  {
    MutationLock lock(this);
    RETURN_IF_ERROR(FailedLocked());
    RequestPlan plan;
    BuildRequestPlan(state_, options_, request, plan);
    out.revision = state_.revision();
    if (plan.pass_through) return out;
    if (!plan.problem.empty()) {
      // Whether or not it may clear later, binding now is refused.
      return absl::FailedPreconditionError(
          absl::StrCat("node ", Sv(node_name), " cannot run the pod: ", plan.problem));
    }
    const Evaluation e = EvaluateLocked(plan, node_name, clock_->Now());
    if (e.verdict == Verdict::kFailed) {
      return absl::AbortedError(
          absl::StrCat("node ", Sv(node_name), " no longer fits the pod: ", Sv(e.message())));
    }
    if (e.verdict == Verdict::kUnresolvable) {
      return absl::FailedPreconditionError(
          absl::StrCat("node ", Sv(node_name), " cannot run the pod: ", Sv(e.message())));
    }
    Placement placed;
    if (!plan.pending.empty()) {
      auto p = PlaceOnNode(*e.node, state_.classes(), plan.pending, BoundNuma(plan, *e.node));
      if (!p.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("node ", Sv(node_name), " cannot run the pod: ", p.status().message()));
      }
      placed = *std::move(p);
    }

    const uint64_t revision = state_.revision() + 1;
    Reservation reservation{request.vm, request.pod_name, request.pod_uid, request.vm_uid};
    reservation.vmi_uid = request.vmi_uid;
    std::vector<Mutation> mutations;
    std::vector<PciAddress> allocated;
    size_t next_pending = 0;
    // Each claim's place in the pod (Reservation::claim_rank, from 1): named
    // claims in annotation order, then template claims (plan.claims is by
    // key, so by resource for template claims of one VM).
    uint32_t next_template_rank = static_cast<uint32_t>(request.claim_names.size()) + 1;
    std::vector<uint32_t> ranks;
    for (const ResolvedClaim& r : plan.claims) {
      Claim c = r.claim;
      Reservation claim_reservation = reservation;
      auto named = std::find(request.claim_names.begin(), request.claim_names.end(), r.key.name);
      claim_reservation.claim_rank =
          named != request.claim_names.end()
              ? static_cast<uint32_t>(named - request.claim_names.begin()) + 1
              : next_template_rank++;
      ranks.push_back(claim_reservation.claim_rank);
      BoundClaim bc;
      bc.key = r.key;
      bc.resource_name = c.spec.resource_name;
      bc.created = !r.exists;
      bc.previous_reservation = c.status.reserved_for;
      if (!r.exists) {
        c.created_revision = revision;
        c.uid = MakeClaimUid(r.key, revision);
      }
      if (c.status.phase == ClaimPhase::kPending) {
        c.status.phase = ClaimPhase::kBound;
        c.status.node = std::string(node_name);
        c.status.devices.clear();
        for (PciAddress a : placed.devices[next_pending]) {
          c.status.devices.push_back(BoundDevice{a, e.node->Find(a)->device.serial});
          allocated.push_back(a);
        }
        ++next_pending;
        bc.allocated = true;
      }
      // A template claim made before VM UIDs were kept is this VM's: it
      // learns the UID, so a VM re-created under the name does not inherit it.
      const bool adopted = r.exists && c.spec.owner_vm == request.vm &&
                           c.spec.owner_vm_uid.empty() && !request.vm_uid.empty();
      if (adopted) c.spec.owner_vm_uid = request.vm_uid;
      const bool changed =
          bc.created || bc.allocated || adopted || c.status.reserved_for != claim_reservation;
      c.status.reserved_for = claim_reservation;
      bc.uid = c.uid;
      // Devices of the claim by their stable identity (HandoffOrderLess).
      std::vector<BoundDevice> by_identity = c.status.devices;
      std::sort(by_identity.begin(), by_identity.end(),
                [](const BoundDevice& a, const BoundDevice& b) {
                  return std::tie(a.serial, a.address) < std::tie(b.serial, b.address);
                });
      for (const BoundDevice& b : by_identity) bc.devices.push_back(b.address);
      if (changed) mutations.push_back(PutClaim{std::move(c)});
      out.claims.push_back(std::move(bc));
    }
    // A claim pinned to a Released device took it (placement offers a
    // Released device to nothing else): the mark goes. Devices waiting to
    // return to their host driver are never placed.
    if (std::any_of(allocated.begin(), allocated.end(),
                    [&](PciAddress a) { return e.node->FindReleased(a) != nullptr; })) {
      NodeRecord rec = e.node->ToRecord();
      std::erase_if(rec.released, [&](const ReleasedDevice& r) {
        if (std::find(allocated.begin(), allocated.end(), r.address) == allocated.end()) {
          return false;
        }
        out.took_released.push_back(r);
        return true;
      });
      mutations.push_back(PutNode{std::move(rec)});
    }
    // The hand-off order: claims by their place in the pod.
    std::vector<size_t> order(out.claims.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return ranks[a] < ranks[b]; });
    std::vector<BoundClaim> ordered;
    ordered.reserve(order.size());
    for (size_t i : order) ordered.push_back(std::move(out.claims[i]));
    out.claims = std::move(ordered);
    if (mutations.empty()) {
      // A retried bind: already in place, maybe by a bind whose record is
      // not durable yet. It is answered once that record is.
      prior = last_ticket_;
    } else {
      ASSIGN_OR_RETURN(commit, CommitLocked(std::move(mutations)));
      out.revision = revision;
    }
  }
  if (commit.ticket == 0) {
    RETURN_IF_ERROR(AwaitDurable(prior));
    return out;
  }
  RETURN_IF_ERROR(SyncOrFail(std::move(commit)));
  return out;
}

absl::Status AllocatorImpl::Undo(const BindOutcome& outcome) {
  Commit commit;
  {
    MutationLock lock(this);
    std::vector<Mutation> mutations;
    std::vector<PciAddress> freed;  // Devices of claims this undo makes Pending.
    for (const BoundClaim& bc : outcome.claims) {
      const ClaimEntry* c = state_.FindClaim(bc.key);
      // Only claims still exactly as this bind left them.
      if (c == nullptr || c->uid() != bc.uid || !c->status.reserved_for ||
          c->status.reserved_for->pod_uid != outcome.pod_uid) {
        continue;
      }
      if (bc.allocated) freed.insert(freed.end(), bc.devices.begin(), bc.devices.end());
      if (bc.created) {
        mutations.push_back(pdc::DeleteClaim{bc.key});
        continue;
      }
      const Claim current = c->ToClaim();
      Claim u = current;
      if (bc.allocated) u.status = ClaimStatus{};
      u.status.reserved_for = bc.previous_reservation;
      if (u != current) mutations.push_back(PutClaim{std::move(u)});
    }
    // A Released device the bind took goes back to Released with its claim
    // undone (after the claim's mutation, so the device is unowned by then).
    const NodeState* node = state_.FindNode(outcome.node);
    std::vector<ReleasedDevice> restore;
    for (const ReleasedDevice& r : outcome.took_released) {
      if (node != nullptr && node->has_record && node->FindReleased(r.address) == nullptr &&
          std::find(freed.begin(), freed.end(), r.address) != freed.end()) {
        restore.push_back(r);
      }
    }
    if (!restore.empty()) {
      NodeRecord rec = node->ToRecord();
      rec.released.insert(rec.released.end(), restore.begin(), restore.end());
      std::sort(rec.released.begin(), rec.released.end(),
                [](const ReleasedDevice& a, const ReleasedDevice& b) {
                  return a.address < b.address;
                });
      mutations.push_back(PutNode{std::move(rec)});
    }
    if (mutations.empty()) return absl::OkStatus();
    ASSIGN_OR_RETURN(commit, CommitLocked(std::move(mutations)));
  }
  return SyncOrFail(std::move(commit));
}

}  // namespace pdc
