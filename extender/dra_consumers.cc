#include "extender/dra_consumers.h"

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "api/kube_objects.h"

namespace pdc::extender {

dra::PodLook DraConsumers::LookAtPod(std::string_view ns, std::string_view name,
                                     std::string_view uid) {
  dra::PodLook out;
  switch (AskPodFate(pods_, kube_, ns, name, uid, timeout_, &out.why, PodEnd::kDone)) {
    case PodFate::kGone:
      out.state = dra::PodLook::State::kGone;
      {
        absl::MutexLock lock(&mu_);
        vm_of_pod_.erase(std::string(uid));
      }
      return out;
    case PodFate::kUnknown:
      out.state = dra::PodLook::State::kUnknown;
      return out;
    case PodFate::kAlive:
      out.state = dra::PodLook::State::kAlive;
      break;
  }
  bool failed = false;
  out.vm = VmOf(ns, name, uid, &out.why, &failed);
  if (failed) out.state = dra::PodLook::State::kUnknown;
  return out;
}

std::optional<dra::VmIdentity> DraConsumers::VmOf(std::string_view ns, std::string_view name,
                                                  std::string_view uid, std::string* why,
                                                  bool* failed) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = vm_of_pod_.find(std::string(uid)); it != vm_of_pod_.end()) return it->second;
  }
  absl::StatusOr<std::string> text = kube_->GetPod(ns, name, timeout_);
  if (!text.ok()) {
    *failed = true;
    *why = std::string(text.status().message());
    return std::nullopt;
  }
  rapidjson::Document doc;
  absl::StatusOr<api::ObjectMeta> meta =
      api::json::Parse(*text, &doc).ok() ? api::ReadObjectMeta(doc, "Pod")
                                         : absl::InvalidArgumentError("not JSON");
  if (!meta.ok() || meta->uid != uid) {
    // Replaced since its fate was read, or unreadable: ask again later.
    *failed = true;
    *why = meta.ok() ? "the pod was replaced meanwhile" : std::string(meta.status().message());
    return std::nullopt;
  }
  absl::StatusOr<VmRef> vm = vms_->Resolve(ns, meta->Controller());
  if (absl::IsNotFound(vm.status())) {
    // Its VMI or VM not in the watches (yet, or any more): ask again later.
    *failed = true;
    *why = std::string(vm.status().message());
    return std::nullopt;
  }
  if (!vm.ok()) {
    *why = absl::StrCat("not a VM's pod: ", vm.status().message());
    return std::nullopt;
  }
  if (vm->standalone_vmi) {
    *why = "the pod of a VirtualMachineInstance without a VirtualMachine";
    return std::nullopt;
  }
  dra::VmIdentity id{vm->name, vm->uid};
  absl::MutexLock lock(&mu_);
  vm_of_pod_.insert_or_assign(std::string(uid), id);
  return id;
}

std::set<std::string> DraConsumers::LiveVms(const std::vector<std::string>& uids) const {
  std::set<std::string> out;
  const std::vector<bool> have = vms_->HasUids(uids);
  for (size_t i = 0; i < uids.size(); ++i) {
    if (have[i]) out.insert(uids[i]);
  }
  return out;
}

std::vector<dra::VmIdentity> DraConsumers::VmsNamingClaim(std::string_view ns,
                                                          std::string_view claim) const {
  std::vector<dra::VmIdentity> out;
  for (auto& [name, uid] : vms_->claim_names().NamingVms(ns, claim)) {
    out.push_back({std::move(name), std::move(uid)});
  }
  return out;
}

}  // namespace pdc::extender
