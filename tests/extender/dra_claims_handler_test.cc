// GET /v1/dra/claims (extender/dra_claims_handler.h) through the Router:
// the keeper off, and a keeper whose watch holds kept, unkept, foreign and
// unallocated claims, matched to the inventory of two nodes by the device
// names pdc-node's slices give (model/dra_device_name.h).
#include "extender/dra_claims_handler.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/dra_claims_json.h"
#include "common/strings.h"
#include "extender/dra/claim_keeper.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/dra_device_name.h"
#include "tests/extender/extender_fixture.h"

namespace pdc::extender {
namespace {

using ::testing::HasSubstr;

// Answers the keeper's questions from maps; only VmsNamingClaim matters
// to the listing.
class DraListingConsumers final : public dra::ConsumerDirectory {
 public:
  bool Synced() const override { return true; }
  dra::PodLook LookAtPod(std::string_view, std::string_view, std::string_view) override {
    return {};
  }
  std::set<std::string> LiveVms(const std::vector<std::string>&) const override { return {}; }
  std::vector<dra::VmIdentity> VmsNamingClaim(std::string_view ns,
                                              std::string_view claim) const override {
    auto it = naming.find(absl::StrCat(Sv(ns), "/", Sv(claim)));
    return it == naming.end() ? std::vector<dra::VmIdentity>{} : it->second;
  }
  std::map<std::string, std::vector<dra::VmIdentity>> naming;
};

// A claim of namespace ns; `allocation` the status.allocation results (""
// not allocated), `reserved` the reservedFor entries.
std::string DraListingClaim(std::string_view name, std::string_view results,
                            std::string_view reserved) {
  std::string status = results.empty()
                           ? std::string()
                           : absl::StrCat(R"("allocation":{"devices":{"results":[)", Sv(results),
                                          "]}},");
  return absl::StrCat(R"({"metadata":{"namespace":"ns","name":")", Sv(name), R"(","uid":"u-)",
                      Sv(name), R"(","resourceVersion":"1"},"status":{)", status,
                      R"("reservedFor":[)", Sv(reserved), "]}}");
}

std::string DraListingResult(std::string_view driver, std::string_view pool, std::string_view device) {
  return absl::StrCat(R"({"request":"nvme","driver":")", Sv(driver), R"(","pool":")", Sv(pool),
                      R"(","device":")", Sv(device), R"("})");
}

constexpr std::string_view kPodEntry = R"({"resource":"pods","name":"p","uid":"u-p"})";
constexpr std::string_view kVmEntry =
    R"({"apiGroup":"kubevirt.io","resource":"virtualmachines","name":"vm1","uid":"u-vm1"})";
constexpr std::string_view kPdcDriver = "nvme.pdc.kubevirt.io";

class DraClaimsHandlerTest : public testing::ExtenderFixture {
 protected:
  api::DraClaimList Get() {
    HttpResponse r = Call("GET", "/v1/dra/claims");
    EXPECT_EQ(r.status, 200) << r.body;
    absl::StatusOr<api::DraClaimList> list = api::ParseDraClaimList(r.body);
    EXPECT_TRUE(list.ok()) << list.status() << " in " << r.body;
    return list.ok() ? *list : api::DraClaimList{};
  }
  void MakeKeeper() {
    kube::KubeClientConfig c;
    c.server = "http://127.0.0.1:1";  // Never called: the keeper is not started.
    auto api = kube::KubeApi::Connect(c);
    ASSERT_OK(api.status());
    api_ = *std::move(api);
    keeper_ = std::make_unique<dra::ClaimKeeper>(api_.get(), &consumers_,
                                                 dra::ClaimKeeper::Options{});
    ctx_.dra_keeper = keeper_.get();
    ctx_.dra_drivers = {std::string(kPdcDriver)};
  }
  void Watch(const std::string& json) {
    rapidjson::Document d;
    d.Parse(json.c_str());
    ASSERT_FALSE(d.HasParseError()) << json;
    keeper_->claim_sink()->Upsert(d);
  }

  DraListingConsumers consumers_;
  std::unique_ptr<kube::KubeApi> api_;
  std::unique_ptr<dra::ClaimKeeper> keeper_;
};

TEST_F(DraClaimsHandlerTest, TheKeeperOffIsSaidNotHidden) {
  const api::DraClaimList list = Get();
  EXPECT_FALSE(list.keeper);
  EXPECT_TRUE(list.items.empty());
  EXPECT_THAT(list.note, HasSubstr("extender.dra.keeper.enabled is false"));
}

TEST_F(DraClaimsHandlerTest, ClaimsAreMatchedToTheInventoryAndTheirVm) {
  TwoNodes();
  MakeKeeper();
  const std::string sna0 = model::DraDeviceNameFromSerial("SNA0");
  const std::string snb1 = model::DraDeviceNameFromSerial("SNB1");
  // Kept: the VM entry is in reservedFor.
  Watch(DraListingClaim("kept", DraListingResult(kPdcDriver, "node-a", sna0),
                        absl::StrCat(Sv(kPodEntry), ",", Sv(kVmEntry))));
  // Not yet kept: only a pod entry, but VM vm2 names it.
  consumers_.naming["ns/unkept"] = {{"vm2", "u-vm2"}};
  Watch(DraListingClaim("unkept", DraListingResult(kPdcDriver, "node-b", snb1), kPodEntry));
  // A pdc device for no VM: listed, no VM.
  Watch(DraListingClaim("plain", DraListingResult("other.example.com", "node-a", sna0), ""));
  // pdc's driver, a device pdc does not know (yet): listed, no serial.
  Watch(DraListingClaim("unknown", DraListingResult(kPdcDriver, "node-c", "x-00000000"), ""));
  // Another driver's device on a pdc node, no VM: not pdc's business.
  Watch(DraListingClaim("foreign", DraListingResult("gpu.example.com", "node-a", "gpu-0"), kPodEntry));
  // Not allocated yet, named by a VM.
  consumers_.naming["ns/pending"] = {{"vm3", "u-vm3"}};
  Watch(DraListingClaim("pending", "", ""));

  const api::DraClaimList list = Get();
  EXPECT_TRUE(list.keeper);
  EXPECT_FALSE(list.synced);
  EXPECT_THAT(list.note, HasSubstr("have not listed yet"));
  const PciAddress a0 = *PciAddress::Parse("0000:3b:00.0");
  const PciAddress a1 = *PciAddress::Parse("0000:5e:00.0");
  const std::vector<api::DraClaimView> want = {
      {"ns", "kept", "u-kept", true,
       {{"nvme", std::string(kPdcDriver), "node-a", sna0, "SNA0", a0}},
       api::DraConsumerRef{"vm1", "u-vm1"}, true, {{"p", "u-p"}}},
      {"ns", "pending", "u-pending", false, {}, api::DraConsumerRef{"vm3", "u-vm3"}, false, {}},
      {"ns", "plain", "u-plain", true,
       {{"nvme", "other.example.com", "node-a", sna0, "SNA0", a0}}, std::nullopt, false, {}},
      {"ns", "unkept", "u-unkept", true,
       {{"nvme", std::string(kPdcDriver), "node-b", snb1, "SNB1", a1}},
       api::DraConsumerRef{"vm2", "u-vm2"}, false, {{"p", "u-p"}}},
      {"ns", "unknown", "u-unknown", true,
       {{"nvme", std::string(kPdcDriver), "node-c", "x-00000000", "", std::nullopt}},
       std::nullopt, false, {}},
  };
  ASSERT_EQ(list.items.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(list.items[i], want[i]) << api::WriteDraClaimList(list);
  }
}

TEST_F(DraClaimsHandlerTest, ASyncedKeeperHasNoNote) {
  TwoNodes();
  std::vector<dra::ClaimKeeper::ClaimView> claims(1);
  claims[0].ns = "ns";
  claims[0].name = "c";
  claims[0].claim.allocated = true;
  claims[0].claim.devices = {{"r", "d", "node-b", model::DraDeviceNameFromSerial("SNB0")}};
  const api::DraClaimList list =
      ViewDraClaims(claims, true, allocator_->ListNodes(), {});
  EXPECT_TRUE(list.synced);
  EXPECT_EQ(list.note, "");
  ASSERT_EQ(list.items.size(), 1u);
  EXPECT_EQ(list.items[0].devices.at(0).serial, "SNB0");
  // The same name on another node is another device.
  claims[0].claim.devices[0].pool = "node-a";
  EXPECT_TRUE(ViewDraClaims(claims, true, allocator_->ListNodes(), {}).items.empty());
}

TEST(DraClaimResultsTest, TheAllocatedDevicesAreReadAndBadOnesNamed) {
  struct Case {
    std::string status;
    std::vector<dra::AllocatedDevice> want;
    std::string error;  // "" OK.
  };
  const std::vector<Case> cases = {
      {R"({"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"p","device":"x"},)"
       R"({"request":"r2","driver":"d","pool":"q","device":"y","adminAccess":false}]}}})",
       {{"r", "d", "p", "x"}, {"r2", "d", "q", "y"}}, ""},
      {R"({"allocation":{}})", {}, ""},
      {R"({"allocation":{"devices":{}}})", {}, ""},
      {R"({})", {}, ""},
      {R"({"allocation":[]})", {}, "ResourceClaim.status.allocation"},
      {R"({"allocation":{"devices":{"results":{}}}})", {},
       "ResourceClaim.status.allocation.devices.results"},
      {R"({"allocation":{"devices":{"results":[{"request":"r","driver":"d","pool":"p"}]}}})", {},
       "ResourceClaim.status.allocation.devices.results[0].device"},
      {R"({"allocation":{"devices":{"results":[7]}}})", {},
       "ResourceClaim.status.allocation.devices.results[0]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.status);
    rapidjson::Document d;
    d.Parse(absl::StrCat(R"({"status":)", c.status, "}").c_str());
    absl::StatusOr<dra::DraClaim> got = dra::ReadDraClaim(d);
    if (!c.error.empty()) {
      ASSERT_FALSE(got.ok());
      EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.error));
      continue;
    }
    ASSERT_OK(got.status());
    EXPECT_EQ(got->devices, c.want);
  }
}

}  // namespace
}  // namespace pdc::extender
