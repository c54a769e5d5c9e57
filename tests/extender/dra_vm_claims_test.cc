// The pure rules of VM-scoped DRA claims (extender/dra/vm_claims.h): which
// existing claim is a VM's, what a claim made from a template holds, and
// the reading of a pod's resourceClaims.
#include "extender/dra/vm_claims.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc::extender::dra {
namespace {

using ::testing::HasSubstr;

constexpr char kVmClaimsVmUid[] = "9b41c3de-0000-4000-8000-000000000001";

rapidjson::Document ParseVmClaimsJson(const std::string& text) {
  rapidjson::Document d;
  EXPECT_TRUE(api::json::Parse(text, &d).ok()) << text;
  return d;
}

std::string ClaimWithMeta(const std::string& extra_meta) {
  return absl::StrCat(R"({"metadata":{"name":"vm1-data","namespace":"ns","uid":"c-1",)",
                      R"("resourceVersion":"7")", extra_meta, R"(},"spec":{}})");
}

std::string VmOwner(const std::string& uid, bool controller = true) {
  return absl::StrCat(
      R"(,"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"vm1","uid":")",
      uid, R"(","controller":)", controller ? "true" : "false", "}]");
}

TEST(DraVmClaimsTest, OnlyTheVmsOwnLiveClaimIsAccepted) {
  struct Case {
    std::string name;
    std::string meta;
    std::string want;  // "" = accepted; else a part of the refusal.
  } cases[] = {
      {"its own", VmOwner(kVmClaimsVmUid), ""},
      {"the old VM's of the same name", VmOwner("old-uid"),
       "belongs to VirtualMachine vm1 (uid old-uid), not to VirtualMachine vm1 (uid"},
      {"no owner (the user's)", "", "exists and is not owned by a VirtualMachine"},
      {"owned but not controlled", VmOwner(kVmClaimsVmUid, /*controller=*/false),
       "is not owned by a VirtualMachine"},
      {"a pod's",
       R"(,"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"p-1","controller":true}])",
       "(its controller is Pod p)"},
      {"its own, being deleted",
       absl::StrCat(VmOwner(kVmClaimsVmUid), R"(,"deletionTimestamp":"2026-01-01T00:00:00Z")"),
       "is being deleted"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    rapidjson::Document d = ParseVmClaimsJson(ClaimWithMeta(c.meta));
    absl::Status s = JudgeVmClaim(d, "ns", "vm1-data", "vm1", kVmClaimsVmUid);
    if (c.want.empty()) {
      EXPECT_OK(s);
    } else {
      EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("ResourceClaim ns/vm1-data"));
      EXPECT_THAT(std::string(s.message()), HasSubstr(c.want));
    }
  }
}

TEST(DraVmClaimsTest, AClaimFromATemplateIsTheVmsWithTheEntrysName) {
  rapidjson::Document t = ParseVmClaimsJson(
      R"({"metadata":{"name":"tmpl","labels":{"not":"copied"}},"spec":{"metadata":{"labels":{"team":"db"},)"
      R"("annotations":{"resource.kubernetes.io/pod-claim-name":"spoofed","a":"b"}},)"
      R"("spec":{"devices":{"requests":[{"name":"disk"}]}}}})");
  ASSERT_OK_AND_ASSIGN(std::string json, VmClaimJson(t, "ns", "vm1-data", "data", "vm1", kVmClaimsVmUid));
  EXPECT_EQ(json, absl::StrCat(
                      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{)",
                      R"("name":"vm1-data","namespace":"ns","labels":{"team":"db"},)",
                      R"("annotations":{"a":"b","resource.kubernetes.io/pod-claim-name":"data"},)",
                      R"("ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",)",
                      R"("name":"vm1","uid":")", kVmClaimsVmUid, R"(","controller":true}]},)",
                      R"("spec":{"devices":{"requests":[{"name":"disk"}]}}})"));
  // What it makes is a claim JudgeVmClaim accepts for that VM.
  rapidjson::Document made = ParseVmClaimsJson(json);
  made["metadata"].AddMember("uid", "c-1", made.GetAllocator());
  made["metadata"].AddMember("resourceVersion", "1", made.GetAllocator());
  EXPECT_OK(JudgeVmClaim(made, "ns", "vm1-data", "vm1", kVmClaimsVmUid));

  rapidjson::Document no_spec = ParseVmClaimsJson(R"({"metadata":{"name":"t"},"spec":{}})");
  absl::StatusOr<std::string> bad = VmClaimJson(no_spec, "ns", "x", "data", "vm1", kVmClaimsVmUid);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("ResourceClaimTemplate.spec.spec"));
}

TEST(DraVmClaimsTest, ReadsThePodsEntriesAndTheOptIn) {
  rapidjson::Document pod = ParseVmClaimsJson(
      R"({"metadata":{"labels":{"pdc.kubevirt.io/persistent-claims":"true"}},"spec":{"resourceClaims":[)"
      R"({"name":"a","resourceClaimName":"x"},{"name":"b","resourceClaimTemplateName":"t"}]}})");
  EXPECT_TRUE(OptedIn(pod));
  ASSERT_OK_AND_ASSIGN(std::vector<PodClaimEntry> e, ReadPodClaimEntries(pod));
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].claim_name, "x");
  EXPECT_EQ(e[1].index, 1u);
  EXPECT_EQ(e[1].template_name, "t");
  EXPECT_FALSE(OptedIn(ParseVmClaimsJson(
      R"({"metadata":{"labels":{"pdc.kubevirt.io/persistent-claims":"yes"}}})")));
  absl::StatusOr<std::vector<PodClaimEntry>> bad = ReadPodClaimEntries(
      ParseVmClaimsJson(R"({"spec":{"resourceClaims":[{"resourceClaimName":"x"}]}})"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("Pod.spec.resourceClaims[0].name"));
  EXPECT_OK(VmClaimName(std::string(63, 'v'), std::string(63, 'e')).status());
  EXPECT_TRUE(absl::IsInvalidArgument(
      VmClaimName(std::string(200, 'v'), std::string(60, 'e')).status()));
}

}  // namespace
}  // namespace pdc::extender::dra
