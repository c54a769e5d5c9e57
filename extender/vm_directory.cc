#include "extender/vm_directory.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

namespace {

constexpr std::string_view kKubeVirtGroup = "kubevirt.io/";

bool IsKubeVirt(const api::OwnerReference& o, std::string_view kind) {
  return o.kind == kind && o.api_version.starts_with(kKubeVirtGroup);
}

std::string Key(std::string_view ns, std::string_view name) {
  return absl::StrCat(Sv(ns), "/", Sv(name));
}

}  // namespace

void MetaCache::Replace(const std::vector<const api::json::Value*>& items) {
  absl::flat_hash_map<std::string, api::ObjectMeta> next;
  for (const api::json::Value* item : items) {
    absl::StatusOr<api::ObjectMeta> m = api::ReadObjectMeta(*item, kind_);
    if (!m.ok()) {
      spdlog::warn("ignoring a {} pdc cannot read: {}", kind_, StdSv(m.status().message()));
      continue;
    }
    std::string key = m->Key();
    next.insert_or_assign(std::move(key), *std::move(m));
  }
  std::vector<api::ObjectMeta> removed;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, old] : objects_) {
      auto it = next.find(key);
      if (it == next.end() || it->second.uid != old.uid) removed.push_back(std::move(old));
    }
    objects_ = std::move(next);
  }
  Report(removed);
}

void MetaCache::Upsert(const api::json::Value& object) {
  absl::StatusOr<api::ObjectMeta> m = api::ReadObjectMeta(object, kind_);
  if (!m.ok()) {
    spdlog::warn("ignoring a {} pdc cannot read: {}", kind_, StdSv(m.status().message()));
    return;
  }
  std::string key = m->Key();
  std::vector<api::ObjectMeta> removed;
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = objects_.try_emplace(std::move(key));
    // Another UID under the name: the old object was deleted unseen.
    if (!inserted && it->second.uid != m->uid) removed.push_back(std::move(it->second));
    it->second = *std::move(m);
  }
  Report(removed);
}

void MetaCache::Remove(const api::json::Value& object) {
  absl::StatusOr<api::ObjectMeta> m = api::ReadObjectMeta(object, kind_);
  if (!m.ok()) return;
  std::vector<api::ObjectMeta> removed;
  {
    absl::MutexLock lock(&mu_);
    auto it = objects_.find(m->Key());
    // Only the object that was deleted: a newer one under the same name stays.
    if (it != objects_.end() && it->second.uid == m->uid) {
      removed.push_back(std::move(it->second));
      objects_.erase(it);
    }
  }
  Report(removed);
}

void MetaCache::Report(const std::vector<api::ObjectMeta>& removed) const {
  if (!on_removed_) return;
  for (const api::ObjectMeta& m : removed) on_removed_(m);
}

absl::flat_hash_set<std::string> MetaCache::Uids() const {
  absl::flat_hash_set<std::string> out;
  absl::MutexLock lock(&mu_);
  out.reserve(objects_.size());
  for (const auto& [key, m] : objects_) out.insert(m.uid);
  return out;
}

std::optional<api::ObjectMeta> MetaCache::Get(std::string_view ns, std::string_view name) const {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(Key(ns, name));
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

size_t MetaCache::size() const {
  absl::MutexLock lock(&mu_);
  return objects_.size();
}

VmDirectory::VmDirectory(VmGoneFn on_vm_gone, VmClaimNames::ChangedFn on_claims_named)
    : on_vm_gone_(std::move(on_vm_gone)),
      vmis_("VirtualMachineInstance",
            [this](const api::ObjectMeta& vmi) {
              // A VMI without a controller is its own VM (see Resolve).
              if (on_vm_gone_ && vmi.Controller() == nullptr) on_vm_gone_(vmi.ns, vmi.uid);
            }),
      vms_("VirtualMachine", [this](const api::ObjectMeta& vm) {
        if (on_vm_gone_) on_vm_gone_(vm.ns, vm.uid);
      }),
      claim_names_(std::move(on_claims_named)) {}

std::vector<bool> VmDirectory::HasUids(const std::vector<std::string>& uids) const {
  const absl::flat_hash_set<std::string> vms = vms_.Uids();
  const absl::flat_hash_set<std::string> vmis = vmis_.Uids();
  std::vector<bool> out;
  out.reserve(uids.size());
  for (const std::string& uid : uids) out.push_back(vms.contains(uid) || vmis.contains(uid));
  return out;
}

absl::StatusOr<VmRef> VmDirectory::Resolve(std::string_view ns,
                                           const api::OwnerReference* controller) const {
  if (controller == nullptr) {
    return absl::FailedPreconditionError(
        "the pod has no controller owner reference, so it is not a VM pod (KubeVirt makes a "
        "virt-launcher pod's VirtualMachineInstance its controller); it takes over no claim");
  }
  if (!IsKubeVirt(*controller, "VirtualMachineInstance")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the pod's controller is ", controller->kind, " ", controller->name, " (",
        controller->api_version, "), not a kubevirt.io VirtualMachineInstance, so it is not a "
        "VM pod; it takes over no claim"));
  }
  const std::optional<api::ObjectMeta> vmi = vmis_.Get(ns, controller->name);
  if (!vmi.has_value()) {
    return absl::NotFoundError(absl::StrCat(
        "VirtualMachineInstance ", Sv(ns), "/", controller->name,
        " that owns the pod is not known to pdc-extender (deleted, or not seen yet)"));
  }
  if (vmi->uid != controller->uid) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the pod belongs to VirtualMachineInstance ", Sv(ns), "/", controller->name, " with uid ",
        controller->uid, ", which is gone (the one by that name now has uid ", vmi->uid, ")"));
  }
  const api::OwnerReference* owner = vmi->Controller();
  if (owner == nullptr) return VmRef{vmi->name, vmi->uid, /*standalone_vmi=*/true};
  if (!IsKubeVirt(*owner, "VirtualMachine")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "VirtualMachineInstance ", Sv(ns), "/", vmi->name, " is controlled by ", owner->kind, " ",
        owner->name, ", not by a kubevirt.io VirtualMachine"));
  }
  const std::optional<api::ObjectMeta> vm = vms_.Get(ns, owner->name);
  if (!vm.has_value()) {
    return absl::NotFoundError(absl::StrCat(
        "VirtualMachine ", Sv(ns), "/", owner->name, " that owns VirtualMachineInstance ",
        vmi->name, " is not known to pdc-extender (deleted, or not seen yet)"));
  }
  if (vm->uid != owner->uid) {
    return absl::FailedPreconditionError(absl::StrCat(
        "VirtualMachineInstance ", Sv(ns), "/", vmi->name, " belongs to VirtualMachine ",
        owner->name, " with uid ", owner->uid, ", which is gone (the one by that name now has uid ",
        vm->uid, ")"));
  }
  return VmRef{vm->name, vm->uid, /*standalone_vmi=*/false};
}

std::optional<api::OwnerReference> VmDirectory::OwnerOf(std::string_view ns,
                                                        std::string_view vm,
                                                        std::string_view uid) const {
  if (uid.empty()) return std::nullopt;
  if (std::optional<api::ObjectMeta> m = vms_.Get(ns, vm); m.has_value() && m->uid == uid) {
    return api::OwnerReference{"kubevirt.io/v1", "VirtualMachine", m->name, m->uid, true};
  }
  if (std::optional<api::ObjectMeta> m = vmis_.Get(ns, vm); m.has_value() && m->uid == uid) {
    return api::OwnerReference{"kubevirt.io/v1", "VirtualMachineInstance", m->name, m->uid, true};
  }
  return std::nullopt;
}

absl::StatusOr<api::PodRequest> PodForScheduling(const api::json::Value& pod,
                                                 const api::ManagedResources& managed,
                                                 const VmDirectory* directory) {
  absl::StatusOr<api::PodRequest> out = api::PodToRequest(pod, managed);
  if (!out.ok() || directory == nullptr || out->pass_through) return out;
  absl::StatusOr<VmRef> vm =
      directory->Resolve(out->request.ns, out->controller ? &*out->controller : nullptr);
  if (!vm.ok()) {
    return api::json::FieldError(
        "Pod.metadata.ownerReferences",
        absl::StrCat("pod ", out->request.ns, "/", out->request.pod_name, ": ",
                     vm.status().message()));
  }
  // virt-controller labels every launcher pod with its VMI's UID; a pod
  // whose label does not name its controller was not made by it.
  if (out->created_by != out->controller->uid) {
    return api::json::FieldError(
        absl::StrCat("Pod.metadata.labels[\"", Sv(api::kCreatedByLabel), "\"]"),
        absl::StrCat("pod ", out->request.ns, "/", out->request.pod_name,
                     out->created_by.empty() ? ": it has no label naming"
                                             : ": its label does not name",
                     " the UID of its controller VirtualMachineInstance ",
                     out->controller->name, " (", out->controller->uid,
                     "), which virt-controller sets on every virt-launcher pod; it takes over no "
                     "claim"));
  }
  out->request.vm = vm->name;
  out->request.vm_uid = vm->uid;
  out->request.vmi_uid = out->controller->uid;
  return out;
}

absl::StatusOr<std::vector<ClaimKey>> ReleaseGoneVm(Allocator& allocator, std::string_view ns,
                                                    std::string_view uid) {
  absl::StatusOr<std::vector<ClaimKey>> released = allocator.ReleaseVm(ns, uid);
  if (!released.ok()) {
    spdlog::error("releasing the claims of VM {}/{} (gone) failed: {}", ns, uid,
                  released.status().ToString());
  } else if (!released->empty()) {
    std::vector<std::string> names;
    for (const ClaimKey& k : *released) names.push_back(k.ToString());
    spdlog::info("VM with uid {} in namespace {} is gone: released its claims {}", uid,
                 ns, absl::StrJoin(names, ", "));
  }
  return released;
}

absl::StatusOr<std::vector<ClaimKey>> ReleaseVmsNotInDirectory(const VmDirectory& directory,
                                                               Allocator& allocator) {
  // The reservations first, then the caches: a VM that starts in between
  // is in the caches already, so it is never taken for gone.
  const std::vector<ReservingVm> holding = allocator.ReservingVms("");
  std::vector<std::string> uids;
  uids.reserve(holding.size());
  for (const ReservingVm& vm : holding) uids.push_back(vm.uid);
  const std::vector<bool> known = directory.HasUids(uids);
  std::vector<ClaimKey> out;
  for (size_t i = 0; i < holding.size(); ++i) {
    if (known[i]) continue;
    spdlog::info("VM {}/{} (uid {}) holds claims but no longer exists", holding[i].ns,
                 holding[i].name, holding[i].uid);
    absl::StatusOr<std::vector<ClaimKey>> released =
        ReleaseGoneVm(allocator, holding[i].ns, holding[i].uid);
    if (!released.ok()) return released.status();
    out.insert(out.end(), released->begin(), released->end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace pdc::extender
