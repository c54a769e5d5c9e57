#include "driver/deviceplugin/handoff_book.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/strings.h"

namespace pdc::driver::deviceplugin {

std::string PendingPod::Describe() const {
  return absl::StrCat(ns, "/", vm, " (pod ", pod_name, ", uid ", pod_uid, ")");
}

void HandoffBook::Update(const NodeAllocations& allocations, bool fresh) {
  absl::MutexLock lock(&mu_);
  if (!fresh && allocations_.has_value() && allocations.version < allocations_->version) return;
  allocations_ = allocations;
  // Forget the answered hand-offs the extender no longer shows pending:
  // recorded there, or the pod's reservation is gone.
  for (auto it = answered_.begin(); it != answered_.end();) {
    if (PendingUpstreamLocked(it->first, it->second)) {
      ++it;
    } else {
      it = answered_.erase(it);
    }
  }
}

bool HandoffBook::PendingUpstreamLocked(std::string_view resource_name,
                                        std::string_view pod_uid) const {
  if (!allocations_.has_value()) return false;
  for (const NodeAllocation& c : allocations_->claimed) {
    if (c.resource_name == resource_name && c.reserved_for.has_value() && c.handoff_pending &&
        c.reserved_for->pod_uid == pod_uid) {
      return true;
    }
  }
  return false;
}

bool HandoffBook::PendingUpstream(std::string_view resource_name, std::string_view pod_uid) const {
  absl::ReaderMutexLock lock(&mu_);
  return PendingUpstreamLocked(resource_name, pod_uid);
}

uint64_t HandoffBook::version() const {
  absl::ReaderMutexLock lock(&mu_);
  return allocations_.has_value() ? allocations_->version : 0;
}

void HandoffBook::MarkHandedOff(std::string_view resource_name, std::string_view pod_uid) {
  absl::MutexLock lock(&mu_);
  answered_.emplace(std::string(resource_name), std::string(pod_uid));
}

std::map<std::pair<std::string, std::string>, PendingPod> HandoffBook::PendingLocked(
    std::string_view only) const {
  std::map<std::pair<std::string, std::string>, PendingPod> by_key;
  // (hand-off index, address) of each pending pod's devices.
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<uint32_t, PciAddress>>>
      order;
  if (!allocations_.has_value()) return by_key;
  for (const NodeAllocation& c : allocations_->claimed) {
    if ((!only.empty() && c.resource_name != only) || !c.reserved_for.has_value() ||
        !c.handoff_pending) {
      continue;
    }
    const Reservation& r = *c.reserved_for;
    std::pair<std::string, std::string> key{c.resource_name, r.pod_uid};
    if (answered_.contains(key)) continue;
    PendingPod& p = by_key[key];
    p.resource_name = c.resource_name;
    p.ns = c.claim.ns;
    p.vm = r.vm;
    p.pod_name = r.pod_name;
    p.pod_uid = r.pod_uid;
    p.claims.push_back(c.claim.ToString());
    order[key].emplace_back(c.handoff_index, c.address);
  }
  for (auto& [key, p] : by_key) {
    std::sort(p.claims.begin(), p.claims.end());
    p.claims.erase(std::unique(p.claims.begin(), p.claims.end()), p.claims.end());
    // The extender's hand-off order (HandoffOrderLess: the pod's claims in
    // its order, a claim's devices by serial), not PCI address order: the
    // k-th address goes to the VM's k-th hostDevices entry of the resource.
    std::vector<std::pair<uint32_t, PciAddress>>& devices = order[key];
    std::sort(devices.begin(), devices.end());
    for (const auto& [index, address] : devices) p.devices.push_back(address);
  }
  return by_key;
}

std::vector<PendingPod> HandoffBook::AllPending() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<PendingPod> out;
  for (auto& [key, p] : PendingLocked("")) out.push_back(std::move(p));
  return out;
}

bool HandoffBook::has_answer() const {
  absl::ReaderMutexLock lock(&mu_);
  return allocations_.has_value();
}

absl::StatusOr<PendingPod> HandoffBook::Pending(std::string_view resource_name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto by_key = PendingLocked(resource_name);
  if (by_key.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no VM pod is waiting for a ", Sv(resource_name), " device on node ", node_,
        "; pdc hands devices only to pods it scheduled"));
  }
  if (by_key.size() > 1) {
    std::vector<std::string> who;
    for (const auto& [key, p] : by_key) who.push_back(p.Describe());
    return absl::FailedPreconditionError(absl::StrCat(
        by_key.size(), " VM pods are waiting for ", Sv(resource_name), " devices on node ", node_,
        " at once (", absl::StrJoin(who, "; "),
        "); the device plugin API does not say which one kubelet is admitting, so pdc refuses "
        "rather than guess (is the extender's hand-off gate off?)"));
  }
  return std::move(by_key.begin()->second);
}

}  // namespace pdc::driver::deviceplugin
