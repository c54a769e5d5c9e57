// The x-kubernetes-validations (CEL) rules of a CustomResourceDefinition, for
// the kube-apiserver double, which runs no CEL. Read from the CRD file itself
// (deploy/crd/...), so the double enforces what the CRD says and nothing the
// test author remembers. Only the rule shapes pdc's CRDs use are known; a
// rule of any other shape makes Load fail, naming it, so the double never
// silently drifts from the CRD:
//  - "self == oldSelf" on a property: a transition rule (the property is
//    immutable once set);
//  - "!has(self.A) || self.A == '' || (has(self.B) && self.B != '')" on an
//    object: A set (non-empty) needs B set;
//  - "self.N == 1 || ((!has(self.A) || self.A == '') && (!has(self.B) ||
//    self.B == ''))" on an object: N is 1 unless neither A nor B is set;
//  - "has(self.A) == has(oldSelf.A)" on an object: a transition rule, A
//    may be neither set nor unset.
// Evaluation follows k8s.io/apiextensions-apiserver
// pkg/apiserver/schema/cel/validation.go (Validator.Validate): a rule is
// evaluated where its value exists in the object; a transition rule only
// on update, where the old object has a value at the same path too (a
// property removed is not checked by a rule on it); a rule that fails is
// field.Invalid(path, <the schema's type>, <the rule's message>), so the
// write is 422 Invalid: `spec.count: Invalid value: "integer": count is
// immutable: ...`.
// Thread-safety: immutable after Load.
#ifndef PDC_TESTS_TESTING_KUBE_CRD_RULES_H_
#define PDC_TESTS_TESTING_KUBE_CRD_RULES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rapidjson/document.h"

namespace pdc::testing::kube {

class CrdRules {
 public:
  struct Rule {
    std::vector<std::string> path;  // Property names from the object's root.
    std::string type;               // The schema's type at the path.
    enum class Shape { kImmutable, kNeeds, kOneUnlessSet, kPresence } shape = Shape::kImmutable;
    // kNeeds: a needs b. kOneUnlessSet: n is 1 unless a or b is set.
    // kPresence: a is there before and after, or neither.
    std::string a, b, n;
    std::string message;
  };

  // Reads `crd_file` (YAML) and the rules of its version `version`.
  // InvalidArgument naming the rule and its path for a rule of a shape not
  // known here; NotFound for a file or version that is not there.
  static absl::StatusOr<CrdRules> Load(const std::string& crd_file, std::string_view version);

  // The rules' verdict on writing `obj` over `old` (null: a create). The
  // first failing rule, as "<path>: Invalid value: \"<type>\": <message>";
  // OK when every rule holds.
  absl::Status Check(const rapidjson::Value* old, const rapidjson::Value& obj) const;

  const std::vector<Rule>& rules() const { return rules_; }

 private:
  std::vector<Rule> rules_;
};

// The kube-apiserver double's check of a PersistentDeviceClaim write (the
// KubeResource::validate of persistentdeviceclaims.pdc.kubevirt.io): the
// rules of deploy/crd/persistentdeviceclaims.yaml, read once, as 422 Invalid
// naming the object; nothing while not enforced. A CRD whose rules do not
// load fails every write with that error (500).
absl::Status ValidatePersistentDeviceClaim(const rapidjson::Value* old,
                                           const rapidjson::Value& obj,
                                           std::string_view subresource);
// Off by default (the double's own tests edit specs freely, as an
// apiserver without CEL would); tests of pdc turn it on. Process-wide.
void EnforceCrdRules(bool on);

}  // namespace pdc::testing::kube

#endif  // PDC_TESTS_TESTING_KUBE_CRD_RULES_H_
