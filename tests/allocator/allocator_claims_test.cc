// Claim lifecycle, validation, inventory and recovery of the allocator core.
#include <memory>
#include <string>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/allocator_impl.h"
#include "allocator/memory_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allocator/allocator_test_util.h"
#include "tests/testing/faulty_store.h"

namespace pdc::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class ClaimsTest : public AllocatorFixture {};

struct InvalidClaimCase {
  ClaimKey key;
  ClaimSpec spec;
  std::string message;
};

TEST_F(ClaimsTest, InvalidClaimsNameTheField) {
  ClaimSpec pinned_two = Spec(kNvme, 2);
  pinned_two.serial = "S1";
  ClaimSpec address_no_node = Spec(kNvme, 1);
  address_no_node.address = Addr("0000:3b:00.0");
  const InvalidClaimCase cases[] = {
      {{"default", "Data"}, Spec(kNvme, 1), "name: \"Data\" is not a valid name: a lowercase RFC 1123 subdomain"},
      {{"default", "-x"}, Spec(kNvme, 1), "name: \"-x\""},
      {{"default", std::string(254, 'a')}, Spec(kNvme, 1), "must be no more than 253 characters"},
      {{"Default", "x"}, Spec(kNvme, 1), "namespace: \"Default\""},
      {{"", "x"}, Spec(kNvme, 1), "namespace: \"\" is not a valid namespace: must not be empty"},
      {{"default", "x"}, Spec("example.com/nope", 1),
       "resourceName: \"example.com/nope\" is not a configured device class"},
      {{"default", "x"}, Spec(kNvme, 0), "count: 0 must be at least 1"},
      {{"default", "x"}, Spec(kNvme, -3), "count: -3 must be at least 1"},
      {{"default", "x"}, pinned_two, "count: 2 must be 1 for a claim pinned"},
      {{"default", "x"}, address_no_node, "node: a claim pinned to a PCI address"},
  };
  for (const InvalidClaimCase& c : cases) {
    EXPECT_THAT(allocator_->CreateClaim(c.key, c.spec),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.key.ToString();
  }
  EXPECT_THAT(allocator_->ListClaims(""), IsEmpty());
}

TEST_F(ClaimsTest, CreateGetListDelete) {
  ASSERT_OK_AND_ASSIGN(Claim a, allocator_->CreateClaim({"ns-b", "a"}, Spec(kNvme, 1)));
  EXPECT_EQ(a.status.phase, ClaimPhase::kPending);
  EXPECT_FALSE(a.uid.empty());
  ASSERT_OK(allocator_->CreateClaim({"ns-a", "z"}, Spec(kNvme, 1)).status());
  ASSERT_OK(allocator_->CreateClaim({"ns-a", "b"}, Spec(kGpu, 1)).status());
  EXPECT_THAT(allocator_->CreateClaim({"ns-b", "a"}, Spec(kNvme, 1)),
              StatusIs(absl::StatusCode::kAlreadyExists));
  std::vector<std::string> keys;
  for (const Claim& c : allocator_->ListClaims("")) keys.push_back(c.key.ToString());
  EXPECT_THAT(keys, ElementsAre("ns-a/b", "ns-a/z", "ns-b/a"));
  EXPECT_EQ(allocator_->ListClaims("ns-a").size(), 2u);
  ASSERT_OK_AND_ASSIGN(Claim got, allocator_->GetClaim({"ns-b", "a"}));
  EXPECT_EQ(got, a);
  ASSERT_OK(allocator_->DeleteClaim({"ns-b", "a"}, false));
  EXPECT_THAT(allocator_->GetClaim({"ns-b", "a"}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(allocator_->DeleteClaim({"ns-b", "a"}, false), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(ClaimsTest, ForceDeletingAReservedClaimWithRetainLeavesItsDeviceReleased) {
  Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 1)}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-a").status());
  EXPECT_THAT(allocator_->DeleteClaim({"default", "vm1-nvme"}, false),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("in use by VM vm1")));
  ASSERT_OK(allocator_->DeleteClaim({"default", "vm1-nvme"}, true));
  // Retain: the device stays on vfio-pci; nothing goes back to the host, and
  // nobody else gets the deleted claim's data.
  ASSERT_OK_AND_ASSIGN(NodeAllocations alloc, allocator_->GetNodeAllocations("node-a"));
  EXPECT_THAT(alloc.claimed, IsEmpty());
  EXPECT_THAT(alloc.return_to_host, IsEmpty());
  ASSERT_OK_AND_ASSIGN(NodeView v, allocator_->GetNode("node-a"));
  EXPECT_THAT(v.released, ElementsAre(IsReleasedMark(Addr("0000:3b:00.0"),
                                                     NvmeDevice("0000:3b:00.0", 1).serial,
                                                     ClaimKey{"default", "vm1-nvme"})));
  EXPECT_THAT(allocator_->Bind(VmPod("vm2", "u2"), "node-a"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("released")));
}

TEST_F(ClaimsTest, DeletePolicyHandsTheDeviceBackUntilTheDriverDid) {
  AllocatorOptions o = TestOptions();
  o.template_reclaim_policy = ReclaimPolicy::kDelete;
  Reopen(o);
  Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 1), NvmeDevice("0000:5e:00.0", 2)}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-a").status());
  ASSERT_OK_AND_ASSIGN(NodeAllocations before, allocator_->GetNodeAllocations("node-a"));
  ASSERT_EQ(before.claimed.size(), 1u);
  EXPECT_EQ(before.claimed[0].claim.name, "vm1-nvme");
  EXPECT_EQ(before.claimed[0].reclaim_policy, ReclaimPolicy::kDelete);
  EXPECT_EQ(before.claimed[0].reserved_for->pod_uid, "u1");
  ASSERT_OK(allocator_->DeleteClaim({"default", "vm1-nvme"}, true));
  ASSERT_OK_AND_ASSIGN(NodeAllocations after, allocator_->GetNodeAllocations("node-a"));
  EXPECT_GT(after.version, before.version);
  EXPECT_THAT(after.return_to_host, ElementsAre(Addr("0000:3b:00.0")));
  // While the device is still on vfio-pci it stays on the list.
  Device on_vfio = NvmeDevice("0000:3b:00.0", 1);
  on_vfio.driver = "vfio-pci";
  Report(Inventory("node-a", {on_vfio, NvmeDevice("0000:5e:00.0", 2)}));
  EXPECT_THAT(allocator_->GetNodeAllocations("node-a")->return_to_host, ElementsAre(Addr("0000:3b:00.0")));
  // The driver gave it back to nvme and acknowledges it: done.
  NodeInventory back =
      Inventory("node-a", {NvmeDevice("0000:3b:00.0", 1), NvmeDevice("0000:5e:00.0", 2)});
  back.returned = {NvmeDevice("0000:3b:00.0", 1).serial};
  Report(back);
  EXPECT_THAT(allocator_->GetNodeAllocations("node-a")->return_to_host, IsEmpty());
}

TEST_F(ClaimsTest, InventoryValidationAndFiltering) {
  EXPECT_THAT(allocator_->ReplaceInventory(Inventory("Node_A", {})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("node:")));
  EXPECT_THAT(allocator_->ReplaceInventory(
                  Inventory("node-a", {NvmeDevice("0000:3b:00.0", 1), NvmeDevice("0000:3b:00.0", 2)})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("address 0000:3b:00.0 is listed twice")));
  Device bad_numa = NvmeDevice("0000:3b:00.0", 1, -5);
  EXPECT_THAT(allocator_->ReplaceInventory(Inventory("node-a", {bad_numa})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("devices[0].numaNode")));
  Device nic = NvmeDevice("0000:02:00.0", 9);
  nic.vendor_id = 0x8086;
  nic.device_id = 0x1572;
  Report(Inventory("node-a", {nic, NvmeDevice("0000:3b:00.0", 1)}));
  ASSERT_OK_AND_ASSIGN(NodeView v, allocator_->GetNode("node-a"));
  ASSERT_EQ(v.inventory.devices.size(), 1u);  // The NIC is no configured class.
  EXPECT_TRUE(v.reporting);
  EXPECT_THAT(allocator_->GetNode("node-z"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(ClaimsTest, HeartbeatsAreNotPersisted) {
  Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 1)}));
  const uint64_t revision = allocator_->revision();
  for (int i = 0; i < 10; ++i) {
    clock_.Advance(absl::Seconds(10));
    Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 1)}));
  }
  EXPECT_EQ(allocator_->revision(), revision);
  EXPECT_TRUE(allocator_->GetNode("node-a")->reporting);
}

TEST_F(ClaimsTest, StateAfterRecoveryEqualsStateBefore) {
  Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 1, 0), NvmeDevice("0000:5e:00.0", 2, 1)}));
  Report(Inventory("node-b", {NvmeDevice("0000:3b:00.0", 1)}));
  ASSERT_OK(allocator_->CreateClaim({"default", "data"}, Spec(kNvme, 1)).status());
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1", 2, {"data"}), "node-a").status());
  ASSERT_OK(allocator_->Bind(VmPod("vm2", "u2"), "node-b").status());
  ASSERT_OK(allocator_->Release({"default", "vm2-nvme"}, ""));
  ASSERT_OK(allocator_->Checkpoint());
  ASSERT_OK(allocator_->CreateClaim({"other", "later"}, Spec(kNvme, 1)).status());
  ASSERT_OK(allocator_->RemoveNode("node-b"));
  const std::vector<Claim> claims = allocator_->ListClaims("");
  const auto allocations = *allocator_->GetNodeAllocations("node-a");
  const uint64_t revision = allocator_->revision();
  RecoveryReport report;
  allocator_.reset();
  ASSERT_OK_AND_ASSIGN(allocator_, Allocator::Open(TestOptions(), &store_, &clock_, &report));
  EXPECT_EQ(report.snapshot_revision, revision - 2);
  EXPECT_EQ(report.records_replayed, 2u);
  EXPECT_EQ(allocator_->revision(), revision);
  EXPECT_EQ(allocator_->ListClaims(""), claims);
  EXPECT_EQ(dynamic_cast<AllocatorImpl*>(allocator_.get())->CheckInvariantsForTest(), "");
  EXPECT_EQ(allocator_->GetNodeAllocations("node-a")->claimed.size(), allocations.claimed.size());
  // After a restart no node is reporting until its driver reports again...
  EXPECT_FALSE(allocator_->GetNode("node-a")->reporting);
  EXPECT_EQ(Filter(VmPod("vm1", "u9", 2, {"data"}), {"node-a"}).nodes[0].reason,
            FilterReason::kNotReporting);
  // ...and then the VM is where it was.
  Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 1, 0), NvmeDevice("0000:5e:00.0", 2, 1)}));
  EXPECT_THAT(Fitting(VmPod("vm1", "u9", 2, {"data"}), {"node-b", "node-a"}), ElementsAre("node-a"));
}

// An allocator writing through a store that fails on command; the
// fixture's MemoryStore underneath holds what was written. Declared after
// `faulty_`, the allocator is destroyed first.
class FaultyStoreTest : public AllocatorFixture {
 protected:
  void SetUp() override {
    AllocatorFixture::SetUp();
    allocator_.reset();
    ASSERT_OK_AND_ASSIGN(allocator_on_faulty_,
                         Allocator::Open(TestOptions(), &faulty_, &clock_));
    ASSERT_OK(allocator_on_faulty_->ReplaceInventory(
        Inventory("node-a", {NvmeDevice("0000:3b:00.0", 1), NvmeDevice("0000:5e:00.0", 2)})));
  }

  FaultyStore faulty_{&store_};
  std::unique_ptr<Allocator> allocator_on_faulty_;
};

TEST_F(FaultyStoreTest, FailedSyncFailsTheAllocatorForGood) {
  Allocator* allocator = allocator_on_faulty_.get();
  faulty_.FailNextSync(absl::UnavailableError("fsync: Input/output error"));
  EXPECT_THAT(allocator->Bind(VmPod("vm1", "u1"), "node-a"),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("fsync: Input/output error"),
                             HasSubstr("must be restarted"))));
  EXPECT_THAT(allocator->Health(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(allocator->CreateClaim({"default", "x"}, Spec(kNvme, 1)),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(allocator->Checkpoint(), StatusIs(absl::StatusCode::kUnavailable));
}

// A snapshot the store could not write is written again by the next
// checkpoint, even with no change since; the allocator keeps working between.
TEST_F(FaultyStoreTest, FailedCheckpointIsRetriedAndStopsNothing) {
  Allocator* allocator = allocator_on_faulty_.get();
  faulty_.FailNextCheckpointWrite(absl::UnavailableError("snapshot: No space left on device"));
  EXPECT_THAT(allocator->Checkpoint(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("No space left")));
  EXPECT_OK(allocator->Health());
  ASSERT_OK(allocator->Bind(VmPod("vm1", "u1"), "node-a").status());
  EXPECT_EQ(faulty_.checkpoint_writes(), 0);
  ASSERT_OK(allocator->Checkpoint());
  EXPECT_EQ(faulty_.checkpoint_writes(), 1);
  // Written: nothing new, so nothing to write.
  ASSERT_OK(allocator->Checkpoint());
  EXPECT_EQ(faulty_.checkpoint_writes(), 1);

  faulty_.FailNextCheckpointWrite(absl::UnavailableError("snapshot: Input/output error"));
  ASSERT_OK(allocator->Release({"default", "vm1-nvme"}, ""));
  EXPECT_FALSE(allocator->Checkpoint().ok());
  ASSERT_OK(allocator->Checkpoint());  // Same revision as the failed one.
  EXPECT_EQ(faulty_.checkpoint_writes(), 2);
}

// A record the store refuses is not applied: the allocator answers with the
// store's error, changes nothing, and carries on.
TEST_F(FaultyStoreTest, RefusedAppendChangesNothing) {
  Allocator* allocator = allocator_on_faulty_.get();
  const uint64_t revision = allocator->revision();
  faulty_.FailNextAppend(absl::AbortedError("another writer got there first"));
  EXPECT_THAT(allocator->Bind(VmPod("vm1", "u1"), "node-a"),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("another writer")));
  EXPECT_EQ(allocator->revision(), revision);
  EXPECT_THAT(allocator->ListClaims(""), IsEmpty());
  EXPECT_EQ(allocator->Stats().devices_allocated, 0u);
  EXPECT_OK(allocator->Health());
  ASSERT_OK(allocator->Bind(VmPod("vm1", "u1"), "node-a").status());
  EXPECT_EQ(allocator->Stats().devices_allocated, 1u);
}

TEST_F(ClaimsTest, BadOptionsNameTheField) {
  AllocatorOptions none = TestOptions();
  none.device_classes.clear();
  EXPECT_THAT(Allocator::Open(none, &store_, &clock_),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("deviceClasses")));
  AllocatorOptions dup = TestOptions();
  dup.device_classes.push_back(dup.device_classes[0]);
  EXPECT_THAT(Allocator::Open(dup, &store_, &clock_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("deviceClasses[2].resourceName")));
  AllocatorOptions unqualified = TestOptions();
  unqualified.device_classes[0].resource_name = "nvme";
  EXPECT_THAT(Allocator::Open(unqualified, &store_, &clock_),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("qualified")));
  AllocatorOptions stale = TestOptions();
  stale.node_stale_after = absl::ZeroDuration();
  EXPECT_THAT(Allocator::Open(stale, &store_, &clock_),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nodeStaleAfter")));
}

TEST_F(ClaimsTest, StatsCountPhasesAndDevices) {
  Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 1), NvmeDevice("0000:5e:00.0", 2), [] {
                                Device d = NvmeDevice("0000:86:00.0", 3);
                                d.health = DeviceHealth::kUnhealthy;
                                return d;
                              }()}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-a").status());
  ASSERT_OK(allocator_->CreateClaim({"default", "p"}, Spec(kNvme, 1)).status());
  AllocatorStats s = allocator_->Stats();
  EXPECT_EQ(s.nodes, 1u);
  EXPECT_EQ(s.claims_bound, 1u);
  EXPECT_EQ(s.claims_pending, 1u);
  EXPECT_EQ(s.devices_allocated, 1u);
  EXPECT_EQ(s.devices_free, 1u);
  EXPECT_EQ(s.devices_unhealthy, 1u);
  clock_.Advance(absl::Minutes(5));
  EXPECT_EQ(allocator_->Stats().nodes_not_reporting, 1u);
}

}  // namespace
}  // namespace pdc::testing
