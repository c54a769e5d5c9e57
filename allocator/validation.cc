#include "allocator/validation.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "model/allocations.h"
#include "model/names.h"

namespace pdc {
namespace {

bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

absl::Status Invalid(std::string_view field, std::string_view value,
                     std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(Sv(field), ": ", model::QuoteForMessage(value), " ", Sv(why)));
}

}  // namespace

absl::Status ValidateClaimKey(const ClaimKey& key) {
  if (absl::Status s = model::ValidateNamespace("namespace", key.ns); !s.ok()) return s;
  return model::ValidateObjectName("name", key.name);
}

absl::Status ValidateClaimSpec(const ClaimSpec& spec,
                               const std::vector<DeviceClass>& classes) {
  bool known = false;
  for (const DeviceClass& c : classes) known |= c.resource_name == spec.resource_name;
  if (!known) {
    std::string names;
    for (const DeviceClass& c : classes) {
      absl::StrAppend(&names, names.empty() ? "" : ", ", c.resource_name);
    }
    return Invalid("resourceName", spec.resource_name,
                   absl::StrCat("is not a configured device class (configured: ", names,
                                ")"));
  }
  if (spec.count < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("count: ", spec.count, " must be at least 1"));
  }
  if (spec.count > kMaxClaimCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("count: ", spec.count, " must be at most ", kMaxClaimCount));
  }
  if (!spec.node.empty()) {
    if (absl::Status s = model::ValidateObjectName("node", spec.node); !s.ok()) return s;
  }
  if ((!spec.serial.empty() || spec.address.has_value()) && spec.count != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "count: ", spec.count,
        " must be 1 for a claim pinned to a serial or a PCI address"));
  }
  if (spec.address.has_value() && spec.node.empty()) {
    return absl::InvalidArgumentError(
        "node: a claim pinned to a PCI address must also name its node (addresses "
        "are only unique within a node)");
  }
  for (char c : spec.serial) {
    if (c < 0x20 || c > 0x7e) {
      return Invalid("serial", spec.serial, "must be printable ASCII");
    }
  }
  if (spec.serial.size() > 64) return Invalid("serial", spec.serial, "is too long");
  if (!spec.owner_vm.empty()) {
    if (absl::Status s = model::ValidateObjectName("ownerVM", spec.owner_vm); !s.ok()) {
      return s;
    }
  }
  if (!spec.owner_vm_uid.empty()) {
    if (spec.owner_vm.empty()) {
      return Invalid("ownerVMUid", spec.owner_vm_uid, "needs ownerVM (the VM's name)");
    }
    if (absl::Status s = ValidateVmUid("ownerVMUid", spec.owner_vm_uid); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ValidateVmUid(std::string_view field, std::string_view uid) {
  if (uid.size() > kMaxVmUidLength) {
    return Invalid(field, uid, absl::StrCat("is longer than ", kMaxVmUidLength, " bytes"));
  }
  for (char c : uid) {
    if (c <= 0x20 || c > 0x7e) return Invalid(field, uid, "must be printable ASCII without spaces");
  }
  return absl::OkStatus();
}

absl::Status ValidateDeviceClasses(const std::vector<DeviceClass>& classes) {
  if (classes.empty()) {
    return absl::InvalidArgumentError("deviceClasses: at least one device class is required");
  }
  if (classes.size() > 64) {
    return absl::InvalidArgumentError("deviceClasses: at most 64 device classes");
  }
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < classes.size(); ++i) {
    const DeviceClass& c = classes[i];
    std::string field = absl::StrCat("deviceClasses[", i, "].resourceName");
    // An extended resource name: a qualified name with a domain prefix.
    if (c.resource_name.find('/') == std::string::npos) {
      return Invalid(field, c.resource_name,
                     "must be a qualified resource name like devices.kubevirt.io/nvme");
    }
    if (absl::Status s = model::ValidateQualifiedName(field, c.resource_name); !s.ok()) {
      return s;
    }
    if (!names.insert(c.resource_name).second) {
      return Invalid(field, c.resource_name, "is configured twice");
    }
    if (c.selectors.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("deviceClasses[", i, "].selectors: at least one vendor:device selector is required"));
    }
  }
  return absl::OkStatus();
}

std::string ClaimContradiction(const Claim& claim) {
  const ClaimSpec& spec = claim.spec;
  const ClaimStatus& st = claim.status;
  if (st.phase == ClaimPhase::kPending) {
    return st.devices.empty() ? "" : "a Pending claim names devices";
  }
  for (size_t i = 0; i < st.devices.size(); ++i) {
    for (size_t j = i + 1; j < st.devices.size(); ++j) {
      if (st.devices[i].address == st.devices[j].address) {
        return absl::StrCat("the status names device ", st.devices[i].address.ToString(),
                            " twice");
      }
    }
  }
  if (st.devices.size() != static_cast<size_t>(spec.count)) {
    return absl::StrCat("spec.count is ", spec.count, " but the status names ",
                        st.devices.size(), " device(s)");
  }
  if (!spec.node.empty() && spec.node != st.node) {
    return absl::StrCat("spec.node is ", spec.node, " but the devices are on node ", st.node);
  }
  if (spec.address.has_value() &&
      (st.devices.size() != 1 || st.devices[0].address != *spec.address)) {
    return absl::StrCat("spec.address is ", spec.address->ToString(),
                        " but the status names another device");
  }
  if (!spec.serial.empty() && (st.devices.size() != 1 || (!st.devices[0].serial.empty() &&
                                                          st.devices[0].serial != spec.serial))) {
    return "spec.serial names another device than the status";
  }
  return "";
}

std::string ResourceShortName(std::string_view resource_name) {
  size_t slash = resource_name.rfind('/');
  std::string_view base =
      slash == std::string_view::npos ? resource_name : resource_name.substr(slash + 1);
  std::string out;
  for (char c : base) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    out.push_back(IsAlnum(c) ? c : '-');
  }
  while (!out.empty() && out.front() == '-') out.erase(out.begin());
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.empty()) out = "device";
  return out;
}

}  // namespace pdc
