#include "tests/testing/kube_crd_rules.h"

#include <atomic>
#include <regex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "tests/testing/kube_json.h"
#include "yaml-cpp/yaml.h"

namespace pdc::testing::kube {
namespace {

const std::regex& NeedsShape() {
  static const std::regex* const re = new std::regex(
      R"(^!has\(self\.(\w+)\) \|\| self\.(\w+) == '' \|\| \(has\(self\.(\w+)\) && self\.(\w+) != ''\)$)");
  return *re;
}

const std::regex& OneUnlessSetShape() {
  static const std::regex* const re = new std::regex(
      R"(^self\.(\w+) == 1 \|\| \(\(!has\(self\.(\w+)\) \|\| self\.(\w+) == ''\) && \(!has\(self\.(\w+)\) \|\| self\.(\w+) == ''\)\)$)");
  return *re;
}

const std::regex& PresenceShape() {
  static const std::regex* const re =
      new std::regex(R"(^has\(self\.(\w+)\) == has\(oldSelf\.(\w+)\)$)");
  return *re;
}

absl::Status Walk(const YAML::Node& schema, std::vector<std::string>& path,
                  std::vector<CrdRules::Rule>& out) {
  if (!schema.IsMap()) return absl::OkStatus();
  const std::string type = schema["type"] ? schema["type"].as<std::string>() : "";
  if (const YAML::Node rules = schema["x-kubernetes-validations"]; rules) {
    for (const YAML::Node& r : rules) {
      const std::string text = r["rule"] ? r["rule"].as<std::string>() : "";
      CrdRules::Rule rule;
      rule.path = path;
      rule.type = type;
      rule.message = r["message"] ? r["message"].as<std::string>()
                                  : absl::StrCat("failed rule: ", text);
      std::smatch m;
      if (text == "self == oldSelf") {
        rule.shape = CrdRules::Rule::Shape::kImmutable;
      } else if (std::regex_match(text, m, NeedsShape()) && m[1] == m[2] && m[3] == m[4]) {
        rule.shape = CrdRules::Rule::Shape::kNeeds;
        rule.a = m[1];
        rule.b = m[3];
      } else if (std::regex_match(text, m, OneUnlessSetShape()) && m[2] == m[3] &&
                 m[4] == m[5]) {
        rule.shape = CrdRules::Rule::Shape::kOneUnlessSet;
        rule.n = m[1];
        rule.a = m[2];
        rule.b = m[4];
      } else if (std::regex_match(text, m, PresenceShape()) && m[1] == m[2]) {
        rule.shape = CrdRules::Rule::Shape::kPresence;
        rule.a = m[1];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("the kube-apiserver double knows no CEL rule of the shape \"", text,
                         "\" (at ", absl::StrJoin(path, "."),
                         "): teach tests/testing/kube_crd_rules.cc its meaning first"));
      }
      out.push_back(std::move(rule));
    }
  }
  if (const YAML::Node props = schema["properties"]; props && props.IsMap()) {
    for (const auto& kv : props) {
      path.push_back(kv.first.as<std::string>());
      absl::Status s = Walk(kv.second, path, out);
      path.pop_back();
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

const rapidjson::Value* At(const rapidjson::Value* v, const std::vector<std::string>& path) {
  for (const std::string& p : path) {
    if (v == nullptr || !v->IsObject()) return nullptr;
    auto it = v->FindMember(p.c_str());
    if (it == v->MemberEnd() || it->value.IsNull()) return nullptr;
    v = &it->value;
  }
  return v;
}

// has(self.f): a member that is there (null is absent, as pruning leaves it).
bool Has(const rapidjson::Value& obj, const std::string& f) {
  auto it = obj.FindMember(f.c_str());
  return it != obj.MemberEnd() && !it->value.IsNull();
}

// has(self.f) && self.f != '': a member that is there and not the empty
// string.
bool Set(const rapidjson::Value& obj, const std::string& f) {
  auto it = obj.FindMember(f.c_str());
  if (it == obj.MemberEnd() || it->value.IsNull()) return false;
  return !(it->value.IsString() && it->value.GetStringLength() == 0);
}

}  // namespace

absl::StatusOr<CrdRules> CrdRules::Load(const std::string& crd_file, std::string_view version) {
  YAML::Node crd;
  try {
    crd = YAML::LoadFile(crd_file);
  } catch (const YAML::Exception& e) {
    return absl::NotFoundError(absl::StrCat("CRD ", crd_file, ": ", e.what()));
  }
  CrdRules out;
  try {
    for (const YAML::Node& v : crd["spec"]["versions"]) {
      if (v["name"].as<std::string>() != version) continue;
      std::vector<std::string> path;
      RETURN_IF_ERROR(Walk(v["schema"]["openAPIV3Schema"], path, out.rules_));
      return out;
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("CRD ", crd_file, ": ", e.what()));
  }
  return absl::NotFoundError(absl::StrCat("CRD ", crd_file, " has no version ", Sv(version)));
}

absl::Status CrdRules::Check(const rapidjson::Value* old, const rapidjson::Value& obj) const {
  for (const Rule& r : rules_) {
    const rapidjson::Value* self = At(&obj, r.path);
    if (self == nullptr) continue;
    // A transition rule only where the old object has a value too.
    const rapidjson::Value* old_self = old == nullptr ? nullptr : At(old, r.path);
    bool holds = true;
    switch (r.shape) {
      case Rule::Shape::kImmutable:
        if (old_self == nullptr) continue;
        holds = *self == *old_self;
        break;
      case Rule::Shape::kPresence:
        if (old_self == nullptr || !self->IsObject() || !old_self->IsObject()) continue;
        holds = Has(*self, r.a) == Has(*old_self, r.a);
        break;
      case Rule::Shape::kNeeds:
        holds = !self->IsObject() || !Set(*self, r.a) || Set(*self, r.b);
        break;
      case Rule::Shape::kOneUnlessSet: {
        if (!self->IsObject()) break;
        auto n = self->FindMember(r.n.c_str());
        const bool one = n != self->MemberEnd() && n->value.IsInt64() && n->value.GetInt64() == 1;
        holds = one || (!Set(*self, r.a) && !Set(*self, r.b));
        break;
      }
    }
    if (!holds) {
      return absl::InvalidArgumentError(absl::StrCat(absl::StrJoin(r.path, "."),
                                                     ": Invalid value: \"", r.type, "\": ",
                                                     r.message));
    }
  }
  return absl::OkStatus();
}

namespace {
std::atomic<bool> enforced{false};
}  // namespace

void EnforceCrdRules(bool on) { enforced.store(on); }

absl::Status ValidatePersistentDeviceClaim(const rapidjson::Value* old,
                                           const rapidjson::Value& obj,
                                           std::string_view subresource) {
  // A status write keeps the old spec (the status strategy), so only the
  // main resource's writes are checked.
  if (!enforced.load() || !subresource.empty()) return absl::OkStatus();
  static const absl::StatusOr<CrdRules>* const rules = new absl::StatusOr<CrdRules>(
      CrdRules::Load(PDC_CLAIM_CRD_FILE, "v1alpha1"));
  if (!rules->ok()) return absl::InternalError(rules->status().message());
  absl::Status s = (*rules)->Check(old, obj);
  if (s.ok()) return s;
  return Invalid("PersistentDeviceClaim", "pdc.kubevirt.io", GetString(obj, {"metadata", "name"}),
                 StdSv(s.message()));
}

}  // namespace pdc::testing::kube
