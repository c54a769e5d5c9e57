// The kube-apiserver double's reading of a CRD's CEL rules
// (tests/testing/kube_crd_rules.h): pdc's claim CRD as shipped, a rule of a
// shape the double does not know refused at load, and the verdicts as
// kube-apiserver gives them.
#include "tests/testing/kube_crd_rules.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace pdc::testing::kube {
namespace {

using ::testing::HasSubstr;

rapidjson::Document JsonOf(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  return d;
}

TEST(CrdRulesTest, TheClaimCrdsSpecIsImmutableButItsReclaimPolicy) {
  ASSERT_OK_AND_ASSIGN(CrdRules rules, CrdRules::Load(PDC_CLAIM_CRD_FILE, "v1alpha1"));
  std::vector<std::string> immutable;
  std::vector<std::string> presence;
  int others = 0;
  for (const CrdRules::Rule& r : rules.rules()) {
    if (r.shape == CrdRules::Rule::Shape::kImmutable) {
      immutable.push_back(absl::StrJoin(r.path, "."));
    } else if (r.shape == CrdRules::Rule::Shape::kPresence) {
      presence.push_back(r.a);
    } else {
      ++others;
    }
  }
  EXPECT_THAT(immutable, ::testing::UnorderedElementsAre(
                             "spec.resourceName", "spec.count", "spec.node", "spec.serial",
                             "spec.address", "spec.ownerVM", "spec.ownerVMUid"));
  EXPECT_THAT(presence, ::testing::UnorderedElementsAre("node", "serial", "address", "ownerVM",
                                                        "ownerVMUid"));
  // An address pin needs a node; a pin needs count 1; ownerVMUid needs ownerVM.
  EXPECT_EQ(others, 3);
}

TEST(CrdRulesTest, VerdictsAsKubeApiserverGivesThem) {
  ASSERT_OK_AND_ASSIGN(CrdRules rules, CrdRules::Load(PDC_CLAIM_CRD_FILE, "v1alpha1"));
  const rapidjson::Document old =
      JsonOf(R"({"spec":{"count":1,"node":"","reclaimPolicy":"Delete"}})");
  struct Row {
    std::string name;
    std::string obj;
    bool create;
    std::string why;  // "" = accepted.
  };
  const std::vector<Row> rows = {
      {"count edited", R"({"spec":{"count":2,"node":"","reclaimPolicy":"Delete"}})", false,
       R"(spec.count: Invalid value: "integer": count is immutable)"},
      {"node edited", R"({"spec":{"count":1,"node":"node-b","reclaimPolicy":"Delete"}})", false,
       R"(spec.node: Invalid value: "string": node is immutable)"},
      {"reclaimPolicy edited", R"({"spec":{"count":1,"node":"","reclaimPolicy":"Retain"}})",
       false, ""},
      // A field-level transition rule only where the old object has the
      // value too; the object-level presence rule catches setting one.
      {"serial added", R"({"spec":{"count":1,"node":"","serial":"SN1"}})", false,
       R"(spec: Invalid value: "object": serial is immutable)"},
      {"node removed", R"({"spec":{"count":1,"reclaimPolicy":"Delete"}})", false,
       "node is immutable"},
      {"count 2 pinned", R"({"spec":{"count":2,"serial":"SN1"}})", true,
       "count must be 1 for a claim pinned"},
      {"count 2 unpinned", R"({"spec":{"count":2,"serial":""}})", true, ""},
      {"address without node", R"({"spec":{"count":1,"address":"0000:3b:00.0"}})", true,
       "an address pin needs node as well"},
      {"address with node", R"({"spec":{"count":1,"address":"0000:3b:00.0","node":"n"}})", true,
       ""},
  };
  for (const Row& row : rows) {
    const rapidjson::Document obj = JsonOf(row.obj);
    const absl::Status s = rules.Check(row.create ? nullptr : &old, obj);
    if (row.why.empty()) {
      EXPECT_OK(s) << row.name;
    } else {
      EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(row.why)))
          << row.name;
    }
  }
}

TEST(CrdRulesTest, ARuleOfAnUnknownShapeIsRefusedAtLoad) {
  TempDir dir;
  const std::string file = dir.Join("crd.yaml");
  ASSERT_OK(WriteFileAtomically(file, R"(apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  versions:
    - name: v1alpha1
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                count:
                  type: integer
                  x-kubernetes-validations:
                    - rule: "self >= oldSelf"
                      message: "count only grows"
)"));
  EXPECT_THAT(CrdRules::Load(file, "v1alpha1"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(R"(no CEL rule of the shape "self >= oldSelf" (at spec.count))")));
  EXPECT_THAT(CrdRules::Load(file, "v1"), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace pdc::testing::kube
