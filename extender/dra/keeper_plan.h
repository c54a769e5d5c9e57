// PlanReservedFor: what the DRA claim keeper makes of one ResourceClaim's
// status.reservedFor, as a pure function of the claim and of what is known
// of the pods and VMs it names (claim_keeper.h gathers that and writes the
// result). The rules:
//  - only an allocated claim is touched (kube-apiserver accepts a non-pod
//    consumer only then);
//  - a claim whose controller owner is a Pod (made from the pod's
//    resourceClaimTemplateName) is never kept: it is deleted with its pod,
//    and a VM entry would leave it hanging in deletion holding its device
//    while each start makes a new claim; a VM entry found on one goes;
//  - a VirtualMachine entry stays while a VirtualMachine with its UID
//    exists and names the claim in its spec (or its spec is not known),
//    and goes when it is gone (a VM re-created under the same name has
//    another UID: it never inherits the entry) or names it no more;
//  - a VM whose spec names the claim is added even without a living pod
//    (stopped before the keeper saw its pod) when nothing else holds the
//    claim: no VM entry, and no entry left once the gone pods are pruned;
//    two VMs naming it are refused;
//  - the VM of each living pod entry (its virt-launcher pod -> VMI -> VM
//    chain, by UID) is added, unless its spec no longer names the claim, the claim already holds another
//    living VM (a claim is never kept for two VMs), the claim is being
//    deleted (kube-apiserver refuses new consumers then), or the list would
//    exceed 256 entries once the pods below are pruned; each refusal says
//    why. A VM that is gone (no VirtualMachine with its UID) is skipped
//    without a refusal;
//  - on a claim kept for a VM (one VM entry after the change), pod entries
//    of pods that are deleted, replaced (another UID) or ended are pruned
//    (kube-controller-manager 1.34/1.35 stops pruning claims with a non-pod
//    entry); a pod whose fate is unknown stays. A claim not kept is left to
//    the resourceclaim controller, which alone deallocates;
//  - every other consumer's entry is left as it is, in its place.
// Thread-safety: pure.
#ifndef PDC_EXTENDER_DRA_KEEPER_PLAN_H_
#define PDC_EXTENDER_DRA_KEEPER_PLAN_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "extender/dra/resource_claim.h"

namespace pdc::extender::dra {

// A VirtualMachine, as a pod's owner chain found it.
struct VmIdentity {
  std::string name;
  std::string uid;
};

// What is known of the pod of one pod entry.
struct PodLook {
  enum class State { kAlive, kGone, kUnknown };
  State state = State::kUnknown;
  std::optional<VmIdentity> vm;  // Alive and a KubeVirt VM's pod.
  std::string why;               // For logs: how the state was decided.
};

struct PlanInputs {
  std::map<std::string, PodLook> pods;  // By the pod entry's UID.
  std::set<std::string> live_vms;      // UIDs of VirtualMachines that exist.
  bool deleting = false;               // The claim has a deletionTimestamp.
  // By VM UID: whether that VirtualMachine's spec names this claim; a VM
  // not here is unknown (judged by its pods only).
  std::map<std::string, bool> vm_names_claim;
  // The VirtualMachines whose spec names this claim.
  std::vector<VmIdentity> naming_vms;
};

struct Plan {
  std::vector<Consumer> reserved_for;  // The list to write.
  std::vector<Consumer> added;
  std::vector<Consumer> removed;
  // Why a VM could not be added ("VirtualMachine ns/x (uid ...): ...").
  std::vector<std::string> refused;
  // Each VM refused, with why (an Event on the VirtualMachine too).
  std::vector<std::pair<VmIdentity, std::string>> refused_vms;
  bool changed() const { return !added.empty() || !removed.empty(); }
  // The claim holds a VM entry after the change.
  bool kept = false;
};

Plan PlanReservedFor(const DraClaim& claim, const PlanInputs& in);

}  // namespace pdc::extender::dra

#endif  // PDC_EXTENDER_DRA_KEEPER_PLAN_H_
