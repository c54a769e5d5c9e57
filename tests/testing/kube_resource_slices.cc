#include "tests/testing/kube_resource_slices.h"

#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "model/names.h"
#include "tests/testing/sv_strings.h"

namespace pdc::testing::kube {
namespace {

// The first problem found, as "<field>: <Kubernetes' words>".
using Problem = std::optional<std::string>;

std::string Quoted(std::string_view v) { return Cat("\"", v, "\""); }

Problem InvalidValue(std::string_view field, std::string_view shown,
                     std::string_view why) {
  return Cat(field, ": Invalid value: ", shown, ": ", why);
}

Problem Required(std::string_view field) {
  return Cat(field, ": Required value");
}

Problem TooMany(std::string_view field, size_t have, int max) {
  return Cat(field, ": Too many: ", have, ": must have at most ", max,
             " items");
}

Problem TooLong(std::string_view field, int max) {
  return Cat(field, ": Too long: may not be more than ", max, " bytes");
}

std::string StringAt(const Value* v) {
  return v != nullptr && v->IsString()
             ? std::string(v->GetString(), v->GetStringLength())
             : std::string();
}

Problem FromNames(std::string_view field, std::string_view value,
                  const std::vector<std::string>& problems) {
  if (problems.empty()) return std::nullopt;
  return InvalidValue(field, Quoted(value), absl::StrJoin(problems, ", "));
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = absl::ascii_tolower(static_cast<unsigned char>(c));
  return out;
}

// ValidateCSIDriverName (pkg/apis/core/validation): required, at most 63
// characters, a DNS-1123 subdomain once lower-cased.
Problem DriverName(std::string_view field, std::string_view name) {
  if (name.empty()) return Required(field);
  if (name.size() > kDriverNameMaxLength) {
    return TooLong(field, kDriverNameMaxLength);
  }
  return FromNames(field, name,
                   model::IsDns1123Subdomain(Lower(name)));
}

// validatePoolName: required, at most 253 characters, each part between
// slashes a DNS-1123 subdomain.
Problem PoolName(std::string_view field, std::string_view name) {
  if (name.empty()) return Required(field);
  if (name.size() > kPoolNameMaxLength) {
    return TooLong(field, kPoolNameMaxLength);
  }
  for (std::string_view part : Split(name, '/')) {
    if (Problem p = FromNames(field, part, model::IsDns1123Subdomain(part))) {
      return p;
    }
  }
  return std::nullopt;
}

// validateCIdentifier: content.IsCIdentifier, at most DeviceMaxIDLength.
Problem CIdentifier(std::string_view field, std::string_view id) {
  if (id.size() > kDeviceMaxIdLength) return TooLong(field, kDeviceMaxIdLength);
  static const std::regex kC("[A-Za-z_][A-Za-z0-9_]*");
  if (!std::regex_match(id.begin(), id.end(), kC)) {
    return InvalidValue(
        field, Quoted(id),
        "a valid C identifier must start with alphabetic character or '_', "
        "followed by a string of alphanumeric characters or '_' (e.g. "
        "'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation "
        "is '[A-Za-z_][A-Za-z0-9_]*')");
  }
  return std::nullopt;
}

// validateQualifiedName: a C identifier, or <domain>/<C identifier> with
// the domain a driver name.
Problem QualifiedName(std::string_view field, std::string_view name) {
  std::vector<std::string_view> parts = Split(name, '/');
  if (parts.size() == 1) return CIdentifier(field, parts[0]);
  if (parts.size() == 2) {
    if (parts[0].empty()) {
      return InvalidValue(field, "\"\"", "the domain must not be empty");
    }
    if (Problem p = DriverName(field, parts[0])) return p;
    if (parts[1].empty()) {
      return InvalidValue(field, "\"\"", "the name must not be empty");
    }
    return CIdentifier(field, parts[1]);
  }
  // More than one slash: upstream does not reject these yet (a TODO in
  // validateQualifiedName), so neither does the double.
  return std::nullopt;
}

// semverRe of validation.go (semver.org 2.0.0).
bool IsSemver(std::string_view v) {
  static const std::regex kSemver(
      "(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)"
      "(-(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
      "(\\.(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
      "(\\+[0-9a-zA-Z-]+(\\.[0-9a-zA-Z-]+)*)?");
  return std::regex_match(v.begin(), v.end(), kSemver);
}

// validateDeviceAttribute: exactly one of bool, int, string, version; a
// string at most DeviceAttributeMaxValueLength, a version semver.
Problem Attribute(std::string_view field, const Value& a) {
  if (!a.IsObject()) {
    return InvalidValue(field, "\"\"", "exactly one value must be specified");
  }
  int n = 0;
  for (std::string_view type : {"bool", "int", "string", "version"}) {
    if (Find(a, {type}) != nullptr) ++n;
  }
  if (n != 1) {
    return InvalidValue(field, n == 0 ? "\"\"" : ToJson(a),
                        "exactly one value must be specified");
  }
  if (const Value* b = Find(a, {"bool"}); b != nullptr && !b->IsBool()) {
    return InvalidValue(Cat(field, ".bool"), ToJson(*b), "must be a boolean");
  }
  if (const Value* i = Find(a, {"int"}); i != nullptr && !i->IsInt64()) {
    return InvalidValue(Cat(field, ".int"), ToJson(*i),
                        "must be a 64-bit integer");
  }
  for (std::string_view type : {"string", "version"}) {
    const Value* s = Find(a, {type});
    if (s == nullptr) continue;
    if (!s->IsString()) {
      return InvalidValue(Cat(field, ".", type), ToJson(*s),
                          "must be a string");
    }
    if (s->GetStringLength() > kDeviceAttributeMaxValueLength) {
      return TooLong(Cat(field, ".", type), kDeviceAttributeMaxValueLength);
    }
    if (type == "version" && !IsSemver(StringAt(s))) {
      return InvalidValue(Cat(field, ".version"), Quoted(StringAt(s)),
                          "must be a string compatible with semver.org spec "
                          "2.0.0");
    }
  }
  return std::nullopt;
}

bool HasAny(const Value& obj, std::string_view member) {
  const Value* v = Find(obj, {member});
  return v != nullptr && !v->IsNull() &&
         !(v->IsArray() && v->Empty()) && !(v->IsObject() && v->ObjectEmpty());
}

// validateDevice, for the checks listed in the header.
Problem Device(std::string_view field, const Value& d,
               bool per_device_node_selection) {
  if (!d.IsObject()) return InvalidValue(field, ToJson(d), "must be an object");
  const std::string name = GetString(d, {"name"});
  if (name.empty()) return Required(Cat(field, ".name"));
  if (Problem p = FromNames(Cat(field, ".name"), name,
                            model::IsDns1123Label(name))) {
    return p;
  }
  const Value* attrs = Find(d, {"attributes"});
  const Value* caps = Find(d, {"capacity"});
  const size_t count = (attrs != nullptr && attrs->IsObject() ? attrs->MemberCount() : 0) +
                       (caps != nullptr && caps->IsObject() ? caps->MemberCount() : 0);
  if (count > kResourceSliceMaxAttributesAndCapacitiesPerDevice) {
    return InvalidValue(field, Cat(count),
                        Cat("the total number of attributes and capacities "
                            "must not exceed ",
                            kResourceSliceMaxAttributesAndCapacitiesPerDevice));
  }
  if (attrs != nullptr && !attrs->IsNull()) {
    if (!attrs->IsObject()) {
      return InvalidValue(Cat(field, ".attributes"), ToJson(*attrs),
                          "must be an object");
    }
    for (const auto& m : attrs->GetObject()) {
      const std::string key(m.name.GetString(), m.name.GetStringLength());
      const std::string at = Cat(field, ".attributes[", key, "]");
      if (Problem p = QualifiedName(at, key)) return p;
      if (Problem p = Attribute(at, m.value)) return p;
    }
  }
  if (caps != nullptr && !caps->IsNull()) {
    if (!caps->IsObject()) {
      return InvalidValue(Cat(field, ".capacity"), ToJson(*caps),
                          "must be an object");
    }
    for (const auto& m : caps->GetObject()) {
      const std::string key(m.name.GetString(), m.name.GetStringLength());
      const std::string at = Cat(field, ".capacity[", key, "]");
      if (Problem p = QualifiedName(at, key)) return p;
      const Value* v = m.value.IsObject() ? Find(m.value, {"value"}) : nullptr;
      if (v == nullptr || !(v->IsString() || v->IsNumber())) {
        return Required(Cat(at, ".value"));
      }
    }
  }
  const bool has_node = HasAny(d, "nodeName") || HasAny(d, "nodeSelector") ||
                        HasAny(d, "allNodes");
  if (!per_device_node_selection && has_node) {
    return InvalidValue(field, "null",
                        "`nodeName`, `nodeSelector` and `allNodes` can only "
                        "be set if `perDeviceNodeSelection` is set to true in "
                        "the ResourceSlice spec");
  }
  return std::nullopt;
}

// validateResourceSliceSpec.
Problem SliceSpec(const Value* old_spec, const Value& spec) {
  const std::string driver = StringAt(Find(spec, {"driver"}));
  if (Problem p = DriverName("spec.driver", driver)) return p;
  const Value* pool = Find(spec, {"pool"});
  if (pool == nullptr || !pool->IsObject()) return Required("spec.pool");
  const std::string pool_name = StringAt(Find(*pool, {"name"}));
  if (Problem p = PoolName("spec.pool.name", pool_name)) return p;
  const Value* count = Find(*pool, {"resourceSliceCount"});
  if (count == nullptr || !count->IsInt64() || count->GetInt64() <= 0) {
    return InvalidValue("spec.pool.resourceSliceCount",
                        count == nullptr ? "0" : ToJson(*count),
                        "must be greater than zero");
  }
  const Value* generation = Find(*pool, {"generation"});
  if (generation != nullptr &&
      (!generation->IsInt64() || generation->GetInt64() < 0)) {
    return InvalidValue("spec.pool.generation", ToJson(*generation),
                        "must be greater than or equal to zero");
  }
  if (old_spec != nullptr) {
    for (const auto& [field, path] :
         std::vector<std::pair<std::string, std::vector<std::string_view>>>{
             {"spec.pool.name", {"pool", "name"}},
             {"spec.driver", {"driver"}},
             {"spec.nodeName", {"nodeName"}}}) {
      const Value* a = path.size() == 2 ? Find(spec, {path[0], path[1]})
                                        : Find(spec, {path[0]});
      const Value* b = path.size() == 2 ? Find(*old_spec, {path[0], path[1]})
                                        : Find(*old_spec, {path[0]});
      if (StringAt(a) != StringAt(b)) {
        return InvalidValue(field, Quoted(StringAt(a)), "field is immutable");
      }
    }
  }
  // Exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection.
  std::vector<std::string> set;
  if (const Value* n = Find(spec, {"nodeName"}); n != nullptr && !n->IsNull()) {
    const std::string node = StringAt(n);
    if (node.empty()) {
      return InvalidValue("spec.nodeName", "\"\"",
                          "must be either unset or set to a non-empty string");
    }
    if (Problem p = FromNames("spec.nodeName", node,
                              model::IsDns1123Subdomain(node))) {
      return p;
    }
    set.push_back("`nodeName`");
  }
  if (const Value* s = Find(spec, {"nodeSelector"});
      s != nullptr && !s->IsNull()) {
    const Value* terms = s->IsObject() ? Find(*s, {"nodeSelectorTerms"}) : nullptr;
    if (terms == nullptr || !terms->IsArray() || terms->Size() != 1) {
      return InvalidValue("spec.nodeSelector.nodeSelectorTerms",
                          terms == nullptr ? "null" : ToJson(*terms),
                          "must have exactly one node selector term");
    }
    set.push_back("`nodeSelector`");
  }
  bool per_device = false;
  for (std::string_view flag : {"allNodes", "perDeviceNodeSelection"}) {
    const Value* v = Find(spec, {flag});
    if (v == nullptr || v->IsNull()) continue;
    if (!v->IsBool() || !v->GetBool()) {
      return InvalidValue(Cat("spec.", flag), ToJson(*v),
                          "must be either unset or set to true");
    }
    set.push_back(Cat("`", flag, "`"));
    if (flag == "perDeviceNodeSelection") per_device = true;
  }
  if (set.empty()) {
    return Cat("spec: Required value: exactly one of `nodeName`, "
               "`nodeSelector`, `allNodes`, `perDeviceNodeSelection` is "
               "required");
  }
  if (set.size() > 1) {
    return InvalidValue("spec", Cat("\"{", absl::StrJoin(set, ", "), "}\""),
                        "exactly one of `nodeName`, `nodeSelector`, "
                        "`allNodes`, `perDeviceNodeSelection` is required, "
                        "but multiple fields are set");
  }
  if (HasAny(spec, "sharedCounters") && HasAny(spec, "devices")) {
    return InvalidValue("spec", "\"\"",
                        "only one of `sharedCounters` or `devices` is allowed");
  }
  const Value* devices = Find(spec, {"devices"});
  if (devices == nullptr || devices->IsNull()) return std::nullopt;
  if (!devices->IsArray()) {
    return InvalidValue("spec.devices", ToJson(*devices), "must be a list");
  }
  int max = kResourceSliceMaxDevices;
  for (const Value& d : devices->GetArray()) {
    if (d.IsObject() && (HasAny(d, "taints") || HasAny(d, "consumesCounters"))) {
      max = kResourceSliceMaxDevicesWithTaintsOrConsumesCounters;
    }
  }
  if (devices->Size() > static_cast<rapidjson::SizeType>(max)) {
    return TooMany("spec.devices", devices->Size(), max);
  }
  std::set<std::string> names;
  for (rapidjson::SizeType i = 0; i < devices->Size(); ++i) {
    const std::string at = Cat("spec.devices[", i, "]");
    if (Problem p = Device(at, (*devices)[i], per_device)) return p;
    const std::string name = GetString((*devices)[i], {"name"});
    if (!names.insert(name).second) {
      return Cat(at, ": Duplicate value: ", Quoted(name));
    }
  }
  return std::nullopt;
}

// validateDeviceClassSpec: selectors (at most DeviceSelectorsMaxSize, each
// with a CEL expression) and config (at most DeviceConfigMaxSize).
Problem ClassSpec(const Value* spec) {
  if (spec == nullptr || spec->IsNull()) return std::nullopt;
  if (!spec->IsObject()) return InvalidValue("spec", ToJson(*spec), "must be an object");
  if (const Value* sels = Find(*spec, {"selectors"});
      sels != nullptr && !sels->IsNull()) {
    if (!sels->IsArray()) {
      return InvalidValue("spec.selectors", ToJson(*sels), "must be a list");
    }
    if (sels->Size() > kDeviceSelectorsMaxSize) {
      return TooMany("spec.selectors", sels->Size(), kDeviceSelectorsMaxSize);
    }
    for (rapidjson::SizeType i = 0; i < sels->Size(); ++i) {
      const std::string at = Cat("spec.selectors[", i, "].cel");
      const Value& s = (*sels)[i];
      const Value* cel = s.IsObject() ? Find(s, {"cel"}) : nullptr;
      if (cel == nullptr || cel->IsNull()) return Required(at);
      const Value* expr = cel->IsObject() ? Find(*cel, {"expression"}) : nullptr;
      if (expr == nullptr || !expr->IsString() || expr->GetStringLength() == 0) {
        return Required(Cat(at, ".expression"));
      }
      if (expr->GetStringLength() > kCelSelectorExpressionMaxLength) {
        return TooLong(Cat(at, ".expression"), kCelSelectorExpressionMaxLength);
      }
    }
  }
  if (const Value* config = Find(*spec, {"config"});
      config != nullptr && config->IsArray() &&
      config->Size() > kDeviceConfigMaxSize) {
    return TooMany("spec.config", config->Size(), kDeviceConfigMaxSize);
  }
  return std::nullopt;
}

}  // namespace

absl::Status ValidateResourceSlice(const Value* old, const Value& obj,
                                   std::string_view /*subresource*/) {
  const std::string name = GetString(obj, {"metadata", "name"});
  const Value* spec = Find(obj, {"spec"});
  Problem p = (spec == nullptr || !spec->IsObject())
                  ? Required("spec")
                  : SliceSpec(old == nullptr ? nullptr : Find(*old, {"spec"}),
                              *spec);
  if (!p) return absl::OkStatus();
  return Invalid("ResourceSlice", "resource.k8s.io", name, *p);
}

absl::Status ValidateDeviceClass(const Value* /*old*/, const Value& obj,
                                 std::string_view /*subresource*/) {
  // The name: corevalidation.ValidateClassName (a DNS-1123 subdomain), which
  // the store checks for every resource.
  if (Problem p = ClassSpec(Find(obj, {"spec"}))) {
    return Invalid("DeviceClass", "resource.k8s.io",
                   GetString(obj, {"metadata", "name"}), *p);
  }
  return absl::OkStatus();
}

}  // namespace pdc::testing::kube
