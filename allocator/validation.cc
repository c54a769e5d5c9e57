#include "allocator/validation.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace pdc {
namespace {

bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// "" when `label` is a valid RFC 1123 label, else why not.
std::string LabelProblem(std::string_view label) {
  if (label.empty()) return "must not be empty";
  if (label.size() > 63) return "must be at most 63 characters";
  for (char c : label) {
    if (!IsAlnum(c) && c != '-') {
      return "must consist of lower-case letters, digits and '-'";
    }
  }
  if (label.front() == '-' || label.back() == '-') {
    return "must start and end with a letter or digit";
  }
  return "";
}

absl::Status Invalid(std::string_view field, std::string_view value,
                     std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      Sv(field), ": \"", absl::CHexEscape(Sv(value)), "\" ", Sv(why)));
}

}  // namespace

absl::Status ValidateDnsLabel(std::string_view field, std::string_view value) {
  std::string problem = LabelProblem(value);
  if (!problem.empty()) return Invalid(field, value, problem);
  return absl::OkStatus();
}

absl::Status ValidateDnsSubdomain(std::string_view field, std::string_view value) {
  if (value.empty()) return Invalid(field, value, "must not be empty");
  if (value.size() > 253) return Invalid(field, value, "must be at most 253 characters");
  size_t start = 0;
  while (true) {
    size_t dot = value.find('.', start);
    std::string_view label = value.substr(start, dot == std::string_view::npos
                                                     ? std::string_view::npos
                                                     : dot - start);
    std::string problem = LabelProblem(label);
    if (!problem.empty()) {
      return Invalid(field, value,
                     absl::StrCat("is not a DNS-1123 subdomain: each dot-separated part ",
                                  problem));
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return absl::OkStatus();
}

absl::Status ValidateClaimKey(const ClaimKey& key) {
  if (absl::Status s = ValidateDnsLabel("namespace", key.ns); !s.ok()) return s;
  return ValidateDnsSubdomain("name", key.name);
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
  if (spec.count > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("count: ", spec.count, " must be at most 256"));
  }
  if (!spec.node.empty()) {
    if (absl::Status s = ValidateDnsSubdomain("node", spec.node); !s.ok()) return s;
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
    if (absl::Status s = ValidateDnsSubdomain("ownerVM", spec.owner_vm); !s.ok()) {
      return s;
    }
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
    // A resource name is a qualified name: <domain>/<name>.
    size_t slash = c.resource_name.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == c.resource_name.size()) {
      return Invalid(field, c.resource_name,
                     "must be a qualified resource name like devices.kubevirt.io/nvme");
    }
    if (absl::Status s = ValidateDnsSubdomain(field, c.resource_name.substr(0, slash));
        !s.ok()) {
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
