// The PersistentDeviceClaim object's status as pdc writes and reads it:
// conditions (metav1.Condition) and the devices' IOMMU group and NUMA node.
#include "api/claim_object.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"

namespace pdc::api {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);  // 2027-01-15T08:00:00Z
const absl::Time kT1 = kT0 + absl::Minutes(5);

ClaimStatus BoundStatus() {
  ClaimStatus s;
  s.phase = ClaimPhase::kBound;
  s.node = "node-a";
  s.devices = {{*PciAddress::Parse("0000:3b:00.0"), "SN-1"}};
  return s;
}

Reservation Vm1(std::string pod_uid = "pod-uid-1") {
  return Reservation{"vm1", "virt-launcher-vm1-abcde", std::move(pod_uid), "vm-uid-1"};
}

struct ConditionCase {
  std::string name;
  ClaimStatus status;
  std::string conflict;
  // type/status/reason of each condition, in order.
  std::vector<std::string> want;
};

class ConditionsOfTest : public ::testing::TestWithParam<ConditionCase> {};

TEST_P(ConditionsOfTest, SayWhatTheStatusMeans) {
  const std::vector<ClaimCondition> got =
      ConditionsOf(GetParam().status, GetParam().conflict, 3, {}, kT0);
  std::vector<std::string> brief;
  for (const ClaimCondition& c : got) {
    brief.push_back(absl::StrCat(c.type, "=", c.status ? "True" : "False", "/", c.reason));
    EXPECT_EQ(c.observed_generation, 3);
    EXPECT_EQ(c.last_transition, kT0);
    EXPECT_FALSE(c.message.empty()) << c.type;
  }
  EXPECT_EQ(brief, GetParam().want);
}

ClaimStatus With(ClaimStatus s, auto&& change) {
  change(s);
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConditionsOfTest,
    ::testing::Values(
        ConditionCase{"Pending", ClaimStatus{}, "",
                      {"Bound=False/WaitingForFirstConsumer", "Reserved=False/NotInUse"}},
        ConditionCase{"Bound", BoundStatus(), "",
                      {"Bound=True/DeviceBound", "Reserved=False/NotInUse"}},
        ConditionCase{"Lost",
                      With(BoundStatus(),
                           [](ClaimStatus& s) {
                             s.phase = ClaimPhase::kLost;
                             s.lost_reason = "device 0000:3b:00.0 is gone from node-a";
                           }),
                      "",
                      {"Bound=False/DeviceLost", "Reserved=False/NotInUse"}},
        ConditionCase{"WaitingForItsDevices",
                      With(BoundStatus(), [](ClaimStatus& s) { s.reserved_for = Vm1(); }), "",
                      {"Bound=True/DeviceBound", "Reserved=True/HandOffPending"}},
        ConditionCase{"InUse",
                      With(BoundStatus(),
                           [](ClaimStatus& s) {
                             s.reserved_for = Vm1();
                             s.handed_off_to = "pod-uid-1";
                           }),
                      "",
                      {"Bound=True/DeviceBound", "Reserved=True/HandedOff"}},
        // A new pod of the VM: the earlier pod had the devices, this one not yet.
        ConditionCase{"RestartedPodWaits",
                      With(BoundStatus(),
                           [](ClaimStatus& s) {
                             s.reserved_for = Vm1("pod-uid-2");
                             s.handed_off_to = "pod-uid-1";
                           }),
                      "",
                      {"Bound=True/DeviceBound", "Reserved=True/HandOffPending"}},
        ConditionCase{"Conflict", BoundStatus(), "device 0000:3b:00.0 is also in claim b",
                      {"Bound=True/DeviceBound", "Reserved=False/NotInUse",
                       "DeviceConflict=True/DeviceInAnotherClaim"}}),
    [](const auto& info) { return info.param.name; });

TEST(ConditionsOfTest, KeepTheTransitionTimeOfAConditionThatDidNotChange) {
  const std::vector<ClaimCondition> pending = ConditionsOf(ClaimStatus{}, "", 1, {}, kT0);
  ClaimStatus reserved = BoundStatus();
  reserved.reserved_for = Vm1();
  const std::vector<ClaimCondition> bound = ConditionsOf(reserved, "", 1, pending, kT1);
  ASSERT_THAT(bound, SizeIs(2));
  EXPECT_EQ(bound[0].last_transition, kT1) << "Bound went False -> True";
  EXPECT_EQ(bound[1].last_transition, kT1) << "Reserved went False -> True";
  ClaimStatus handed = reserved;
  handed.handed_off_to = "pod-uid-1";
  const std::vector<ClaimCondition> later =
      ConditionsOf(handed, "", 1, bound, kT1 + absl::Hours(1));
  EXPECT_EQ(later[0].last_transition, kT1);  // Still True.
  EXPECT_EQ(later[1].last_transition, kT1);  // Still True (another reason).
  EXPECT_EQ(later[1].reason, "HandedOff");
}

TEST(ConditionsOfTest, NameAtMostEightDevices) {
  ClaimStatus s = BoundStatus();
  s.devices.clear();
  for (int i = 0; i < 20; ++i) {
    s.devices.push_back({*PciAddress::Parse(absl::StrCat("0000:", 10 + i, ":00.0")), "SN"});
  }
  const std::vector<ClaimCondition> cs = ConditionsOf(s, "", 1, {}, kT0);
  EXPECT_THAT(cs[0].message, HasSubstr("bound to 20 device(s) on node node-a"));
  EXPECT_THAT(cs[0].message, HasSubstr("and 12 more"));
}

// A deleted claim waiting for its devices' erase: Bound stays as it was,
// Reserved turns False, Reclaiming True names the node and devices; the
// patch writes the conditions alone, and reads back as reclaiming.
TEST(ReclaimingConditionsTest, KeepBoundAndSayWhatIsErased) {
  ClaimStatus st = BoundStatus();
  st.reserved_for = Vm1();
  const std::vector<ClaimCondition> before = ConditionsOf(st, "", 2, {}, kT0);
  const std::vector<ClaimCondition> after = ReclaimingConditions(
      "node-a", {*PciAddress::Parse("0000:3b:00.0")}, 2, before, kT1);
  ASSERT_THAT(after, SizeIs(3));
  EXPECT_EQ(after[0], before[0]);
  EXPECT_EQ(after[1].type, "Reserved");
  EXPECT_FALSE(after[1].status);
  EXPECT_EQ(after[1].last_transition, kT1);
  EXPECT_EQ(after[2].type, "Reclaiming");
  EXPECT_TRUE(after[2].status);
  EXPECT_EQ(after[2].reason, "DeviceErasing");
  EXPECT_THAT(after[2].message, HasSubstr("node node-a erases device(s) 0000:3b:00.0"));
  EXPECT_TRUE(IsReclaiming(after));
  EXPECT_FALSE(IsReclaiming(before));
  // Written again later: the same transition times.
  const std::vector<ClaimCondition> again = ReclaimingConditions(
      "node-a", {*PciAddress::Parse("0000:3b:00.0")}, 2, after, kT1 + absl::Hours(1));
  EXPECT_EQ(again, after);

  const std::string patch = WriteClaimConditionsPatch("uid-1", "42", after);
  EXPECT_EQ(patch.find(R"("phase")"), std::string::npos) << patch;
  const std::string object = absl::StrCat(
      R"({"metadata":{"name":"data","namespace":"default","uid":"uid-1","resourceVersion":"43",)",
      R"("deletionTimestamp":"2027-01-15T09:00:00Z","finalizers":["pdc.kubevirt.io/device-protection"]},)",
      R"("spec":{"resourceName":"devices.kubevirt.io/nvme"},"status":)",
      patch.substr(patch.find(R"("status":)") + 9, patch.size() - patch.find(R"("status":)") - 10),
      "}");
  rapidjson::Document d;
  ASSERT_TRUE(json::Parse(object, &d).ok()) << object;
  absl::StatusOr<ClaimObject> got = ReadClaimObject(d);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->conditions, after);
  EXPECT_TRUE(got->meta.deleting);
}

// The patch pdc writes, merged into an object as kube-apiserver would
// store it, reads back to the same status, facts and conditions.
TEST(ClaimStatusPatchTest, RoundTripsFactsAndConditions) {
  ClaimStatus st = BoundStatus();
  st.devices.push_back({*PciAddress::Parse("0000:5e:00.0"), "SN-2"});
  st.reserved_for = Vm1();
  const std::vector<DeviceFacts> facts = {{12, 0}, {-1, 1}};
  const std::vector<ClaimCondition> conditions = ConditionsOf(st, "", 4, {}, kT0);
  const std::string patch = WriteClaimStatusPatch("uid-1", "42", st, 4, facts, conditions);
  EXPECT_THAT(patch, HasSubstr(R"("lastTransitionTime":"2027-01-15T08:00:00Z")"));
  EXPECT_THAT(patch, HasSubstr(R"("iommuGroup":12,"numaNode":0)"));
  EXPECT_THAT(patch, HasSubstr(R"("serial":"SN-2","numaNode":1})"));

  rapidjson::Document p;
  ASSERT_TRUE(json::Parse(patch, &p).ok());
  const std::string object = absl::StrCat(
      R"({"apiVersion":"pdc.kubevirt.io/v1alpha1","kind":"PersistentDeviceClaim",)",
      R"("metadata":{"name":"data","namespace":"default","uid":"uid-1","resourceVersion":"43",)",
      R"("generation":4},"spec":{"resourceName":"devices.kubevirt.io/nvme","count":2},"status":)",
      patch.substr(patch.find(R"("status":)") + 9, patch.size() - patch.find(R"("status":)") - 10),
      "}");
  rapidjson::Document d;
  ASSERT_TRUE(json::Parse(object, &d).ok()) << object;
  absl::StatusOr<ClaimObject> got = ReadClaimObject(d);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->claim.status, st);
  EXPECT_EQ(got->device_facts, facts);
  EXPECT_EQ(got->conditions, conditions);
  EXPECT_EQ(got->observed_generation, 4);
}

// Facts and conditions are informational: a value pdc cannot use reads as
// unknown (or is left out) and never makes the claim, which may hold a
// device, unreadable.
TEST(ClaimObjectTest, ReadsUnusableFactsAndConditionsAsUnknown) {
  const std::string object =
      R"({"metadata":{"name":"data","namespace":"default","uid":"uid-1","resourceVersion":"9"},)"
      R"("spec":{"resourceName":"devices.kubevirt.io/nvme"},)"
      R"("status":{"phase":"Bound","node":"node-a","devices":[)"
      R"({"address":"0000:3b:00.0","serial":"SN-1","iommuGroup":-7,"numaNode":99999},)"
      R"({"address":"0000:5e:00.0","iommuGroup":"12","numaNode":2}],)"
      R"("conditions":[7,{"type":"Bound"},)"
      R"({"type":"Bound","status":"Maybe","lastTransitionTime":"2027-01-15T08:00:00Z"},)"
      R"({"type":"Bound","status":"True","lastTransitionTime":"yesterday"},)"
      R"({"type":"Reserved","status":"False","lastTransitionTime":"2027-01-15T08:00:00Z",)"
      R"("reason":"NotInUse","message":"no VM pod uses the claim"}]}})";
  rapidjson::Document d;
  ASSERT_TRUE(json::Parse(object, &d).ok());
  absl::StatusOr<ClaimObject> got = ReadClaimObject(d);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->device_facts, (std::vector<DeviceFacts>{{-1, -1}, {-1, 2}}));
  ASSERT_THAT(got->conditions, SizeIs(1));
  EXPECT_EQ(got->conditions[0].type, "Reserved");
  EXPECT_EQ(got->conditions[0].last_transition, kT0);
}

// An object edited past the CRD's rules: its status still reads (so pdc
// can hold its devices), its spec is left out and the problem named; one
// whose status does not read is refused as before.
TEST(ClaimObjectTest, ReadsTheStatusOfAnObjectWhoseSpecDoesNotRead) {
  const std::string object =
      R"({"metadata":{"name":"data","namespace":"default","uid":"uid-1","resourceVersion":"9"},)"
      R"("spec":{"resourceName":"devices.kubevirt.io/nvme","node":"Not A Node!",)"
      R"("reclaimPolicy":"Delete"},)"
      R"("status":{"phase":"Bound","node":"node-a","devices":[)"
      R"({"address":"0000:3b:00.0","serial":"SN-1"}]}})";
  rapidjson::Document d;
  ASSERT_TRUE(json::Parse(object, &d).ok());
  EXPECT_FALSE(ReadClaimObject(d).ok());
  absl::StatusOr<ClaimObject> got = ReadClaimObjectStatusOnly(d);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->spec_problem, HasSubstr("node"));
  EXPECT_EQ(got->claim.key, (ClaimKey{"default", "data"}));
  EXPECT_EQ(got->claim.uid, "uid-1");
  EXPECT_EQ(got->claim.status.node, "node-a");
  ASSERT_THAT(got->claim.status.devices, SizeIs(1));
  EXPECT_EQ(got->claim.spec.reclaim_policy, ReclaimPolicy::kRetain);  // Unknown: keep data.
  EXPECT_EQ(got->claim.spec.resource_name, "");

  const std::string bad_status =
      R"({"metadata":{"name":"data","namespace":"default","uid":"uid-1","resourceVersion":"9"},)"
      R"("spec":{"resourceName":"devices.kubevirt.io/nvme","node":"Not A Node!"},)"
      R"("status":{"phase":"Bound","node":"node-a","devices":[{"address":"zz"}]}})";
  ASSERT_TRUE(json::Parse(bad_status, &d).ok());
  EXPECT_FALSE(ReadClaimObjectStatusOnly(d).ok());
}

// A Released mark keeps its claim's UID in the holds ConfigMap; a mark for
// no claim (an abandoned erase) is written with an empty claim.
TEST(NodeHoldsTest, RoundTripsTheClaimUidAndAMarkForNoClaim) {
  const std::vector<ReleasedDevice> released = {
      {*PciAddress::Parse("0000:3b:00.0"), "SN-1", {"default", "old"}, "uid-old"},
      {*PciAddress::Parse("0000:5e:00.0"), "SN-2", ClaimKey{}, ""}};
  const std::string text = WriteNodeHolds("pdc-holds-x", "pdc-system", "", "", "node-a",
                                          {}, released);
  rapidjson::Document d;
  ASSERT_TRUE(json::Parse(text, &d).ok());
  // What kube-apiserver would add.
  d["metadata"].AddMember("uid", "cm-uid", d.GetAllocator());
  d["metadata"].AddMember("resourceVersion", "3", d.GetAllocator());
  absl::StatusOr<NodeHoldsObject> got = ReadNodeHolds(d);
  ASSERT_TRUE(got.ok()) << got.status() << " " << text;
  EXPECT_EQ(got->released, released);
}

}  // namespace
}  // namespace pdc::api
