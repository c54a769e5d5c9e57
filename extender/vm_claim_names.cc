#include "extender/vm_claim_names.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "api/kube_objects.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "extender/dra/vm_claims.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {
namespace {

namespace json = ::pdc::api::json;

std::string NamedClaimKey(std::string_view ns, std::string_view claim) {
  return absl::StrCat(Sv(ns), "/", Sv(claim));
}

}  // namespace

absl::StatusOr<VmClaimSpec> ReadVmClaimSpec(const json::Value& object) {
  ASSIGN_OR_RETURN(api::ObjectMeta meta, api::ReadObjectMeta(object, "VirtualMachine"));
  VmClaimSpec out{meta.ns, meta.name, meta.uid, std::nullopt};
  ASSIGN_OR_RETURN(const json::Value* spec, json::OptObject(object, "spec", "VirtualMachine.spec"));
  if (spec == nullptr) return out;
  ASSIGN_OR_RETURN(const json::Value* tmpl,
                   json::OptObject(*spec, "template", "VirtualMachine.spec.template"));
  if (tmpl == nullptr) return out;
  out.claims.emplace();
  // The opt-in is read as virt-controller passes it on: the template's
  // labels become the VMI's and the pod's.
  const bool opted_in = dra::OptedIn(*tmpl);
  ASSIGN_OR_RETURN(std::vector<dra::PodClaimEntry> entries,
                   dra::ReadPodClaimEntries(*tmpl, "VirtualMachine.spec.template"));
  for (const dra::PodClaimEntry& e : entries) {
    if (!e.claim_name.empty()) {
      out.claims->insert(e.claim_name);
    } else if (!e.template_name.empty() && opted_in) {
      absl::StatusOr<std::string> name = dra::VmClaimName(meta.name, e.name);
      if (name.ok()) out.claims->insert(*std::move(name));
    }
  }
  return out;
}

std::set<std::string> VmClaimNames::SetLocked(const std::string& uid, std::optional<Vm> vm) {
  std::set<std::string> changed;
  auto it = by_uid_.find(uid);
  const std::set<std::string> none;
  const std::set<std::string>& before =
      it != by_uid_.end() && it->second.claims.has_value() ? *it->second.claims : none;
  const std::set<std::string>& after = vm.has_value() && vm->claims.has_value() ? *vm->claims : none;
  const std::string& ns = vm.has_value() ? vm->ns : (it != by_uid_.end() ? it->second.ns : uid);
  for (const std::string& c : before) {
    if (after.count(c)) continue;
    changed.insert(c);
    auto b = by_claim_.find(NamedClaimKey(ns, c));
    if (b != by_claim_.end()) {
      b->second.erase(uid);
      if (b->second.empty()) by_claim_.erase(b);
    }
  }
  for (const std::string& c : after) {
    if (before.count(c)) continue;
    changed.insert(c);
    by_claim_[NamedClaimKey(ns, c)].insert(uid);
  }
  if (vm.has_value()) {
    by_uid_.insert_or_assign(uid, *std::move(vm));
  } else if (it != by_uid_.end()) {
    by_uid_.erase(it);
  }
  return changed;
}

void VmClaimNames::Tell(const std::string& ns, const std::set<std::string>& claims) const {
  if (on_changed_ != nullptr && !claims.empty()) on_changed_(ns, claims);
}

void VmClaimNames::Replace(const std::vector<const json::Value*>& items) {
  absl::flat_hash_map<std::string, Vm> next;
  for (const json::Value* item : items) {
    absl::StatusOr<VmClaimSpec> s = ReadVmClaimSpec(*item);
    if (!s.ok()) {
      spdlog::warn("DRA: the claims of a VirtualMachine cannot be read: {}",
                   StdSv(s.status().message()));
      continue;
    }
    next.insert_or_assign(s->uid, Vm{s->ns, s->name, std::move(s->claims)});
  }
  std::vector<std::pair<std::string, std::set<std::string>>> told;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> gone;
    for (const auto& [uid, vm] : by_uid_) {
      if (!next.contains(uid)) gone.push_back(uid);
    }
    for (const std::string& uid : gone) {
      const std::string ns = by_uid_.at(uid).ns;
      told.emplace_back(ns, SetLocked(uid, std::nullopt));
    }
    for (auto& [uid, vm] : next) {
      std::string ns = vm.ns;
      told.emplace_back(std::move(ns), SetLocked(uid, std::move(vm)));
    }
  }
  for (const auto& [ns, claims] : told) Tell(ns, claims);
}

void VmClaimNames::Upsert(const json::Value& object) {
  absl::StatusOr<VmClaimSpec> s = ReadVmClaimSpec(object);
  if (!s.ok()) {
    spdlog::warn("DRA: the claims of a VirtualMachine cannot be read: {}",
                 StdSv(s.status().message()));
    return;
  }
  std::set<std::string> changed;
  {
    absl::MutexLock lock(&mu_);
    // Another UID under the name: the old VM was deleted unseen.
    std::vector<std::string> replaced;
    for (const auto& [uid, vm] : by_uid_) {
      if (uid != s->uid && vm.ns == s->ns && vm.name == s->name) replaced.push_back(uid);
    }
    for (const std::string& uid : replaced) changed.merge(SetLocked(uid, std::nullopt));
    changed.merge(SetLocked(s->uid, Vm{s->ns, s->name, std::move(s->claims)}));
  }
  Tell(s->ns, changed);
}

void VmClaimNames::Remove(const json::Value& object) {
  absl::StatusOr<api::ObjectMeta> m = api::ReadObjectMeta(object, "VirtualMachine");
  if (!m.ok()) return;
  std::set<std::string> changed;
  {
    absl::MutexLock lock(&mu_);
    if (by_uid_.contains(m->uid)) changed = SetLocked(m->uid, std::nullopt);
  }
  Tell(m->ns, changed);
}

std::optional<bool> VmClaimNames::Names(std::string_view ns, std::string_view vm_uid,
                                        std::string_view claim) const {
  absl::MutexLock lock(&mu_);
  auto it = by_uid_.find(std::string(vm_uid));
  if (it == by_uid_.end() || it->second.ns != ns || !it->second.claims.has_value()) {
    return std::nullopt;
  }
  return it->second.claims->count(std::string(claim)) > 0;
}

std::vector<std::pair<std::string, std::string>> VmClaimNames::NamingVms(
    std::string_view ns, std::string_view claim) const {
  std::vector<std::pair<std::string, std::string>> out;
  absl::MutexLock lock(&mu_);
  auto it = by_claim_.find(NamedClaimKey(ns, claim));
  if (it == by_claim_.end()) return out;
  for (const std::string& uid : it->second) {
    auto vm = by_uid_.find(uid);
    if (vm != by_uid_.end()) out.emplace_back(vm->second.name, uid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace pdc::extender
