// PlanReservedFor (extender/dra/keeper_plan.h) and the ResourceClaim
// reading it works on: what the DRA claim keeper writes, by case.
#include "extender/dra/keeper_plan.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc::extender::dra {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

Consumer Pod(std::string name, std::string uid) { return {"", "pods", name, uid}; }
Consumer Vm(std::string name, std::string uid) { return VmConsumer(name, uid); }
Consumer Other() { return {"example.com", "widgets", "w", "uid-w"}; }

PodLook Alive(std::string vm, std::string vm_uid) {
  return {PodLook::State::kAlive, VmIdentity{vm, vm_uid}, ""};
}
PodLook AliveNoVm() { return {PodLook::State::kAlive, std::nullopt, ""}; }
PodLook Gone() { return {PodLook::State::kGone, std::nullopt, ""}; }
PodLook Unknown() { return {PodLook::State::kUnknown, std::nullopt, ""}; }

struct PlanCase {
  std::string name;
  bool allocated = true;
  bool deleting = false;
  bool pod_owned = false;
  std::vector<Consumer> before;
  std::map<std::string, PodLook> pods;
  std::set<std::string> live_vms;
  std::vector<Consumer> after;
  int added = 0;
  int removed = 0;
  std::string refused;  // Substring of the one refusal, "" none.
  std::map<std::string, bool> names;  // PlanInputs::vm_names_claim.
  std::vector<VmIdentity> naming;     // PlanInputs::naming_vms.
};

class PlanTest : public ::testing::TestWithParam<PlanCase> {};

TEST_P(PlanTest, Plans) {
  const PlanCase& c = GetParam();
  PlanInputs in{c.pods, c.live_vms, c.deleting, c.names, c.naming};
  const Plan p = PlanReservedFor(DraClaim{c.allocated, c.before, c.pod_owned}, in);
  EXPECT_THAT(p.reserved_for, ElementsAreArray(c.after));
  EXPECT_EQ(static_cast<int>(p.added.size()), c.added);
  EXPECT_EQ(static_cast<int>(p.removed.size()), c.removed);
  if (c.refused.empty()) {
    EXPECT_TRUE(p.refused.empty()) << p.refused[0];
  } else {
    ASSERT_EQ(p.refused.size(), 1u);
    EXPECT_THAT(p.refused[0], HasSubstr(c.refused));
  }
}

std::vector<PlanCase> Cases() {
  return {
      // What the VMs' specs name (VmClaimNames).
      {.name = "AVmThatNamesTheClaimNoMoreLosesItsEntry",
       .before = {Vm("vm", "u-vm")},
       .live_vms = {"u-vm"},
       .after = {},
       .removed = 1,
       .names = {{"u-vm", false}}},
      {.name = "APodsVmThatNamesTheClaimNoMoreIsNotAdded",
       .before = {Pod("p", "u-p")},
       .pods = {{"u-p", Alive("vm", "u-vm")}},
       .live_vms = {"u-vm"},
       .after = {Pod("p", "u-p")},
       .names = {{"u-vm", false}}},
      {.name = "AStoppedVmNamingTheClaimKeepsItWhenOnlyGonePodsHoldIt",
       .before = {Pod("p", "u-p")},
       .pods = {{"u-p", Gone()}},
       .live_vms = {"u-vm"},
       .after = {Vm("vm", "u-vm")},
       .added = 1,
       .removed = 1,
       .names = {{"u-vm", true}},
       .naming = {{"vm", "u-vm"}}},
      {.name = "AStoppedVmNamingAnEmptyAllocatedClaimKeepsIt",
       .live_vms = {"u-vm"},
       .after = {Vm("vm", "u-vm")},
       .added = 1,
       .names = {{"u-vm", true}},
       .naming = {{"vm", "u-vm"}}},
      {.name = "NamingDoesNotTakeAClaimAnotherPodUses",
       .before = {Pod("p", "u-p")},
       .pods = {{"u-p", AliveNoVm()}},
       .live_vms = {"u-vm"},
       .after = {Pod("p", "u-p")},
       .names = {{"u-vm", true}},
       .naming = {{"vm", "u-vm"}}},
      {.name = "NamingDoesNotTakeAnUnallocatedClaim",
       .allocated = false,
       .live_vms = {"u-vm"},
       .after = {},
       .names = {{"u-vm", true}},
       .naming = {{"vm", "u-vm"}}},
      {.name = "NamingDoesNotTakeAClaimBeingDeleted",
       .deleting = true,
       .live_vms = {"u-vm"},
       .after = {},
       .names = {{"u-vm", true}},
       .naming = {{"vm", "u-vm"}}},
      {.name = "NamingDoesNotTakeAPodOwnedClaim",
       .pod_owned = true,
       .live_vms = {"u-vm"},
       .after = {},
       .names = {{"u-vm", true}},
       .naming = {{"vm", "u-vm"}}},
      {.name = "TwoVmsNamingTheClaimAreRefused",
       .live_vms = {"u-a", "u-b"},
       .after = {},
       .refused = "VirtualMachines a (uid u-a), b (uid u-b): each names the claim",
       .names = {{"u-a", true}, {"u-b", true}},
       .naming = {{"a", "u-a"}, {"b", "u-b"}}},
      {.name = "AGoneVmNamingTheClaimIsNotAdded",
       .after = {},
       .naming = {{"vm", "u-vm"}}},
      {.name = "AddsTheVmOfALivingPod",
       .before = {Pod("p", "u-p")},
       .pods = {{"u-p", Alive("vm", "u-vm")}},
       .live_vms = {"u-vm"},
       .after = {Pod("p", "u-p"), Vm("vm", "u-vm")},
       .added = 1},
      {.name = "NothingUntilAllocated",
       .allocated = false,
       .before = {Pod("p", "u-p")},
       .pods = {{"u-p", Alive("vm", "u-vm")}},
       .live_vms = {"u-vm"},
       .after = {Pod("p", "u-p")}},
      {.name = "AlreadyKeptIsUnchanged",
       .before = {Pod("p", "u-p"), Vm("vm", "u-vm")},
       .pods = {{"u-p", Alive("vm", "u-vm")}},
       .live_vms = {"u-vm"},
       .after = {Pod("p", "u-p"), Vm("vm", "u-vm")}},
      {.name = "PrunesGonePodsOfAKeptClaimKeepsUnknownAndOthers",
       .before = {Other(), Pod("a", "u-a"), Vm("vm", "u-vm"), Pod("b", "u-b")},
       .pods = {{"u-a", Gone()}, {"u-b", Unknown()}},
       .live_vms = {"u-vm"},
       .after = {Other(), Vm("vm", "u-vm"), Pod("b", "u-b")},
       .removed = 1},
      {.name = "RemovesTheEntryOfAGoneVmAndLeavesPodsToTheController",
       .before = {Pod("p", "u-p"), Vm("vm", "u-vm")},
       .pods = {{"u-p", Gone()}},
       .live_vms = {},
       .after = {Pod("p", "u-p")},
       .removed = 1},
      {.name = "ARecreatedVmGetsItsOwnEntryNotTheOld",
       .before = {Vm("vm", "u-old"), Pod("p", "u-p")},
       .pods = {{"u-p", Alive("vm", "u-new")}},
       .live_vms = {"u-new"},
       .after = {Pod("p", "u-p"), Vm("vm", "u-new")},
       .added = 1,
       .removed = 1},
      {.name = "NeverTwoVms",
       .before = {Vm("vm1", "u-1"), Pod("p", "u-p")},
       .pods = {{"u-p", Alive("vm2", "u-2")}},
       .live_vms = {"u-1", "u-2"},
       .after = {Vm("vm1", "u-1"), Pod("p", "u-p")},
       .refused = "never kept for two VMs"},
      {.name = "NoNewEntryOnADeletingClaim",
       .deleting = true,
       .before = {Pod("p", "u-p")},
       .pods = {{"u-p", Alive("vm", "u-vm")}},
       .live_vms = {"u-vm"},
       .after = {Pod("p", "u-p")},
       .refused = "being deleted"},
      {.name = "APodOfNoVmIsLeftAlone",
       .before = {Pod("p", "u-p"), Pod("q", "u-q")},
       .pods = {{"u-p", AliveNoVm()}, {"u-q", Gone()}},
       .after = {Pod("p", "u-p"), Pod("q", "u-q")}},
      {.name = "APodOwnedClaimIsNeverKept",
       .pod_owned = true,
       .before = {Pod("p", "u-p")},
       .pods = {{"u-p", Alive("vm", "u-vm")}},
       .live_vms = {"u-vm"},
       .after = {Pod("p", "u-p")}},
      {.name = "AVmEntryOnAPodOwnedClaimGoesAndPodsAreLeftToTheController",
       .pod_owned = true,
       .before = {Pod("p", "u-p"), Vm("vm", "u-vm"), Pod("q", "u-q")},
       .pods = {{"u-p", Alive("vm", "u-vm")}, {"u-q", Gone()}},
       .live_vms = {"u-vm"},
       .after = {Pod("p", "u-p"), Pod("q", "u-q")},
       .removed = 1},
      {.name = "AGoneVmIsNotRefusedOnAClaimKeptForAnother",
       .before = {Vm("vm1", "u-1"), Pod("p", "u-p")},
       .pods = {{"u-p", Alive("vm2", "u-2")}},
       .live_vms = {"u-1"},
       .after = {Vm("vm1", "u-1"), Pod("p", "u-p")}},
      // A running VM deleted: its pod still runs (or terminates); no refusal.
      {.name = "AVmThatIsGoneIsNeitherAddedNorRefused",
       .before = {Pod("p", "u-p")},
       .pods = {{"u-p", Alive("vm", "u-vm")}},
       .after = {Pod("p", "u-p")}},
  };
}

INSTANTIATE_TEST_SUITE_P(Rules, PlanTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(PlanLimitTest, NeverBeyond256Entries) {
  DraClaim claim{true, {}};
  PlanInputs in;
  for (size_t i = 0; i < kReservedForMaxSize; ++i) {
    const std::string uid = "u" + std::to_string(i);
    claim.reserved_for.push_back(Pod("p" + std::to_string(i), uid));
    in.pods[uid] = i == 0 ? Alive("vm", "u-vm") : AliveNoVm();
  }
  in.live_vms = {"u-vm"};
  Plan p = PlanReservedFor(claim, in);
  EXPECT_FALSE(p.changed());
  ASSERT_EQ(p.refused.size(), 1u);
  EXPECT_THAT(p.refused[0], HasSubstr("would hold more than 256 entries"));
  // A gone pod is pruned first, which makes room for the VM.
  in.pods["u1"] = Gone();
  p = PlanReservedFor(claim, in);
  EXPECT_TRUE(p.refused.empty()) << p.refused[0];
  EXPECT_EQ(p.reserved_for.size(), kReservedForMaxSize);
  EXPECT_EQ(p.reserved_for.back(), Vm("vm", "u-vm"));
  EXPECT_THAT(p.removed, ElementsAreArray({Pod("p1", "u1")}));
}

TEST(ReadDraClaimTest, ReadsAllocationAndConsumersAndNamesBadFields) {
  rapidjson::Document d;
  d.Parse(R"({"status":{"allocation":{},"reservedFor":[{"resource":"pods","name":"p","uid":"u"},{"apiGroup":"kubevirt.io","resource":"virtualmachines","name":"vm","uid":"v"}]}})");
  ASSERT_OK_AND_ASSIGN(DraClaim c, ReadDraClaim(d));
  EXPECT_TRUE(c.allocated);
  EXPECT_THAT(c.reserved_for, ElementsAreArray({Pod("p", "u"), Vm("vm", "v")}));
  d.Parse(R"({"status":{"reservedFor":[{"resource":"pods","name":"p"}]}})");
  EXPECT_THAT(ReadDraClaim(d).status().message(),
              HasSubstr("ResourceClaim.status.reservedFor[0].uid"));
  EXPECT_FALSE(c.pod_owned);
  d.Parse(R"({"metadata":{}})");
  ASSERT_OK_AND_ASSIGN(c, ReadDraClaim(d));
  EXPECT_FALSE(c.allocated);
  // Owned by its pod (made from a template) only when the controller owner
  // is a v1 Pod.
  for (const auto& [owners, pod_owned] : std::vector<std::pair<std::string, bool>>{
           {R"([{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u","controller":true}])", true},
           {R"([{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u"}])", false},
           {R"([{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"v","uid":"u","controller":true}])",
            false}}) {
    d.Parse(("{\"metadata\":{\"ownerReferences\":" + owners + "}}").c_str());
    ASSERT_OK_AND_ASSIGN(c, ReadDraClaim(d));
    EXPECT_EQ(c.pod_owned, pod_owned) << owners;
  }
  d.Parse(R"({"metadata":{"ownerReferences":[{"kind":"Pod"}]}})");
  EXPECT_THAT(ReadDraClaim(d).status().message(), HasSubstr("ResourceClaim.metadata"));
  // Written back in place, other fields untouched.
  d.Parse(R"({"spec":{"x":1},"status":{"allocation":{"a":1},"reservedFor":[]}})");
  WriteReservedFor(d, {Vm("vm", "v")});
  ASSERT_OK_AND_ASSIGN(c, ReadDraClaim(d));
  EXPECT_THAT(c.reserved_for, ElementsAreArray({Vm("vm", "v")}));
  EXPECT_EQ(d["spec"]["x"].GetInt(), 1);
}

}  // namespace
}  // namespace pdc::extender::dra
