#include "model/types.h"

namespace pdc {

bool DeviceClass::Matches(const Device& d) const {
  for (const PciSelector& s : selectors) {
    if (s.vendor_id != d.vendor_id || s.device_id != d.device_id) continue;
    if (s.class_code && *s.class_code != d.class_code) continue;
    return true;
  }
  return false;
}

std::string_view ToString(ClaimPhase phase) {
  switch (phase) {
    case ClaimPhase::kPending:
      return "Pending";
    case ClaimPhase::kBound:
      return "Bound";
    case ClaimPhase::kLost:
      return "Lost";
  }
  return "Unknown";
}

std::string_view ToString(UnhealthyReason reason) {
  switch (reason) {
    case UnhealthyReason::kNone:
      return "";
    case UnhealthyReason::kUnspecified:
      return "Unspecified";
    case UnhealthyReason::kNoIommuGroup:
      return "NoIommuGroup";
    case UnhealthyReason::kUnexpectedDriver:
      return "UnexpectedDriver";
    case UnhealthyReason::kErasing:
      return "Erasing";
    case UnhealthyReason::kAmbiguousIdentity:
      return "AmbiguousIdentity";
    case UnhealthyReason::kHostInUse:
      return "HostInUse";
    case UnhealthyReason::kUnverifiedIdentity:
      return "UnverifiedIdentity";
  }
  return "Unspecified";
}

std::optional<UnhealthyReason> ParseUnhealthyReason(std::string_view name) {
  for (auto r = static_cast<uint8_t>(UnhealthyReason::kUnspecified);
       r <= static_cast<uint8_t>(kLastUnhealthyReason); ++r) {
    if (ToString(static_cast<UnhealthyReason>(r)) == name) return static_cast<UnhealthyReason>(r);
  }
  return std::nullopt;
}

void MarkUnhealthy(Device& device, UnhealthyReason reason) {
  if (device.health == DeviceHealth::kUnhealthy &&
      device.unhealthy_reason != UnhealthyReason::kNone) {
    return;
  }
  device.health = DeviceHealth::kUnhealthy;
  device.unhealthy_reason = reason;
}

std::string_view ToString(ReclaimPolicy policy) {
  switch (policy) {
    case ReclaimPolicy::kRetain:
      return "Retain";
    case ReclaimPolicy::kDelete:
      return "Delete";
  }
  return "Unknown";
}

bool ReservedBySameVm(const Claim& claim, std::string_view ns, std::string_view vm,
                      std::string_view vm_uid) {
  return ReservedBySameVm(claim.key.ns, claim.status.reserved_for, ns, vm, vm_uid);
}

bool ReservedBySameVm(std::string_view claim_ns, const std::optional<Reservation>& reservation,
                      std::string_view ns, std::string_view vm, std::string_view vm_uid) {
  const std::optional<Reservation>& r = reservation;
  if (!r.has_value() || claim_ns != ns || r->vm != vm) return false;
  return r->vm_uid.empty() || vm_uid.empty() || r->vm_uid == vm_uid;
}

std::string VmIdentity(std::string_view label_vm_name,
                       std::string_view annotation_domain,
                       std::string_view pod_name) {
  if (!label_vm_name.empty()) return std::string(label_vm_name);
  if (!annotation_domain.empty()) return std::string(annotation_domain);
  return std::string(pod_name);
}

}  // namespace pdc
