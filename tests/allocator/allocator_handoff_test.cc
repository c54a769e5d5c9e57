// Hand-off serialisation (docs/design.md §6.2): at most one pod per node and
// resource waits for its devices; the node driver's confirmation or the
// pod's cancellation lets the next one in.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allocator/allocator_test_util.h"

namespace pdc::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

AllocatorOptions GatedOptions() {
  AllocatorOptions o = TestOptions();
  o.serialize_handoffs = true;
  return o;
}

class HandoffTest : public AllocatorFixture {
 protected:
  void SetUp() override {
    Reopen(GatedOptions());
    ReportNodes();
  }

  void ReportNodes() {
    Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 10), NvmeDevice("0000:5e:00.0", 11),
                                Gpu("0000:af:00.0", 12)}));
    Report(Inventory("node-b", {NvmeDevice("0000:3b:00.0", 10), NvmeDevice("0000:5e:00.0", 11)}));
  }

  BindOutcome MustBind(const SchedulingRequest& r, std::string node) {
    auto out = allocator_->Bind(r, node);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : BindOutcome{};
  }

  absl::StatusOr<std::vector<ClaimKey>> Confirm(std::string node, std::string pod_uid,
                                                std::vector<PciAddress> devices,
                                                std::string resource = kNvme) {
    return allocator_->ConfirmHandoff(node, pod_uid, resource, devices);
  }

  const std::vector<std::string> nodes_ = {"node-a", "node-b"};
};

TEST_F(HandoffTest, SecondVmWaitsUntilTheFirstIsConfirmed) {
  MustBind(VmPod("vm1", "uid-1"), "node-a");
  FilterResult f = Filter(VmPod("vm2", "uid-2"), nodes_);
  EXPECT_EQ(f.nodes[0].verdict, Verdict::kFailed);  // Retryable: FailedNodes.
  EXPECT_EQ(f.nodes[0].reason, FilterReason::kHandoffPending);
  EXPECT_THAT(f.MessageFor(0), HasSubstr("another VM is starting on this node"));
  EXPECT_THAT(f.MessageFor(0), HasSubstr("default/vm1"));
  EXPECT_EQ(f.nodes[1].verdict, Verdict::kFits);
  EXPECT_THAT(allocator_->Bind(VmPod("vm2", "uid-2"), "node-a"),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("another VM is starting")));

  ASSERT_OK_AND_ASSIGN(auto keys, Confirm("node-a", "uid-1", {Addr("0000:3b:00.0")}));
  EXPECT_THAT(keys, ElementsAre(ClaimKey{"default", "vm1-nvme"}));
  EXPECT_EQ(Fitting(VmPod("vm2", "uid-2"), nodes_), nodes_);
  MustBind(VmPod("vm2", "uid-2"), "node-a");
  EXPECT_THAT(DevicesOf({"default", "vm2-nvme"}), ElementsAre(Addr("0000:5e:00.0")));
}

TEST_F(HandoffTest, GateOffLetsEveryPodThrough) {
  Reopen(TestOptions());
  ReportNodes();  // Heartbeats are not persisted.
  MustBind(VmPod("vm1", "uid-1"), "node-a");
  EXPECT_EQ(Fitting(VmPod("vm2", "uid-2"), nodes_), nodes_);
}

TEST_F(HandoffTest, AnotherResourceIsNotBlocked) {
  MustBind(VmPod("vm1", "uid-1"), "node-a");
  SchedulingRequest gpu_only = VmPod("vm3", "uid-3", /*nvme=*/0);
  gpu_only.resources.push_back({kGpu, 1});
  EXPECT_EQ(Fitting(gpu_only, {"node-a"}), std::vector<std::string>{"node-a"});
}

TEST_F(HandoffTest, RestartIsPendingAgainAndNotBlockedByItsOwnOlderPod) {
  MustBind(VmPod("vm1", "uid-1"), "node-a");
  ASSERT_OK(Confirm("node-a", "uid-1", {Addr("0000:3b:00.0")}).status());
  EXPECT_THAT(allocator_->PendingHandoffs(""), IsEmpty());

  // A restart: a new pod of the same VM is pending again.
  MustBind(VmPod("vm1", "uid-2"), "node-a");
  ASSERT_EQ(allocator_->PendingHandoffs("node-a").size(), 1u);
  // That pod never started; KubeVirt makes a third one. It is not blocked by
  // its predecessor and takes the reservation over.
  EXPECT_EQ(Fitting(VmPod("vm1", "uid-3"), nodes_), std::vector<std::string>{"node-a"});
  MustBind(VmPod("vm1", "uid-3"), "node-a");
  EXPECT_THAT(Confirm("node-a", "uid-2", {Addr("0000:3b:00.0")}),
              StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(Confirm("node-a", "uid-3", {Addr("0000:3b:00.0")}).status());
  EXPECT_THAT(DevicesOf({"default", "vm1-nvme"}), ElementsAre(Addr("0000:3b:00.0")));
}

TEST_F(HandoffTest, ConfirmChecksTheDevicesAndIsIdempotent) {
  MustBind(VmPod("vm1", "uid-1"), "node-a");
  EXPECT_THAT(Confirm("node-a", "uid-1", {Addr("0000:5e:00.0")}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("holds devices.kubevirt.io/nvme devices 0000:3b:00.0 on node "
                                 "node-a, but the node driver handed over 0000:5e:00.0")));
  EXPECT_THAT(Confirm("node-b", "uid-1", {Addr("0000:3b:00.0")}),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Confirm("node-a", "uid-1", {Addr("0000:3b:00.0")}, kGpu),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Confirm("node-a", "", {Addr("0000:3b:00.0")}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const uint64_t before = allocator_->revision();
  ASSERT_OK(Confirm("node-a", "uid-1", {Addr("0000:3b:00.0")}).status());
  EXPECT_EQ(allocator_->revision(), before + 1);
  ASSERT_OK_AND_ASSIGN(auto again, Confirm("node-a", "uid-1", {Addr("0000:3b:00.0")}));
  EXPECT_THAT(again, ElementsAre(ClaimKey{"default", "vm1-nvme"}));
  EXPECT_EQ(allocator_->revision(), before + 1);  // Nothing written twice.
}

TEST_F(HandoffTest, CancelReleasesThePendingPodsReservations) {
  MustBind(VmPod("vm1", "uid-1"), "node-a");
  ASSERT_OK_AND_ASSIGN(auto keys, allocator_->CancelHandoff("node-a", "uid-1"));
  EXPECT_THAT(keys, ElementsAre(ClaimKey{"default", "vm1-nvme"}));
  ASSERT_OK_AND_ASSIGN(Claim c, allocator_->GetClaim({"default", "vm1-nvme"}));
  EXPECT_FALSE(c.status.reserved_for.has_value());
  EXPECT_EQ(c.status.phase, ClaimPhase::kBound);  // Keeps its device.
  EXPECT_EQ(Fitting(VmPod("vm2", "uid-2"), nodes_), nodes_);
  EXPECT_THAT(allocator_->CancelHandoff("node-a", "uid-1"),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(HandoffTest, ListsPendingPodsAndMarksAllocations) {
  MustBind(VmPod("vm1", "uid-1"), "node-a");
  MustBind(VmPod("vm2", "uid-2"), "node-b");
  std::vector<PendingHandoff> pending = allocator_->PendingHandoffs("");
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].node, "node-a");
  EXPECT_EQ(pending[0].resource_name, kNvme);
  EXPECT_EQ(pending[0].ns, "default");
  EXPECT_EQ(pending[0].pod.vm, "vm1");
  EXPECT_EQ(pending[0].pod.pod_uid, "uid-1");
  EXPECT_THAT(pending[0].claims, ElementsAre(ClaimKey{"default", "vm1-nvme"}));
  EXPECT_THAT(pending[0].devices, ElementsAre(Addr("0000:3b:00.0")));
  EXPECT_EQ(pending[1].node, "node-b");
  EXPECT_EQ(allocator_->PendingHandoffs("node-b").size(), 1u);

  ASSERT_OK_AND_ASSIGN(NodeAllocations a, allocator_->GetNodeAllocations("node-a"));
  ASSERT_EQ(a.claimed.size(), 1u);
  EXPECT_TRUE(a.claimed[0].handoff_pending);
  const uint64_t version = a.version;
  ASSERT_OK(Confirm("node-a", "uid-1", {Addr("0000:3b:00.0")}).status());
  ASSERT_OK_AND_ASSIGN(a, allocator_->GetNodeAllocations("node-a"));
  EXPECT_FALSE(a.claimed[0].handoff_pending);
  EXPECT_GT(a.version, version);  // Wakes the node driver's long-poll.
}

TEST_F(HandoffTest, PendingAndConfirmedSurviveARestart) {
  MustBind(VmPod("vm1", "uid-1"), "node-a");
  MustBind(VmPod("vm2", "uid-2"), "node-b");
  ASSERT_OK(Confirm("node-b", "uid-2", {Addr("0000:3b:00.0")}).status());
  Reopen(GatedOptions());
  ReportNodes();
  std::vector<PendingHandoff> pending = allocator_->PendingHandoffs("");
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].pod.pod_uid, "uid-1");
  FilterResult f = Filter(VmPod("vm3", "uid-3"), nodes_);
  EXPECT_EQ(f.nodes[0].reason, FilterReason::kHandoffPending);
  EXPECT_EQ(f.nodes[1].verdict, Verdict::kFits);
}

}  // namespace
}  // namespace pdc::testing
