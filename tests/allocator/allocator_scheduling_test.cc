// Scheduling rules of the allocator core (docs/design.md §5).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allocator/allocator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allocator/allocator_test_util.h"

namespace pdc::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::vector<std::string> kNodes = {"node-a", "node-b", "node-c"};

struct ClaimProblemCase {
  std::string name;
  SchedulingRequest request;
  std::string message;
};

class SchedulingTest : public AllocatorFixture {
 protected:
  void SetUp() override {
    AllocatorFixture::SetUp();
    Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 10), NvmeDevice("0000:5e:00.0", 11)}));
    Report(Inventory("node-b", {NvmeDevice("0000:3b:00.0", 20)}));
    Report(Inventory("node-c", {NvmeDevice("0000:3b:00.0", 30), NvmeDevice("0000:3c:00.0", 31),
                                NvmeDevice("0000:3d:00.0", 32)}));
  }

  // The case's request fails filter on every node with its message, and
  // bind refuses it.
  void ExpectUnresolvableEverywhere(const ClaimProblemCase& c) {
    FilterResult f = Filter(c.request, kNodes);
    ASSERT_FALSE(f.pass_through) << c.name;
    for (size_t i = 0; i < kNodes.size(); ++i) {
      EXPECT_EQ(f.nodes[i].verdict, Verdict::kUnresolvable) << c.name;
      EXPECT_THAT(f.MessageFor(i), HasSubstr(c.message)) << c.name;
    }
    EXPECT_THAT(allocator_->Bind(c.request, "node-c"),
                StatusIs(absl::StatusCode::kFailedPrecondition))
        << c.name;
  }
};

TEST_F(SchedulingTest, PodWithoutManagedDevicesPassesThrough) {
  SchedulingRequest r = VmPod("vm0", "uid-0", /*nvme=*/0);
  FilterResult f = Filter(r, kNodes);
  EXPECT_TRUE(f.pass_through);
  EXPECT_THAT(allocator_->Score(r, Names(kNodes)), ElementsAre(0, 0, 0));
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(r, "node-b"));
  EXPECT_THAT(b.claims, IsEmpty());
  EXPECT_THAT(allocator_->ListClaims(""), IsEmpty());
}

TEST_F(SchedulingTest, RestartOfSameVmGetsSameNodeAndDevices) {
  ASSERT_OK_AND_ASSIGN(BindOutcome first, allocator_->Bind(VmPod("vm1", "uid-1"), "node-c"));
  ASSERT_EQ(first.claims.size(), 1u);
  EXPECT_EQ(first.claims[0].key, (ClaimKey{"default", "vm1-nvme"}));
  EXPECT_TRUE(first.claims[0].created);
  EXPECT_THAT(first.claims[0].devices, ElementsAre(Addr("0000:3b:00.0")));
  for (int restart = 2; restart <= 20; ++restart) {
    ASSERT_OK(allocator_->Release({"default", "vm1-nvme"}, ""));  // VM stopped.
    SchedulingRequest pod = VmPod("vm1", "uid-" + std::to_string(restart));
    EXPECT_THAT(Fitting(pod, kNodes), ElementsAre("node-c")) << "restart " << restart;
    EXPECT_THAT(allocator_->Score(pod, Names(kNodes)), ElementsAre(0, 0, 10));
    ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(pod, "node-c"));
    EXPECT_THAT(b.claims[0].devices, ElementsAre(Addr("0000:3b:00.0")));
    EXPECT_FALSE(b.claims[0].allocated);
  }
}

TEST_F(SchedulingTest, OtherNodesGetUnresolvableWithReason) {
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "uid-1"), "node-c").status());
  FilterResult f = Filter(VmPod("vm1", "uid-2"), kNodes);
  EXPECT_EQ(f.nodes[0].verdict, Verdict::kUnresolvable);
  EXPECT_EQ(f.nodes[0].reason, FilterReason::kBoundElsewhere);
  EXPECT_THAT(f.MessageFor(0),
              HasSubstr("claim default/vm1-nvme is bound to node node-c"));
  EXPECT_EQ(f.nodes[2].verdict, Verdict::kFits);
  EXPECT_EQ(f.nodes[2].reason, FilterReason::kStickyHit);
  // Failures with the same words share one message.
  EXPECT_EQ(f.nodes[0].message, f.nodes[1].message);
}

TEST_F(SchedulingTest, AnotherVmCannotTakeAReservedClaim) {
  ASSERT_OK(allocator_->CreateClaim({"default", "shared"}, Spec(kNvme, 1)).status());
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "uid-1", 1, {"shared"}), "node-b").status());
  SchedulingRequest other = VmPod("vm2", "uid-2", 1, {"shared"});
  FilterResult f = Filter(other, kNodes);
  EXPECT_EQ(f.nodes[1].verdict, Verdict::kFailed);  // May clear when vm1 stops.
  EXPECT_EQ(f.nodes[1].reason, FilterReason::kReservedByOther);
  EXPECT_THAT(f.MessageFor(1), HasSubstr("in use by VM default/vm1"));
  EXPECT_THAT(allocator_->Bind(other, "node-b"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(allocator_->Preemptable(other, Names(kNodes)), ElementsAre("node-b"));
  // Once vm1 stops, vm2 may use the claim - on the same node and device.
  ASSERT_OK(allocator_->Release({"default", "shared"}, "uid-1"));
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(other, "node-b"));
  EXPECT_THAT(b.claims[0].devices, ElementsAre(Addr("0000:3b:00.0")));
}

TEST_F(SchedulingTest, ReleaseChecksThePod) {
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "uid-1"), "node-a").status());
  EXPECT_THAT(allocator_->Release({"default", "vm1-nvme"}, "uid-other"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_OK(allocator_->Release({"default", "vm1-nvme"}, "uid-1"));
  EXPECT_OK(allocator_->Release({"default", "vm1-nvme"}, "uid-1"));  // Idempotent.
  EXPECT_THAT(allocator_->Release({"default", "nope"}, ""),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(SchedulingTest, PendingClaimsOfOnePodMustFitTogether) {
  ASSERT_OK(allocator_->CreateClaim({"default", "data"}, Spec(kNvme, 1)).status());
  ASSERT_OK(allocator_->CreateClaim({"default", "logs"}, Spec(kNvme, 1)).status());
  SchedulingRequest pod = VmPod("vm1", "uid-1", 2, {"data", "logs"});
  FilterResult f = Filter(pod, kNodes);
  EXPECT_EQ(f.nodes[0].verdict, Verdict::kFits);
  EXPECT_EQ(f.nodes[1].verdict, Verdict::kUnresolvable);
  EXPECT_EQ(f.nodes[1].reason, FilterReason::kInsufficient);
  EXPECT_EQ(f.MessageFor(1), "insufficient free devices.kubevirt.io/nvme: want 2, free 1");
  EXPECT_THAT(allocator_->Bind(pod, "node-b"), StatusIs(absl::StatusCode::kFailedPrecondition));
  // Nothing was half-allocated by the failed bind.
  EXPECT_EQ(allocator_->GetClaim({"default", "data"})->status.phase, ClaimPhase::kPending);
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(pod, "node-a"));
  EXPECT_THAT(DevicesOf({"default", "data"}), ElementsAre(Addr("0000:3b:00.0")));
  EXPECT_THAT(DevicesOf({"default", "logs"}), ElementsAre(Addr("0000:5e:00.0")));
}

TEST_F(SchedulingTest, ClaimsOnDifferentNodesAreAClaimProblem) {
  ASSERT_OK(allocator_->CreateClaim({"default", "a"}, Spec(kNvme, 1)).status());
  ASSERT_OK(allocator_->CreateClaim({"default", "b"}, Spec(kNvme, 1)).status());
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1", 1, {"a"}), "node-a").status());
  ASSERT_OK(allocator_->Bind(VmPod("vm2", "u2", 1, {"b"}), "node-b").status());
  FilterResult f = Filter(VmPod("vm3", "u3", 2, {"a", "b"}), kNodes);
  for (const NodeVerdict& v : f.nodes) EXPECT_EQ(v.reason, FilterReason::kClaimProblem);
  EXPECT_THAT(f.MessageFor(0), HasSubstr("bound to different nodes"));
}

TEST_F(SchedulingTest, ExplicitAndTemplateClaimsCombine) {
  ASSERT_OK(allocator_->CreateClaim({"default", "data"}, Spec(kNvme, 1)).status());
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(VmPod("vm1", "u1", 3, {"data"}), "node-c"));
  ASSERT_EQ(b.claims.size(), 2u);
  EXPECT_EQ(b.claims[0].key.name, "data");
  EXPECT_EQ(b.claims[1].key.name, "vm1-nvme");
  ASSERT_OK_AND_ASSIGN(Claim t, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(t.spec.count, 2);
  EXPECT_EQ(t.spec.owner_vm, "vm1");
  EXPECT_EQ(t.status.devices.size(), 2u);
}


TEST_F(SchedulingTest, ClaimProblemsMakeEveryNodeUnresolvable) {
  ASSERT_OK(allocator_->CreateClaim({"default", "one"}, Spec(kNvme, 1)).status());
  ASSERT_OK(allocator_->CreateClaim({"default", "two"}, Spec(kNvme, 2)).status());
  ClaimSpec other_owner = Spec(kNvme, 2);
  other_owner.owner_vm = "someone-else";
  ASSERT_OK(allocator_->CreateClaim({"default", "vm9-nvme"}, other_owner).status());
  ClaimProblemCase cases[] = {
      {"missing claim", VmPod("vm1", "u", 1, {"nope"}), "claim default/nope (annotation"},
      {"bad claim name", VmPod("vm1", "u", 1, {"Bad_Name"}), "pdc.kubevirt.io/claims"},
      {"more claimed than requested", VmPod("vm1", "u", 1, {"two"}),
       "the pod's claims provide 2 devices.kubevirt.io/nvme but the pod requests 1"},
      {"claim for unrequested resource", VmPod("vm1", "u", 0, {"one"}),
       "provide 1 devices.kubevirt.io/nvme but the pod requests 0"},
      {"template name taken", VmPod("vm9", "u", 2), "is not VM vm9's template claim"},
  };
  for (const ClaimProblemCase& c : cases) ExpectUnresolvableEverywhere(c);
}

// Counts that no node or no claim can hold never size a claim: the allocator
// holds the bounds itself, whatever its caller let through (a count beyond
// int32 was cast into a claim's count before).
TEST_F(SchedulingTest, CountsBeyondTheBoundsAreAProblemNotAClaim) {
  ClaimProblemCase cases[] = {
      {"beyond int32", VmPod("vm1", "u", int64_t{1} << 32 | 1),
       "the pod requests 4294967297 devices.kubevirt.io/nvme, more than one node may hold (4096)"},
      {"beyond a node", VmPod("vm1", "u", kMaxNodeDevices + 1),
       "more than one node may hold (4096)"},
      {"beyond a claim", VmPod("vm1", "u", kMaxClaimCount + 1),
       "the pod requests 257 devices.kubevirt.io/nvme beyond its named claims, more than one "
       "claim may hold (256)"},
  };
  for (const ClaimProblemCase& c : cases) ExpectUnresolvableEverywhere(c);
  EXPECT_THAT(allocator_->ListClaims(""), IsEmpty());
}

TEST_F(SchedulingTest, TemplateClaimSizeChangeIsReported) {
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1", 1), "node-c").status());
  FilterResult f = Filter(VmPod("vm1", "u2", 2), kNodes);
  EXPECT_THAT(f.MessageFor(2), HasSubstr("holds 1 devices.kubevirt.io/nvme but the pod requests 2"));
}

TEST_F(SchedulingTest, NodeNotReportingIsRetryable) {
  clock_.Advance(absl::Seconds(61));
  Report(Inventory("node-b", {NvmeDevice("0000:3b:00.0", 20)}));  // Only node-b heartbeats.
  FilterResult f = Filter(VmPod("vm1", "u1"), {"node-a", "node-b", "node-x"});
  EXPECT_EQ(f.nodes[0].verdict, Verdict::kFailed);
  EXPECT_EQ(f.nodes[0].reason, FilterReason::kNotReporting);
  EXPECT_EQ(f.MessageFor(0), "the pdc node driver on this node has not reported for more than 1m");
  EXPECT_EQ(f.nodes[1].verdict, Verdict::kFits);
  EXPECT_EQ(f.nodes[2].reason, FilterReason::kNotReporting);
  EXPECT_EQ(f.MessageFor(2), "no pdc node driver has reported devices from this node");
}

// kube-scheduler lists every distinct message of an answer in the pod's
// event, so nodes failing for the same reason share one message: the node is
// the answer's key, never part of the text.
TEST_F(SchedulingTest, NodesFailingAlikeShareOneMessage) {
  clock_.Advance(absl::Seconds(61));
  std::vector<std::string> names;
  for (int i = 0; i < 50; ++i) {
    const std::string silent = absl::StrCat("silent-", i);
    Report(Inventory(silent, {NvmeDevice("0000:3b:00.0", 20)}));
    names.push_back(silent);
    names.push_back(absl::StrCat("unknown-", i));
  }
  clock_.Advance(absl::Seconds(61));
  std::vector<std::string_view> views(names.begin(), names.end());
  FilterResult f = allocator_->Filter(VmPod("vm1", "u1"), views);
  ASSERT_EQ(f.nodes.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(f.nodes[i].verdict, Verdict::kFailed) << names[i];
    EXPECT_EQ(f.nodes[i].reason, FilterReason::kNotReporting) << names[i];
  }
  // "", the silent nodes' message, the unknown nodes' message.
  EXPECT_EQ(f.messages.size(), 3u);
  EXPECT_NE(f.MessageFor(0), f.MessageFor(1));
}

TEST_F(SchedulingTest, UnhealthyDevicesAreNotAllocated) {
  Device sick = NvmeDevice("0000:3b:00.0", 20);
  sick.health = DeviceHealth::kUnhealthy;
  Report(Inventory("node-b", {sick}));
  FilterResult f = Filter(VmPod("vm1", "u1"), {"node-b"});
  EXPECT_EQ(f.nodes[0].reason, FilterReason::kInsufficient);
  EXPECT_EQ(f.MessageFor(0), "insufficient free devices.kubevirt.io/nvme: want 1, free 0");
}

TEST_F(SchedulingTest, BoundDeviceTurningUnhealthyIsRetryable) {
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-b").status());
  Device sick = NvmeDevice("0000:3b:00.0", 20);
  sick.health = DeviceHealth::kUnhealthy;
  Report(Inventory("node-b", {sick}));
  FilterResult f = Filter(VmPod("vm1", "u2"), {"node-b"});
  EXPECT_EQ(f.nodes[0].verdict, Verdict::kFailed);
  EXPECT_EQ(f.nodes[0].reason, FilterReason::kUnhealthy);
}

TEST_F(SchedulingTest, NodeGoneTurnsClaimLostAndBackWhenItReturns) {
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-b").status());
  ASSERT_OK(allocator_->RemoveNode("node-b"));
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(c.status.phase, ClaimPhase::kLost);
  FilterResult f = Filter(VmPod("vm1", "u2"), kNodes);
  for (size_t i = 0; i < kNodes.size(); ++i) {
    EXPECT_EQ(f.nodes[i].verdict, Verdict::kUnresolvable);
    EXPECT_EQ(f.MessageFor(i), "claim default/vm1-nvme is Lost: node node-b was removed");
  }
  // The node comes back with the same drive: the claim is Bound again.
  Report(Inventory("node-b", {NvmeDevice("0000:3b:00.0", 20)}));
  EXPECT_EQ(allocator_->GetClaim({"default", "vm1-nvme"})->status.phase, ClaimPhase::kBound);
  EXPECT_THAT(Fitting(VmPod("vm1", "u3"), kNodes), ElementsAre("node-b"));
}

TEST_F(SchedulingTest, VanishedOrSwappedDeviceTurnsClaimLost) {
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-a").status());  // 0000:3b:00.0
  Report(Inventory("node-a", {NvmeDevice("0000:5e:00.0", 11)}));
  EXPECT_THAT(allocator_->GetClaim({"default", "vm1-nvme"})->status.lost_reason,
              HasSubstr("device 0000:3b:00.0 is no longer reported by node node-a"));
  // A different drive in the same slot is not the VM's drive.
  Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 10, -1, "OTHER"), NvmeDevice("0000:5e:00.0", 11)}));
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(c.status.phase, ClaimPhase::kLost);
  EXPECT_THAT(c.status.lost_reason, HasSubstr("now has serial OTHER"));
  // Nobody else gets the slot while the Lost claim exists.
  EXPECT_EQ(Filter(VmPod("vm2", "u2", 2), {"node-a"}).nodes[0].reason,
            FilterReason::kInsufficient);
  Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 10), NvmeDevice("0000:5e:00.0", 11)}));
  EXPECT_EQ(allocator_->GetClaim({"default", "vm1-nvme"})->status.phase, ClaimPhase::kBound);
}

TEST_F(SchedulingTest, BindRechecksUnderTheLock) {
  // Two VMs both passed filter for node-b's single device; the second bind loses.
  SchedulingRequest vm1 = VmPod("vm1", "u1");
  SchedulingRequest vm2 = VmPod("vm2", "u2");
  EXPECT_THAT(Fitting(vm2, {"node-b"}), ElementsAre("node-b"));
  ASSERT_OK(allocator_->Bind(vm1, "node-b").status());
  EXPECT_THAT(allocator_->Bind(vm2, "node-b"), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                         HasSubstr("want 1, free 0")));
  EXPECT_THAT(allocator_->GetClaim({"default", "vm2-nvme"}), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(SchedulingTest, UndoRevertsExactlyWhatTheBindDidAndIsIdempotent) {
  ASSERT_OK(allocator_->CreateClaim({"default", "data"}, Spec(kNvme, 1)).status());
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(VmPod("vm1", "u1", 2, {"data"}), "node-a"));
  ASSERT_OK(allocator_->Undo(b));
  EXPECT_EQ(allocator_->GetClaim({"default", "data"})->status, ClaimStatus{});
  EXPECT_THAT(allocator_->GetClaim({"default", "vm1-nvme"}), StatusIs(absl::StatusCode::kNotFound));
  const uint64_t revision = allocator_->revision();
  ASSERT_OK(allocator_->Undo(b));
  EXPECT_EQ(allocator_->revision(), revision);  // Second undo changed nothing.
  // Undo of a restart's bind keeps the claim bound; only the reservation goes back.
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u2", 2, {"data"}), "node-a").status());
  ASSERT_OK(allocator_->Release({"default", "data"}, ""));
  ASSERT_OK_AND_ASSIGN(BindOutcome restart,
                       allocator_->Bind(VmPod("vm1", "u3", 2, {"data"}), "node-a"));
  ASSERT_OK(allocator_->Undo(restart));
  ASSERT_OK_AND_ASSIGN(Claim data, allocator_->GetClaim({"default", "data"}));
  EXPECT_EQ(data.status.phase, ClaimPhase::kBound);
  EXPECT_FALSE(data.status.reserved_for.has_value());
  ASSERT_OK_AND_ASSIGN(Claim tmpl, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_EQ(tmpl.status.reserved_for->pod_uid, "u2");  // Its previous reservation.
}

TEST_F(SchedulingTest, RetriedBindIsANoOp) {
  SchedulingRequest pod = VmPod("vm1", "u1");
  ASSERT_OK_AND_ASSIGN(BindOutcome first, allocator_->Bind(pod, "node-b"));
  const uint64_t revision = allocator_->revision();
  ASSERT_OK_AND_ASSIGN(BindOutcome again, allocator_->Bind(pod, "node-b"));
  EXPECT_EQ(allocator_->revision(), revision);
  ASSERT_OK(allocator_->Undo(again));  // Undoing the retry keeps the first bind.
  EXPECT_EQ(allocator_->GetClaim({"default", "vm1-nvme"})->status.reserved_for->pod_uid, "u1");
}

TEST_F(SchedulingTest, ScoresPreferStickyThenPolicy) {
  // node-a: 2 free, node-b: 1 free, node-c: 3 free. Bin-pack prefers the fullest after placing.
  std::vector<int> s = allocator_->Score(VmPod("vm1", "u1"), Names(kNodes));
  EXPECT_GT(s[1], s[0]);
  EXPECT_GT(s[0], s[2]);
  for (int v : s) {
    EXPECT_GE(v, 1);
    EXPECT_LE(v, 9);
  }
  AllocatorOptions spread = TestOptions();
  spread.scoring = ScoringPolicy::kSpread;
  Reopen(spread);
  clock_.Advance(absl::Seconds(1));
  for (const std::string& n : kNodes) {
    Report(Inventory(n, allocator_->GetNode(n)->inventory.devices));
  }
  s = allocator_->Score(VmPod("vm1", "u1"), Names(kNodes));
  EXPECT_GT(s[2], s[0]);
  EXPECT_GT(s[0], s[1]);
  EXPECT_EQ(allocator_->Score(VmPod("vm1", "u1", 4), Names(kNodes)), (std::vector<int>{0, 0, 0}));
}

TEST_F(SchedulingTest, PreemptionOnlyWhereEvictionCanHelp) {
  SchedulingRequest pod = VmPod("vm1", "u1", 2);
  EXPECT_THAT(allocator_->Preemptable(pod, Names(kNodes)), ElementsAre("node-a", "node-c"));
}

TEST_F(SchedulingTest, PinnedClaims) {
  ClaimSpec by_node = Spec(kNvme, 1);
  by_node.node = "node-c";
  ASSERT_OK(allocator_->CreateClaim({"default", "on-c"}, by_node).status());
  FilterResult f = Filter(VmPod("vm1", "u1", 1, {"on-c"}), kNodes);
  EXPECT_EQ(f.nodes[0].reason, FilterReason::kPinned);
  EXPECT_EQ(f.nodes[2].verdict, Verdict::kFits);

  ClaimSpec by_serial = Spec(kNvme, 1);
  by_serial.serial = "SN-0000:3c:00.0";
  ASSERT_OK(allocator_->CreateClaim({"default", "by-serial"}, by_serial).status());
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(VmPod("vm2", "u2", 1, {"by-serial"}), "node-c"));
  EXPECT_THAT(b.claims[0].devices, ElementsAre(Addr("0000:3c:00.0")));
  EXPECT_THAT(Filter(VmPod("vm3", "u3", 1, {"by-serial"}), {"node-a"}).MessageFor(0),
              HasSubstr("bound to node node-c"));

  ClaimSpec by_address = Spec(kNvme, 1);
  by_address.node = "node-a";
  by_address.address = Addr("0000:5e:00.0");
  ASSERT_OK(allocator_->CreateClaim({"default", "by-address"}, by_address).status());
  ASSERT_OK_AND_ASSIGN(b, allocator_->Bind(VmPod("vm4", "u4", 1, {"by-address"}), "node-a"));
  EXPECT_THAT(b.claims[0].devices, ElementsAre(Addr("0000:5e:00.0")));
}

}  // namespace
}  // namespace pdc::testing
