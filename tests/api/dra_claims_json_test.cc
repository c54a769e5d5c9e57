// The GET /v1/dra/claims codec (api/dra_claims_json.h): what the writer
// writes reads back the same, and bad answers are refused naming the field.
#include "api/dra_claims_json.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc::api {
namespace {

using ::testing::HasSubstr;

DraClaimView KeptDraClaim() {
  DraClaimView c;
  c.ns = "vms";
  c.name = "vm1-nvme";
  c.uid = "u-c";
  c.allocated = true;
  c.devices = {{"nvme", "nvme.pdc.kubevirt.io", "node-a", "sn1-0a1b2c3d", "SN1",
                *PciAddress::Parse("0000:3b:00.0")},
               {"nvme", "nvme.pdc.kubevirt.io", "node-a", "x-00000000", "", std::nullopt}};
  c.vm = DraConsumerRef{"vm1", "u-vm1"};
  c.persisted = true;
  c.pods = {{"virt-launcher-vm1-abcde", "u-p"}};
  return c;
}

TEST(DraClaimsJsonTest, RoundTrips) {
  DraClaimList off;
  off.note = "the keeper is off";
  DraClaimList kept;
  kept.keeper = true;
  kept.synced = true;
  kept.items = {KeptDraClaim(), DraClaimView{"vms", "pending", "u-2", false, {}, std::nullopt,
                                             false, {}}};
  for (const DraClaimList& list : {DraClaimList{}, off, kept}) {
    const std::string body = WriteDraClaimList(list);
    SCOPED_TRACE(body);
    absl::StatusOr<DraClaimList> back = ParseDraClaimList(body);
    ASSERT_OK(back.status());
    EXPECT_EQ(*back, list);
  }
}

TEST(DraClaimsJsonTest, WritesTheDocumentedShape) {
  DraClaimList list;
  list.keeper = true;
  list.synced = true;
  list.items = {KeptDraClaim()};
  list.items[0].devices.resize(1);
  EXPECT_EQ(WriteDraClaimList(list),
            R"({"keeper":true,"synced":true,"items":[{"namespace":"vms","name":"vm1-nvme",)"
            R"("uid":"u-c","allocated":true,"devices":[{"request":"nvme",)"
            R"("driver":"nvme.pdc.kubevirt.io","pool":"node-a","device":"sn1-0a1b2c3d",)"
            R"("serial":"SN1","address":"0000:3b:00.0"}],"vm":{"name":"vm1","uid":"u-vm1"},)"
            R"("persisted":true,"pods":[{"name":"virt-launcher-vm1-abcde","uid":"u-p"}]}]})");
}

TEST(DraClaimsJsonTest, BadAnswersNameTheField) {
  struct Case {
    std::string body;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"[]", "must be an object"},
      {R"({"keeper": "yes"})", "keeper"},
      {R"({"items": {}})", "items"},
      {R"({"items": [1]})", "items[0]"},
      {R"({"items": [{"name": 3}]})", "items[0].name"},
      {R"({"items": [{"devices": [{"address": "nope"}]}]})", "items[0].devices[0].address"},
      {R"({"items": [{"vm": "vm1"}]})", "items[0].vm"},
      {R"({"items": [{"pods": [{"uid": 1}]}]})", "items[0].pods[0].uid"},
      {R"({"items": [{"persisted": 1}]})", "items[0].persisted"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    absl::StatusOr<DraClaimList> got = ParseDraClaimList(c.body);
    ASSERT_FALSE(got.ok());
    EXPECT_THAT(absl::StrCat(got.status().message(), " field=", json::FieldOf(got.status())),
                HasSubstr(c.field));
  }
}

}  // namespace
}  // namespace pdc::api
