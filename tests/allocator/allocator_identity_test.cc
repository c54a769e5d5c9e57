// Device identity (docs/design.md §4.1): a claim's drive, and a Released
// drive, are followed by their serial when a bus renumbering gives them new
// PCI addresses; no drive holding a claim's data is ever offered free; a
// serial two devices report is trusted for nothing; a device without a
// serial is its address.
#include <algorithm>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/allocator_impl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allocator/allocator_test_util.h"

namespace pdc::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kA[] = "0000:3b:00.0";
constexpr char kB[] = "0000:5e:00.0";
constexpr char kC[] = "0000:86:00.0";

// One drive as pdc-node reports it: serial `serial` at `address`.
Device Drive(std::string_view address, int group, std::string serial) {
  return NvmeDevice(address, group, -1, std::move(serial));
}

class IdentityTest : public AllocatorFixture {
 protected:
  void SetUp() override {
    AllocatorFixture::SetUp();
    allocator_->SetChangeListener([this](const Allocator::Change& c) {
      moves_.insert(moves_.end(), c.moves.begin(), c.moves.end());
    });
  }

  std::string Invariants() {
    return dynamic_cast<AllocatorImpl*>(allocator_.get())->CheckInvariantsForTest();
  }

  std::vector<DeviceMove> moves_;
};

// Where the two drives S1 (bound to vm1) and S2 (free) are after the
// renumbering.
struct RenumberCase {
  std::string name;
  std::string s1_at;
  std::string s2_at;
};
void PrintTo(const RenumberCase& c, std::ostream* os) { *os << c.name; }

class RenumberTest : public IdentityTest,
                     public ::testing::WithParamInterface<RenumberCase> {};

TEST_P(RenumberTest, TheClaimMovesWithItsDriveAndTheDriveIsNotOfferedFree) {
  const RenumberCase& tc = GetParam();
  Report(Inventory("node-a", {Drive(kA, 10, "S1"), Drive(kB, 11, "S2")}));
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(VmPod("vm1", "u1"), "node-a"));
  ASSERT_THAT(b.claims[0].devices, ElementsAre(Addr(kA)));
  ASSERT_OK(allocator_->Release({"default", "vm1-nvme"}, ""));

  Report(Inventory("node-a", {Drive(tc.s1_at, 20, "S1"), Drive(tc.s2_at, 21, "S2")}));

  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(c.status.phase, ClaimPhase::kBound);
  EXPECT_THAT(c.status.devices, ElementsAre(BoundDevice{Addr(tc.s1_at), "S1"}));
  EXPECT_THAT(moves_, ElementsAre(DeviceMove{"node-a", "S1", Addr(kA), Addr(tc.s1_at),
                                             {"default", "vm1-nvme"}, false}));
  // Only S2 is free: a pod wanting two does not fit, one wanting one gets S2.
  EXPECT_EQ(Filter(VmPod("vm2", "u2", 2), {"node-a"}).nodes[0].reason,
            FilterReason::kInsufficient);
  ASSERT_OK_AND_ASSIGN(BindOutcome b2, allocator_->Bind(VmPod("vm2", "u2"), "node-a"));
  EXPECT_THAT(b2.claims[0].devices, ElementsAre(Addr(tc.s2_at)));
  // The VM gets its own drive back at its new address.
  ASSERT_OK_AND_ASSIGN(BindOutcome again, allocator_->Bind(VmPod("vm1", "u3"), "node-a"));
  EXPECT_THAT(again.claims[0].devices, ElementsAre(Addr(tc.s1_at)));
  EXPECT_EQ(Invariants(), "");
}

INSTANTIATE_TEST_SUITE_P(
    Renumberings, RenumberTest,
    ::testing::Values(RenumberCase{"SlotsSwapped", kB, kA},
                      RenumberCase{"CardAddedShiftsBoth", kB, kC},
                      RenumberCase{"OnlyTheClaimedDriveMoves", kC, kB}),
    [](const ::testing::TestParamInfo<RenumberCase>& i) { return i.param.name; });

TEST_F(IdentityTest, ALostClaimReturnsToBoundWhenItsDriveReappearsElsewhere) {
  Report(Inventory("node-a", {Drive(kA, 10, "S1"), Drive(kB, 11, "S2")}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-a").status());
  Report(Inventory("node-a", {Drive(kB, 11, "S2")}));
  ASSERT_EQ(allocator_->GetClaim({"default", "vm1-nvme"})->status.phase, ClaimPhase::kLost);

  Report(Inventory("node-a", {Drive(kB, 11, "S2"), Drive(kC, 12, "S1")}));
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(c.status.phase, ClaimPhase::kBound);
  EXPECT_EQ(c.status.lost_reason, "");
  EXPECT_THAT(c.status.devices, ElementsAre(BoundDevice{Addr(kC), "S1"}));
  EXPECT_EQ(moves_.size(), 1u);
  EXPECT_EQ(Invariants(), "");
}

TEST_F(IdentityTest, AReleasedDriveAtANewAddressStaysReleased) {
  Report(Inventory("node-a", {Drive(kA, 10, "S1"), Drive(kB, 11, "S2")}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-a").status());
  ASSERT_OK(allocator_->DeleteClaim({"default", "vm1-nvme"}, /*force=*/true));

  Report(Inventory("node-a", {Drive(kB, 20, "S1"), Drive(kC, 21, "S2")}));

  ASSERT_OK_AND_ASSIGN(NodeView v, allocator_->GetNode("node-a"));
  EXPECT_THAT(v.released,
              ElementsAre(IsReleasedMark(Addr(kB), "S1", ClaimKey{"default", "vm1-nvme"})));
  EXPECT_THAT(moves_, ElementsAre(DeviceMove{"node-a", "S1", Addr(kA), Addr(kB),
                                             {"default", "vm1-nvme"}, true}));
  EXPECT_EQ(Filter(VmPod("vm2", "u2", 2), {"node-a"}).nodes[0].reason,
            FilterReason::kInsufficient);
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(VmPod("vm2", "u2"), "node-a"));
  EXPECT_THAT(b.claims[0].devices, ElementsAre(Addr(kC)));
  EXPECT_EQ(Invariants(), "");
}

TEST_F(IdentityTest, TwoDevicesWithOneSerialAreRefusedAndNoClaimMovesOntoThem) {
  Report(Inventory("node-a", {Drive(kA, 10, "S1"), Drive(kB, 11, "S2")}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-a").status());  // S1 at kA.

  Report(Inventory("node-a", {Drive(kB, 11, "S1"), Drive(kC, 12, "S1")}));

  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(c.status.phase, ClaimPhase::kLost);
  EXPECT_THAT(c.status.devices, ElementsAre(BoundDevice{Addr(kA), "S1"}));
  EXPECT_THAT(c.status.lost_reason,
              HasSubstr("serial S1 is reported by 2 devices on node node-a (0000:5e:00.0, "
                        "0000:86:00.0): pdc cannot tell which one holds the claim's data"));
  EXPECT_THAT(moves_, IsEmpty());
  ASSERT_OK_AND_ASSIGN(NodeView v, allocator_->GetNode("node-a"));
  for (const Device& d : v.inventory.devices) {
    EXPECT_EQ(d.health, DeviceHealth::kUnhealthy) << d.address.ToString();
  }
  EXPECT_EQ(allocator_->Stats().devices_unhealthy, 2u);
  EXPECT_EQ(Filter(VmPod("vm2", "u2"), {"node-a"}).nodes[0].reason,
            FilterReason::kInsufficient);
  EXPECT_EQ(Invariants(), "");
}

TEST_F(IdentityTest, ADeviceWithoutASerialIsItsAddress) {
  Report(Inventory("node-a", {Gpu(kA, 10), Gpu(kB, 11)}));
  SchedulingRequest pod = VmPod("vm1", "u1", 0);
  pod.resources.push_back({kGpu, 1});
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(pod, "node-a"));
  ASSERT_THAT(b.claims[0].devices, ElementsAre(Addr(kA)));

  // A GPU at another address is not known to be the claim's.
  Report(Inventory("node-a", {Gpu(kB, 11), Gpu(kC, 12)}));
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim(b.claims[0].key));
  EXPECT_EQ(c.status.phase, ClaimPhase::kLost);
  EXPECT_THAT(c.status.devices, ElementsAre(BoundDevice{Addr(kA), ""}));
  EXPECT_THAT(moves_, IsEmpty());
  Report(Inventory("node-a", {Gpu(kA, 10), Gpu(kB, 11)}));
  EXPECT_EQ(allocator_->GetClaim(b.claims[0].key)->status.phase, ClaimPhase::kBound);
  EXPECT_EQ(Invariants(), "");
}

TEST_F(IdentityTest, AMoveOntoAnAddressALostClaimStillNamesIsNotMade) {
  // vm1 holds S1 at kA, vm2 S2 at kB. S1 vanishes and S2 shows up at kA.
  Report(Inventory("node-a", {Drive(kA, 10, "S1"), Drive(kB, 11, "S2")}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-a").status());
  ASSERT_OK(allocator_->Bind(VmPod("vm2", "u2"), "node-a").status());
  Report(Inventory("node-a", {Drive(kA, 10, "S2")}));
  ASSERT_OK_AND_ASSIGN(Claim c2, allocator_->GetClaim({"default", "vm2-nvme"}));
  EXPECT_EQ(c2.status.phase, ClaimPhase::kLost);
  EXPECT_THAT(c2.status.lost_reason, HasSubstr("which claim default/vm1-nvme still names"));
  EXPECT_THAT(c2.status.devices, ElementsAre(BoundDevice{Addr(kB), "S2"}));
  EXPECT_EQ(Invariants(), "");
  // S1 back elsewhere lets kA go: both claims follow their drives at once.
  Report(Inventory("node-a", {Drive(kA, 10, "S2"), Drive(kC, 12, "S1")}));
  EXPECT_THAT(DevicesOf({"default", "vm1-nvme"}), ElementsAre(Addr(kC)));
  EXPECT_THAT(DevicesOf({"default", "vm2-nvme"}), ElementsAre(Addr(kA)));
  EXPECT_EQ(allocator_->GetClaim({"default", "vm2-nvme"})->status.phase, ClaimPhase::kBound);
  EXPECT_EQ(Invariants(), "");
}

TEST_F(IdentityTest, ALostClaimStillHoldsTheDrivesItFoundAtTheirNewAddress) {
  Report(Inventory("node-a", {Drive(kA, 10, "S1"), Drive(kB, 11, "S2"), Drive(kC, 12, "S3")}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1", 2), "node-a").status());  // S1, S2.
  // S1 is gone; S2 moved to kC, S3 to kA.
  Report(Inventory("node-a", {Drive(kA, 10, "S3"), Drive(kC, 12, "S2")}));
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(c.status.phase, ClaimPhase::kLost);
  EXPECT_THAT(c.status.lost_reason, HasSubstr("now has serial S3, the claim was bound to serial S1"));
  EXPECT_THAT(c.status.devices,
              ElementsAre(BoundDevice{Addr(kA), "S1"}, BoundDevice{Addr(kC), "S2"}));
  // S1's old address now shows S3, which the Lost claim holds (its old
  // address), and S2 is held where it is: nothing is free.
  EXPECT_EQ(Filter(VmPod("vm2", "u2"), {"node-a"}).nodes[0].reason,
            FilterReason::kInsufficient);
  EXPECT_EQ(Invariants(), "");
}

TEST_F(IdentityTest, RecoveryAfterAMoveGivesTheSameState) {
  Report(Inventory("node-a", {Drive(kA, 10, "S1"), Drive(kB, 11, "S2"), Drive(kC, 12, "S3")}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1", 2), "node-a").status());  // S1, S2.
  ASSERT_OK(allocator_->Bind(VmPod("vm2", "u2"), "node-a").status());     // S3.
  ASSERT_OK(allocator_->DeleteClaim({"default", "vm2-nvme"}, /*force=*/true));
  ASSERT_OK(allocator_->Checkpoint());
  Report(Inventory("node-a", {Drive(kA, 10, "S3"), Drive(kB, 11, "S1"), Drive(kC, 12, "S2")}));
  const std::vector<Claim> claims = allocator_->ListClaims("");
  ASSERT_OK_AND_ASSIGN(NodeView view, allocator_->GetNode("node-a"));
  ASSERT_OK_AND_ASSIGN(NodeAllocations allocations, allocator_->GetNodeAllocations("node-a"));
  ASSERT_THAT(claims[0].status.devices,
              ElementsAre(BoundDevice{Addr(kB), "S1"}, BoundDevice{Addr(kC), "S2"}));
  ASSERT_THAT(view.released,
              ElementsAre(IsReleasedMark(Addr(kA), "S3", ClaimKey{"default", "vm2-nvme"})));

  allocator_.reset();
  ASSERT_OK_AND_ASSIGN(allocator_, Allocator::Open(TestOptions(), &store_, &clock_));
  EXPECT_EQ(allocator_->ListClaims(""), claims);
  EXPECT_EQ(allocator_->GetNode("node-a")->released, view.released);
  EXPECT_EQ(allocator_->GetNode("node-a")->inventory, view.inventory);
  EXPECT_EQ(*allocator_->GetNodeAllocations("node-a"), allocations);
  EXPECT_EQ(Invariants(), "");
  // The same report again is a heartbeat: nothing moves, nothing is written.
  const uint64_t revision = allocator_->revision();
  Report(Inventory("node-a", {Drive(kA, 10, "S3"), Drive(kB, 11, "S1"), Drive(kC, 12, "S2")}));
  EXPECT_EQ(allocator_->revision(), revision);
}

// The hand-off order (HandoffOrderLess): the pod's named claims in
// annotation order, then its template claim; a claim's devices by serial.
// It is what the bind outcome lists and what the node is told
// (NodeAllocation::handoff_index), and it does not depend on PCI addresses.
class HandoffOrderTest : public IdentityTest {
 protected:
  // The serials handed to pod `pod_uid`, by NodeAllocation::handoff_index.
  std::vector<std::string> HandedOrder(const std::string& pod_uid) {
    std::vector<std::pair<uint32_t, std::string>> order;
    auto a = allocator_->GetNodeAllocations("node-a");
    EXPECT_TRUE(a.ok()) << a.status();
    auto node = allocator_->GetNode("node-a");
    for (const NodeAllocation& c : a->claimed) {
      if (!c.reserved_for || c.reserved_for->pod_uid != pod_uid) continue;
      for (const Device& d : node->inventory.devices) {
        if (d.address == c.address) order.emplace_back(c.handoff_index, d.serial);
      }
    }
    std::sort(order.begin(), order.end());
    std::vector<std::string> out;
    for (size_t i = 0; i < order.size(); ++i) {
      EXPECT_EQ(order[i].first, i) << "hand-off indices are 0..n-1";
      out.push_back(order[i].second);
    }
    return out;
  }

  // The serials of a bind outcome, in its order.
  std::vector<std::string> OutcomeOrder(const BindOutcome& b) {
    auto node = allocator_->GetNode("node-a");
    std::vector<std::string> out;
    for (const BoundClaim& c : b.claims) {
      for (PciAddress a : c.devices) {
        for (const Device& d : node->inventory.devices) {
          if (d.address == a) out.push_back(d.serial);
        }
      }
    }
    return out;
  }
};

TEST_F(HandoffOrderTest, EveryStartGetsTheSameOrderAcrossRenumberingAndRecovery) {
  // Serial order is not address order on purpose.
  Report(Inventory("node-a", {Drive("0000:01:00.0", 1, "S4"), Drive("0000:02:00.0", 2, "S3"),
                              Drive("0000:03:00.0", 3, "S2"), Drive("0000:04:00.0", 4, "S1")}));
  ClaimSpec two = Spec(kNvme, 2);
  ASSERT_OK(allocator_->CreateClaim({"default", "zeta"}, Spec(kNvme, 1)).status());
  ASSERT_OK(allocator_->CreateClaim({"default", "alpha"}, two).status());
  // zeta first, alpha (two drives) second, the template claim vm1-nvme last.
  auto pod = [](std::string uid) { return VmPod("vm1", uid, 4, {"zeta", "alpha"}); };
  ASSERT_OK_AND_ASSIGN(BindOutcome first, allocator_->Bind(pod("u1"), "node-a"));
  std::vector<ClaimKey> keys;
  for (const BoundClaim& c : first.claims) keys.push_back(c.key);
  EXPECT_THAT(keys, ElementsAre(ClaimKey{"default", "zeta"}, ClaimKey{"default", "alpha"},
                                ClaimKey{"default", "vm1-nvme"}));
  const std::vector<std::string> want = OutcomeOrder(first);
  ASSERT_EQ(want.size(), 4u);
  // alpha's two drives by serial.
  EXPECT_LT(want[1], want[2]);
  EXPECT_EQ(HandedOrder("u1"), want);

  struct Step {
    std::string name;
    std::function<void()> before;
  };
  const std::vector<Step> steps = {
      {"restart", [] {}},
      {"renumbered",
       [&] {
         Report(Inventory("node-a",
                          {Drive("0000:81:00.0", 1, "S1"), Drive("0000:82:00.0", 2, "S2"),
                           Drive("0000:83:00.0", 3, "S3"), Drive("0000:84:00.0", 4, "S4")}));
       }},
      {"renumbered again, reversed",
       [&] {
         Report(Inventory("node-a",
                          {Drive("0000:81:00.0", 1, "S4"), Drive("0000:82:00.0", 2, "S3"),
                           Drive("0000:83:00.0", 3, "S1"), Drive("0000:84:00.0", 4, "S2")}));
       }},
      {"pdc restarted",
       [&] {
         allocator_.reset();
         ASSERT_OK_AND_ASSIGN(allocator_, Allocator::Open(TestOptions(), &store_, &clock_));
         Report(Inventory("node-a",
                          {Drive("0000:81:00.0", 1, "S4"), Drive("0000:82:00.0", 2, "S3"),
                           Drive("0000:83:00.0", 3, "S1"), Drive("0000:84:00.0", 4, "S2")}));
       }},
  };
  int start = 2;
  for (const Step& step : steps) {
    SCOPED_TRACE(step.name);
    step.before();
    const std::string uid = "u" + std::to_string(start++);
    ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(pod(uid), "node-a"));
    EXPECT_EQ(OutcomeOrder(b), want);
    EXPECT_EQ(HandedOrder(uid), want);
  }
  // After pdc restarted with the pod still waiting, its order is unchanged.
  const std::string last = "u" + std::to_string(start - 1);
  allocator_.reset();
  ASSERT_OK_AND_ASSIGN(allocator_, Allocator::Open(TestOptions(), &store_, &clock_));
  EXPECT_EQ(HandedOrder(last), want);
}

}  // namespace
}  // namespace pdc::testing
