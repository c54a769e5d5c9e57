// Hand-off of AllocatorImpl (docs/design.md §6): which pods still wait for
// their devices on a node, the node driver's confirmation that kubelet's
// Allocate answered for one, and cancelling one whose pod went away.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allocator/allocator_impl.h"
#include "common/status_macros.h"

namespace pdc {
namespace {

std::string JoinAddresses(const std::vector<PciAddress>& addresses) {
  if (addresses.empty()) return "none";
  return absl::StrJoin(addresses, ",", [](std::string* out, PciAddress a) {
    out->append(a.ToString());
  });
}

std::vector<PciAddress> ClaimAddresses(const std::vector<const ClaimEntry*>& claims) {
  std::vector<PciAddress> out;
  for (const ClaimEntry* c : claims) {
    for (const BoundDevice& b : c->status.devices) out.push_back(b.address);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

absl::StatusOr<std::vector<ClaimKey>> AllocatorImpl::ConfirmHandoff(
    std::string_view node_name, std::string_view pod_uid, std::string_view resource_name,
    absl::Span<const PciAddress> devices) {
  if (pod_uid.empty()) return absl::InvalidArgumentError("podUid: must not be empty");
  std::vector<PciAddress> given(devices.begin(), devices.end());
  std::sort(given.begin(), given.end());
  std::vector<ClaimKey> keys;
  Commit commit;
  Store::Ticket prior = 0;  // A repeated confirmation: what it relies on.
  {
    MutationLock lock(this);
    RETURN_IF_ERROR(FailedLocked());
    const NodeState* node = state_.FindNode(node_name);
    // The pod's claims of the resource on the node, pending or (for a
    // repeated confirmation) already handed to it.
    std::vector<const ClaimEntry*> mine;
    bool any_pending = false;
    if (node != nullptr) {
      for (const ClaimEntry* c : node->claims) {
        const auto& r = c->status.reserved_for;
        if (!r || r->pod_uid != pod_uid || c->spec.resource_name() != resource_name) continue;
        mine.push_back(c);
        any_pending = any_pending || c->status.HandoffPending();
      }
    }
    if (mine.empty()) {
      return absl::NotFoundError(absl::StrCat("no pod with UID ", Sv(pod_uid),
                                              " holds ", Sv(resource_name), " devices on node ",
                                              Sv(node_name)));
    }
    std::sort(mine.begin(), mine.end(),
              [](const ClaimEntry* a, const ClaimEntry* b) { return a->key < b->key; });
    const std::vector<PciAddress> held = ClaimAddresses(mine);
    if (held != given) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pod ", Sv(pod_uid), " holds ", Sv(resource_name), " devices ", JoinAddresses(held),
          " on node ", Sv(node_name), ", but the node driver handed over ",
          JoinAddresses(given)));
    }
    std::vector<Mutation> mutations;
    for (const ClaimEntry* c : mine) {
      keys.push_back(c->key);
      if (!c->status.HandoffPending()) continue;
      Claim u = c->ToClaim();
      u.status.handed_off_to = std::string(pod_uid);
      mutations.push_back(PutClaim{std::move(u)});
    }
    if (any_pending) {
      ASSIGN_OR_RETURN(commit, CommitLocked(std::move(mutations)));
    } else {
      prior = last_ticket_;  // Confirmed before, maybe not durably yet.
    }
  }
  if (commit.ticket == 0) {
    RETURN_IF_ERROR(AwaitDurable(prior));
    return keys;
  }
  RETURN_IF_ERROR(SyncOrFail(std::move(commit)));
  return keys;
}

absl::StatusOr<std::vector<ClaimKey>> AllocatorImpl::CancelHandoff(std::string_view node_name,
                                                                   std::string_view pod_uid) {
  std::vector<ClaimKey> keys;
  Commit commit;
  {
    MutationLock lock(this);
    RETURN_IF_ERROR(FailedLocked());
    const NodeState* node = state_.FindNode(node_name);
    std::vector<Mutation> mutations;
    if (node != nullptr) {
      for (const ClaimEntry* c : node->handoff_pending) {
        if (c->status.reserved_for->pod_uid != pod_uid) continue;
        keys.push_back(c->key);
        Claim u = c->ToClaim();
        u.status.reserved_for.reset();
        mutations.push_back(PutClaim{std::move(u)});
      }
    }
    if (keys.empty()) {
      return absl::NotFoundError(absl::StrCat("no pod with UID ", Sv(pod_uid),
                                              " is waiting for devices on node ",
                                              Sv(node_name)));
    }
    ASSIGN_OR_RETURN(commit, CommitLocked(std::move(mutations)));
  }
  RETURN_IF_ERROR(SyncOrFail(std::move(commit)));
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::vector<PendingHandoff> AllocatorImpl::PendingHandoffs(std::string_view node_name) const {
  std::vector<PendingHandoff> out;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto collect = [&](const NodeState& node) {
      for (const ClaimEntry* c : node.handoff_pending) {
        const Reservation& r = *c->status.reserved_for;
        auto it = std::find_if(out.begin(), out.end(), [&](const PendingHandoff& p) {
          return p.node == node.name && p.resource_name == c->spec.resource_name() &&
                 p.pod.pod_uid == r.pod_uid;
        });
        if (it == out.end()) {
          it = out.insert(out.end(), PendingHandoff{node.name, c->spec.resource_name(),
                                                    c->key.ns, r, {}, {}});
        }
        it->claims.push_back(c->key);
        for (const BoundDevice& b : c->status.devices) it->devices.push_back(b.address);
      }
    };
    if (node_name.empty()) {
      for (const auto& [name, node] : state_.nodes()) collect(node);
    } else if (const NodeState* node = state_.FindNode(node_name)) {
      collect(*node);
    }
  }
  for (PendingHandoff& p : out) {
    std::sort(p.claims.begin(), p.claims.end());
    std::sort(p.devices.begin(), p.devices.end());
  }
  std::sort(out.begin(), out.end(), [](const PendingHandoff& a, const PendingHandoff& b) {
    return std::tie(a.node, a.resource_name, a.pod.pod_uid) <
           std::tie(b.node, b.resource_name, b.pod.pod_uid);
  });
  return out;
}

}  // namespace pdc
