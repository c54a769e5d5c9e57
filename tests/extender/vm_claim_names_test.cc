// VmClaimNames (extender/vm_claim_names.h): the claims a VirtualMachine's
// spec names, kept from its watch, and the changes it reports.
#include "extender/vm_claim_names.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc::extender {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// A VirtualMachine named `name` (uid `uid`) in ns "ns" whose template has
// `entries` (the JSON of spec.template.spec.resourceClaims' items) and the
// opt-in label when `opted_in`; `entries` "-" = no template at all.
std::string VmNamingClaims(const std::string& name, const std::string& uid,
                           const std::string& entries, bool opted_in = false) {
  const std::string meta = absl::StrCat(R"("metadata":{"name":")", name,
                                        R"(","namespace":"ns","uid":")", uid,
                                        R"(","resourceVersion":"1"})");
  if (entries == "-") return absl::StrCat("{", meta, R"(,"spec":{"running":true}})");
  return absl::StrCat(
      "{", meta, R"(,"spec":{"template":{"metadata":{"labels":{)",
      opted_in ? R"("pdc.kubevirt.io/persistent-claims":"true")" : "",
      R"(}},"spec":{"resourceClaims":[)", entries, "]}}}}");
}

rapidjson::Document ParseVmNamingJson(const std::string& text) {
  rapidjson::Document d;
  EXPECT_TRUE(api::json::Parse(text, &d).ok()) << text;
  return d;
}

TEST(VmClaimNamesTest, ReadsNamedClaimsAndTheVmScopedOnesOfAnOptedInVm) {
  const std::string entries =
      R"({"name":"a","resourceClaimName":"disk-a"},{"name":"b","resourceClaimTemplateName":"t"})";
  ASSERT_OK_AND_ASSIGN(VmClaimSpec plain,
                       ReadVmClaimSpec(ParseVmNamingJson(VmNamingClaims("vm1", "u1", entries))));
  EXPECT_THAT(*plain.claims, ElementsAre("disk-a"));
  ASSERT_OK_AND_ASSIGN(VmClaimSpec opted, ReadVmClaimSpec(ParseVmNamingJson(
                                              VmNamingClaims("vm1", "u1", entries, true))));
  EXPECT_THAT(*opted.claims, ElementsAre("disk-a", "vm1-b"));
  ASSERT_OK_AND_ASSIGN(VmClaimSpec none,
                       ReadVmClaimSpec(ParseVmNamingJson(VmNamingClaims("vm1", "u1", "-"))));
  EXPECT_FALSE(none.claims.has_value());
  absl::StatusOr<VmClaimSpec> bad =
      ReadVmClaimSpec(ParseVmNamingJson(VmNamingClaims("vm1", "u1", R"({"resourceClaimName":"x"})")));
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("VirtualMachine.spec.template.spec.resourceClaims[0].name"));
}

TEST(VmClaimNamesTest, AnswersAndReportsWhatChanged) {
  std::vector<std::string> told;
  VmClaimNames names([&](const std::string& ns, const std::set<std::string>& claims) {
    for (const std::string& c : claims) told.push_back(absl::StrCat(ns, "/", c));
  });
  rapidjson::Document a = ParseVmNamingJson(
      VmNamingClaims("vm1", "u1", R"({"name":"a","resourceClaimName":"disk"})"));
  rapidjson::Document b = ParseVmNamingJson(
      VmNamingClaims("vm2", "u2", R"({"name":"a","resourceClaimName":"disk"})"));
  rapidjson::Document bare = ParseVmNamingJson(VmNamingClaims("vm3", "u3", "-"));
  names.Replace({&a, &b, &bare});
  EXPECT_THAT(told, ElementsAre("ns/disk", "ns/disk"));
  EXPECT_EQ(names.Names("ns", "u1", "disk"), true);
  EXPECT_EQ(names.Names("ns", "u1", "other"), false);
  EXPECT_EQ(names.Names("other-ns", "u1", "disk"), std::nullopt);
  EXPECT_EQ(names.Names("ns", "u3", "disk"), std::nullopt) << "no template: not known";
  EXPECT_THAT(names.NamingVms("ns", "disk"), ElementsAre(Pair("vm1", "u1"), Pair("vm2", "u2")));

  // vm1 now names another claim: both are reported, the index follows.
  told.clear();
  names.Upsert(ParseVmNamingJson(
      VmNamingClaims("vm1", "u1", R"({"name":"a","resourceClaimName":"disk2"})")));
  EXPECT_THAT(told, ElementsAre("ns/disk", "ns/disk2"));
  EXPECT_THAT(names.NamingVms("ns", "disk"), ElementsAre(Pair("vm2", "u2")));
  // vm2 made again under its name (another UID, the delete unseen).
  told.clear();
  names.Upsert(ParseVmNamingJson(VmNamingClaims("vm2", "u2b", "")));
  EXPECT_THAT(told, ElementsAre("ns/disk"));
  EXPECT_EQ(names.Names("ns", "u2", "disk"), std::nullopt);
  EXPECT_TRUE(names.NamingVms("ns", "disk").empty());
  told.clear();
  names.Remove(a);
  EXPECT_THAT(told, ElementsAre("ns/disk2"));
  EXPECT_EQ(names.Names("ns", "u1", "disk2"), std::nullopt);
}

}  // namespace
}  // namespace pdc::extender
