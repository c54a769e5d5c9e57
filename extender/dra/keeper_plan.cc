#include "extender/dra/keeper_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pdc::extender::dra {
namespace {

bool HasUid(const std::vector<Consumer>& list, const std::string& uid) {
  return std::any_of(list.begin(), list.end(), [&](const Consumer& c) { return c.uid == uid; });
}

// The VMs of the living pod entries, in list order, each once.
std::vector<VmIdentity> VmsOfLivingPods(const DraClaim& claim, const PlanInputs& in) {
  std::vector<VmIdentity> out;
  for (const Consumer& c : claim.reserved_for) {
    if (!IsPod(c)) continue;
    auto it = in.pods.find(c.uid);
    if (it == in.pods.end() || it->second.state != PodLook::State::kAlive ||
        !it->second.vm.has_value()) {
      continue;
    }
    const VmIdentity& vm = *it->second.vm;
    if (std::none_of(out.begin(), out.end(), [&](const VmIdentity& v) { return v.uid == vm.uid; })) {
      out.push_back(vm);
    }
  }
  return out;
}

// The size of `list` once the entries of gone pods are pruned (which a VM
// entry added to it brings about).
size_t SizeAfterPruning(const std::vector<Consumer>& list, const PlanInputs& in) {
  return std::count_if(list.begin(), list.end(), [&](const Consumer& c) {
    auto it = IsPod(c) ? in.pods.find(c.uid) : in.pods.end();
    return it == in.pods.end() || it->second.state != PodLook::State::kGone;
  });
}

}  // namespace

Plan PlanReservedFor(const DraClaim& claim, const PlanInputs& in) {
  Plan plan;
  plan.reserved_for = claim.reserved_for;
  if (!claim.allocated) return plan;
  // VM entries of VMs that are gone, and every VM entry of a pod-owned
  // claim (it goes with its pod: a VM entry would only hold its device).
  std::vector<Consumer> list;
  auto unnamed = [&](const std::string& vm_uid) {
    auto it = in.vm_names_claim.find(vm_uid);
    return it != in.vm_names_claim.end() && !it->second;
  };
  for (const Consumer& c : claim.reserved_for) {
    if (IsVm(c) && (claim.pod_owned || !in.live_vms.count(c.uid) || unnamed(c.uid))) {
      plan.removed.push_back(c);
    } else {
      list.push_back(c);
    }
  }
  // The VMs of living pods (none for a pod-owned claim).
  const std::vector<VmIdentity> vms =
      claim.pod_owned ? std::vector<VmIdentity>{} : VmsOfLivingPods(claim, in);
  for (const VmIdentity& vm : vms) {
    // A VM that is gone (found through the watches, which no longer hold
    // it): nothing to keep, nothing to warn about.
    if (HasUid(list, vm.uid) || !in.live_vms.count(vm.uid) || unnamed(vm.uid)) continue;
    const std::string who = absl::StrCat("VirtualMachine ", vm.name, " (uid ", vm.uid, ")");
    auto other = std::find_if(list.begin(), list.end(), [](const Consumer& c) { return IsVm(c); });
    std::string why;
    if (other != list.end()) {
      why = absl::StrCat("the claim is kept for VirtualMachine ", other->name, " (uid ",
                         other->uid, "); a claim is never kept for two VMs");
    } else if (in.deleting) {
      why = "the claim is being deleted";
    } else if (SizeAfterPruning(list, in) >= kReservedForMaxSize) {
      why = absl::StrCat("status.reservedFor would hold more than ", kReservedForMaxSize,
                         " entries, even with the gone pods pruned");
    }
    if (!why.empty()) {
      plan.refused.push_back(absl::StrCat(who, ": ", why));
      plan.refused_vms.emplace_back(vm, std::move(why));
    } else {
      list.push_back(VmConsumer(vm.name, vm.uid));
      plan.added.push_back(list.back());
    }
  }
  // No living pod brought a VM: a VM whose spec names the claim keeps it
  // when nothing else holds it (its pod ended before the keeper saw it).
  const bool has_vm = std::any_of(list.begin(), list.end(), [](const Consumer& c) { return IsVm(c); });
  if (!has_vm && !claim.pod_owned && !in.deleting && SizeAfterPruning(list, in) == 0) {
    std::vector<VmIdentity> naming;
    for (const VmIdentity& vm : in.naming_vms) {
      if (in.live_vms.count(vm.uid)) naming.push_back(vm);
    }
    if (naming.size() == 1) {
      list.push_back(VmConsumer(naming[0].name, naming[0].uid));
      plan.added.push_back(list.back());
    } else if (naming.size() > 1) {
      std::string names;
      for (const VmIdentity& vm : naming) {
        absl::StrAppend(&names, names.empty() ? "" : ", ", vm.name, " (uid ", vm.uid, ")");
      }
      plan.refused.push_back(absl::StrCat("VirtualMachines ", names,
                                          ": each names the claim; a claim is never kept for "
                                          "two VMs"));
      for (const VmIdentity& vm : naming) {
        plan.refused_vms.emplace_back(
            vm, absl::StrCat("VirtualMachines ", names,
                             " each name the claim; a claim is never kept for two VMs"));
      }
    }
  }
  plan.kept = std::any_of(list.begin(), list.end(), [](const Consumer& c) { return IsVm(c); });
  if (plan.kept) {
    std::vector<Consumer> pruned;
    for (const Consumer& c : list) {
      auto it = IsPod(c) ? in.pods.find(c.uid) : in.pods.end();
      if (it != in.pods.end() && it->second.state == PodLook::State::kGone) {
        plan.removed.push_back(c);
      } else {
        pruned.push_back(c);
      }
    }
    list = std::move(pruned);
  }
  plan.reserved_for = std::move(list);
  return plan;
}

}  // namespace pdc::extender::dra
