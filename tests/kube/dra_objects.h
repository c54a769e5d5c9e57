// JSON of the DRA objects the tests of the DRA doubles and the keeper make
// in the kube-apiserver double: claims, virt-launcher-like pods, VMs.
#ifndef PDC_TESTS_KUBE_DRA_OBJECTS_H_
#define PDC_TESTS_KUBE_DRA_OBJECTS_H_

#include <string>
#include <string_view>

#include "tests/testing/kube_json.h"
#include "tests/testing/sv_strings.h"

namespace pdc::testing::dra {

inline constexpr std::string_view kDriver = "pdc.kubevirt.io";
inline constexpr std::string_view kClass = "nvme.pdc.kubevirt.io";

inline std::string ClaimsPath(std::string_view ns) {
  return Cat("/apis/resource.k8s.io/v1/namespaces/", ns, "/resourceclaims");
}
inline std::string ClaimPath(std::string_view ns, std::string_view name) {
  return Cat(ClaimsPath(ns), "/", name);
}
// A claim of one device of kClass, request "disk".
inline std::string ClaimJson(std::string_view name) {
  return Cat(
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":")",
      name, R"("},"spec":{"devices":{"requests":[{"name":"disk","exactly":{"deviceClassName":")",
      kClass, R"(","count":1}}]}}})");
}
// A pod that uses claim `claim`, owned (controller) by `owner_json` (an
// "ownerReferences":[...] member, or "").
inline std::string PodJson(std::string_view name, std::string_view claim,
                           std::string_view owner_json = "") {
  return Cat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", name, R"(")",
             owner_json.empty() ? "" : ",", owner_json,
             R"(},"spec":{"containers":[{"name":"compute","image":"virt-launcher"}],)",
             R"("resourceClaims":[{"name":"disk","resourceClaimName":")", claim, R"("}]}})");
}
inline std::string Consumer(std::string_view group, std::string_view resource,
                            std::string_view name, std::string_view uid) {
  return Cat(R"({)", group.empty() ? "" : Cat(R"("apiGroup":")", group, R"(",)"),
             R"("resource":")", resource, R"(","name":")", name, R"(","uid":")", uid,
             R"("})");
}

// The consumers of a claim as "<resource>/<name>" (ordered as stored).
inline std::vector<std::string> ReservedFor(const kube::Value& claim) {
  std::vector<std::string> out;
  const kube::Value* l = kube::Find(claim, {"status", "reservedFor"});
  if (l == nullptr || !l->IsArray()) return out;
  for (const kube::Value& e : l->GetArray()) {
    out.push_back(Cat(kube::GetString(e, {"resource"}), "/", kube::GetString(e, {"name"})));
  }
  return out;
}

}  // namespace pdc::testing::dra

#endif  // PDC_TESTS_KUBE_DRA_OBJECTS_H_
