// Reclaim policies (docs/design.md §4.7): a device of a deleted claim holds
// that claim's data, so no other claim gets it until it is scrubbed (Delete:
// back on its host driver, healthy) or an administrator says so (Retain:
// Released, offered only to a claim that pins it).
#include <string>
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

constexpr char kDevA[] = "0000:3b:00.0";
constexpr char kDevB[] = "0000:5e:00.0";

Device OnDriver(std::string_view address, int group, std::string driver,
                DeviceHealth health = DeviceHealth::kHealthy, std::string serial = "") {
  Device d = NvmeDevice(address, group, -1, std::move(serial));
  d.driver = std::move(driver);
  d.health = health;
  return d;
}

ClaimSpec PinnedTo(std::string_view address) {
  ClaimSpec s = Spec(kNvme, 1);
  s.node = "node-a";
  s.address = Addr(address);
  return s;
}

ClaimSpec PinnedToSerial(std::string serial) {
  ClaimSpec s = Spec(kNvme, 1);
  s.serial = std::move(serial);
  return s;
}

class ReclaimTest : public AllocatorFixture {
 protected:
  // vm1 gets kDevA on node-a (the only device), its claim deleted with `policy`.
  void BindAndDelete(ReclaimPolicy policy, bool force = false) {
    AllocatorOptions o = TestOptions();
    o.template_reclaim_policy = policy;
    Reopen(o);
    Report(Inventory("node-a", {OnDriver(kDevA, 1, "nvme")}));
    ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-a").status());
    if (!force) {
      ASSERT_OK(allocator_->Release({"default", "vm1-nvme"}, ""));
    }
    ASSERT_OK(allocator_->DeleteClaim({"default", "vm1-nvme"}, force));
  }

  // What vm2's pod, asking for one NVMe device through `claims` (none: a
  // template claim), gets from the filter on node-a, and the bind's status.
  struct Attempt {
    FilterResult filter;
    absl::Status bind;
  };
  Attempt Try(std::string pod_uid, std::vector<std::string> claims = {}) {
    SchedulingRequest pod = VmPod("vm2", std::move(pod_uid), 1, std::move(claims));
    Attempt a{Filter(pod, {"node-a"}), allocator_->Bind(pod, "node-a").status()};
    return a;
  }

  void ExpectInvariants() {
    EXPECT_EQ(dynamic_cast<AllocatorImpl*>(allocator_.get())->CheckInvariantsForTest(), "");
  }
};

// --- Delete: the device goes back to its host driver, and nobody gets it
// until the node reports it there, healthy (erased). ------------------------

TEST_F(ReclaimTest, DeleteNeverOffersAReturningDevice) {
  BindAndDelete(ReclaimPolicy::kDelete);
  ASSERT_OK(allocator_->CreateClaim({"default", "by-address"}, PinnedTo(kDevA)).status());
  ASSERT_OK(allocator_->CreateClaim({"default", "by-serial"},
                                    PinnedToSerial(NvmeDevice(kDevA, 1).serial))
                .status());
  struct Case {
    std::string name;
    std::vector<std::string> claims;
    std::string message;
  };
  const Case cases[] = {
      {"template claim", {}, "1 device waiting to be erased and handed back to its host driver"},
      {"pinned by address", {"by-address"}, "is waiting to be erased and handed back"},
      {"pinned by serial", {"by-serial"}, "is waiting to be erased and handed back"},
  };
  for (const Case& c : cases) {
    Attempt a = Try(c.claims.empty() ? "u-template" : "u-" + c.claims[0], c.claims);
    EXPECT_EQ(a.filter.nodes[0].verdict, Verdict::kUnresolvable) << c.name;
    EXPECT_EQ(a.filter.nodes[0].reason, FilterReason::kInsufficient) << c.name;
    EXPECT_THAT(a.filter.MessageFor(0), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(a.bind, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(c.message)))
        << c.name;
    EXPECT_THAT(allocator_->Score(VmPod("vm2", "u9", 1, c.claims), {"node-a"}), ElementsAre(0))
        << c.name;
  }
  EXPECT_THAT(allocator_->GetNodeAllocations("node-a")->return_to_host, ElementsAre(Addr(kDevA)));
  AllocatorStats s = allocator_->Stats();
  EXPECT_EQ(s.devices_returning, 1u);
  EXPECT_EQ(s.devices_free, 0u);
  ExpectInvariants();
}

// Only the node's acknowledgement of that drive's erase frees it: a drive
// back on its host driver by a reboot, a lost journal or a manual rebind is
// healthy there but unerased. The unacknowledged steps fail on a version
// that freed a device once it was healthy on a host driver.
TEST_F(ReclaimTest, DeleteFreesTheDeviceOnlyWhenTheNodeAcknowledgesThatDrive) {
  BindAndDelete(ReclaimPolicy::kDelete);
  const std::string serial = NvmeDevice(kDevA, 1).serial;
  struct Step {
    std::string what;
    Device reported;
    std::vector<std::string> returned;
    bool still_returning;
  };
  const Step steps[] = {
      {"still on vfio-pci", OnDriver(kDevA, 1, "vfio-pci"), {}, true},
      {"on no driver", OnDriver(kDevA, 1, ""), {}, true},
      {"back on nvme, erase running", OnDriver(kDevA, 1, "nvme", DeviceHealth::kUnhealthy), {}, true},
      {"back on nvme by a reboot, not acknowledged", OnDriver(kDevA, 1, "nvme"), {}, true},
      {"acknowledged, but on vfio-pci", OnDriver(kDevA, 1, "vfio-pci"), {serial}, true},
      {"another drive acknowledged", OnDriver(kDevA, 1, "nvme"), {"SN-other"}, true},
      {"another drive at the address, its own serial acknowledged",
       OnDriver(kDevA, 1, "nvme", DeviceHealth::kHealthy, "SN-swapped"), {serial}, true},
      {"back on nvme, its erase acknowledged", OnDriver(kDevA, 1, "nvme"), {serial}, false},
  };
  for (const Step& step : steps) {
    NodeInventory inv = Inventory("node-a", {step.reported});
    inv.returned = step.returned;
    Report(inv);
    const bool returning = !allocator_->GetNodeAllocations("node-a")->return_to_host.empty();
    EXPECT_EQ(returning, step.still_returning) << step.what;
    ExpectInvariants();
    if (step.still_returning) {
      EXPECT_EQ(Filter(VmPod("vm2", "u2"), {"node-a"}).nodes[0].verdict, Verdict::kUnresolvable)
          << step.what;
    }
  }
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(VmPod("vm2", "u2"), "node-a"));
  EXPECT_THAT(b.claims[0].devices, ElementsAre(Addr(kDevA)));
}

// A device the node does not report when its claim is deleted, or that
// vanishes before it was erased, still holds the claim's data: it stays on
// the return list until it is reported back on its host driver, healthy.
TEST_F(ReclaimTest, DeleteKeepsAnAbsentDeviceUntilItIsBackErased) {
  AllocatorOptions o = TestOptions();
  o.template_reclaim_policy = ReclaimPolicy::kDelete;
  Reopen(o);
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "nvme")}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-a").status());
  ASSERT_OK(allocator_->Release({"default", "vm1-nvme"}, ""));
  Report(Inventory("node-a", {}));  // The drive went away (hot-unplugged, a bad slot).
  ASSERT_OK(allocator_->DeleteClaim({"default", "vm1-nvme"}, false));
  EXPECT_THAT(allocator_->GetNodeAllocations("node-a")->return_to_host, ElementsAre(Addr(kDevA)));
  Report(Inventory("node-a", {}));
  EXPECT_THAT(allocator_->GetNodeAllocations("node-a")->return_to_host, ElementsAre(Addr(kDevA)));
  // Back, still on vfio-pci with the data: not offered.
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "vfio-pci")}));
  EXPECT_EQ(Filter(VmPod("vm2", "u2"), {"node-a"}).nodes[0].verdict, Verdict::kUnresolvable);
  ExpectInvariants();
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "nvme")}));
  EXPECT_THAT(allocator_->GetNodeAllocations("node-a")->return_to_host, ElementsAre(Addr(kDevA)));
  NodeInventory erased = Inventory("node-a", {OnDriver(kDevA, 1, "nvme")});
  erased.returned = {NvmeDevice(kDevA, 1).serial};
  Report(erased);
  EXPECT_THAT(allocator_->GetNodeAllocations("node-a")->return_to_host, IsEmpty());
  // The acknowledgement is consumed, not stored.
  ASSERT_OK_AND_ASSIGN(NodeView v, allocator_->GetNode("node-a"));
  EXPECT_THAT(v.inventory.returned, IsEmpty());
  EXPECT_OK(allocator_->Bind(VmPod("vm2", "u2"), "node-a").status());
}

TEST_F(ReclaimTest, RemovingTheNodeKeepsItsReturningDevices) {
  BindAndDelete(ReclaimPolicy::kDelete);
  ASSERT_OK(allocator_->RemoveNode("node-a"));
  EXPECT_THAT(allocator_->GetNodeAllocations("node-a")->return_to_host, ElementsAre(Addr(kDevA)));
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "vfio-pci")}));
  EXPECT_EQ(Filter(VmPod("vm2", "u2"), {"node-a"}).nodes[0].verdict, Verdict::kUnresolvable);
  ExpectInvariants();
}

// --- Retain: Released, only for a pin, until an administrator releases it. --

// Deleted after its VM released it, or force-deleted while reserved.
class RetainDeleteTest : public ReclaimTest, public ::testing::WithParamInterface<bool> {};
INSTANTIATE_TEST_SUITE_P(Force, RetainDeleteTest, ::testing::Bool());

TEST_P(RetainDeleteTest, RetainLeavesTheDeviceReleasedAndOffersItToNoOtherClaim) {
  {
    const bool force = GetParam();
    BindAndDelete(ReclaimPolicy::kRetain, force);
    ASSERT_OK_AND_ASSIGN(NodeView v, allocator_->GetNode("node-a"));
    ASSERT_EQ(v.released.size(), 1u);
    EXPECT_EQ(v.released[0].address, Addr(kDevA));
    EXPECT_EQ(v.released[0].serial, NvmeDevice(kDevA, 1).serial);
    EXPECT_EQ(v.released[0].claim, (ClaimKey{"default", "vm1-nvme"}));
    EXPECT_FALSE(v.released[0].claim_uid.empty());  // The deleted claim's UID.
    EXPECT_THAT(v.return_to_host, IsEmpty());
    EXPECT_THAT(allocator_->GetNodeAllocations("node-a")->return_to_host, IsEmpty());
    Attempt a = Try("u2");
    EXPECT_EQ(a.filter.nodes[0].verdict, Verdict::kUnresolvable);
    EXPECT_EQ(a.filter.MessageFor(0),
              "insufficient free devices.kubevirt.io/nvme: want 1, free 0; 1 device released by "
              "a deleted claim (Retain): only a claim of that claim's namespace may pin it back; "
              "an administrator may release it or hand it over with pdcctl");
    EXPECT_THAT(a.bind, StatusIs(absl::StatusCode::kFailedPrecondition,
                                 HasSubstr("1 device released by a deleted claim")));
    EXPECT_THAT(allocator_->Score(VmPod("vm2", "u2"), {"node-a"}), ElementsAre(0));
    AllocatorStats s = allocator_->Stats();
    EXPECT_EQ(s.devices_released, 1u);
    EXPECT_EQ(s.devices_free, 0u);
    EXPECT_EQ(s.devices_allocated, 0u);
    ExpectInvariants();
    // A second Released device makes the message plural.
    Report(Inventory("node-a", {OnDriver(kDevA, 1, "vfio-pci", DeviceHealth::kHealthy,
                                         NvmeDevice(kDevA, 1).serial),
                                OnDriver(kDevB, 2, "nvme")}));
    ASSERT_OK(allocator_->Bind(VmPod("vm3", "u3"), "node-a").status());
    ASSERT_OK(allocator_->DeleteClaim({"default", "vm3-nvme"}, true));
    EXPECT_THAT(Filter(VmPod("vm2", "u4"), {"node-a"}).MessageFor(0),
                HasSubstr("free 0; 2 devices released by deleted claims (Retain): only a claim "
                          "of the deleted claim's namespace may pin one back"));
  }
}

// Pinned by address (true) or by serial (false).
class PinReleasedTest : public ReclaimTest, public ::testing::WithParamInterface<bool> {};
INSTANTIATE_TEST_SUITE_P(ByAddress, PinReleasedTest, ::testing::Bool());

TEST_P(PinReleasedTest, AClaimPinnedToAReleasedDeviceTakesIt) {
  {
    BindAndDelete(ReclaimPolicy::kRetain);
    const ClaimSpec spec = GetParam() ? PinnedTo(kDevA) : PinnedToSerial(NvmeDevice(kDevA, 1).serial);
    ASSERT_OK(allocator_->CreateClaim({"default", "restore"}, spec).status());
    Attempt a = Try("u2", {"restore"});
    EXPECT_EQ(a.filter.nodes[0].verdict, Verdict::kFits);
    ASSERT_OK(a.bind);
    EXPECT_THAT(DevicesOf({"default", "restore"}), ElementsAre(Addr(kDevA)));
    EXPECT_THAT(allocator_->GetNode("node-a")->released, IsEmpty());
    EXPECT_EQ(allocator_->Stats().devices_released, 0u);
    ExpectInvariants();
  }
}

// A PersistentVolume's claimRef: a Released device goes back only to a claim
// of the namespace its data is of (any name there); another namespace gets a
// refusal that names neither the deleted claim nor its namespace, until an
// administrator hands the device over.
TEST_P(PinReleasedTest, OnlyTheDeletedClaimsNamespaceMayPinItBack) {
  BindAndDelete(ReclaimPolicy::kRetain);
  const ClaimSpec spec = GetParam() ? PinnedTo(kDevA) : PinnedToSerial(NvmeDevice(kDevA, 1).serial);
  ASSERT_OK(allocator_->CreateClaim({"tenant-b", "steal"}, spec).status());
  SchedulingRequest thief = VmPod("vm-b", "ub1", 1, {"steal"}, "tenant-b");
  const FilterResult f = Filter(thief, {"node-a"});
  EXPECT_EQ(f.nodes[0].verdict, Verdict::kUnresolvable);
  EXPECT_THAT(f.MessageFor(0), HasSubstr("is Released with the data of a deleted claim of "
                                         "another namespace; only a claim of that namespace "
                                         "may pin it back"));
  EXPECT_THAT(f.MessageFor(0), ::testing::Not(HasSubstr("default")));
  EXPECT_THAT(f.MessageFor(0), ::testing::Not(HasSubstr("vm1")));
  EXPECT_THAT(allocator_->Bind(thief, "node-a").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("another namespace")));
  EXPECT_EQ(allocator_->GetNode("node-a")->released.size(), 1u);
  ExpectInvariants();

  // The administrator hands it over: tenant-b may pin it, default no longer.
  EXPECT_THAT(allocator_->HandOverDevice("node-a", Addr(kDevA), {"tenant-b", ""}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("namespace/name")));
  EXPECT_THAT(allocator_->HandOverDevice("node-a", Addr(kDevB), {"tenant-b", "steal"}),
              StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(allocator_->HandOverDevice("node-a", Addr(kDevA), {"tenant-b", "steal"}));
  ASSERT_OK_AND_ASSIGN(NodeView v, allocator_->GetNode("node-a"));
  ASSERT_EQ(v.released.size(), 1u);
  EXPECT_EQ(v.released[0].claim, (ClaimKey{"tenant-b", "steal"}));
  EXPECT_EQ(v.released[0].claim_uid, "");
  ASSERT_OK(allocator_->CreateClaim({"default", "restore"}, spec).status());
  EXPECT_EQ(Try("u2", {"restore"}).filter.nodes[0].verdict, Verdict::kUnresolvable);
  EXPECT_EQ(Filter(thief, {"node-a"}).nodes[0].verdict, Verdict::kFits);
  ASSERT_OK(allocator_->Bind(thief, "node-a").status());
  EXPECT_THAT(DevicesOf({"tenant-b", "steal"}), ElementsAre(Addr(kDevA)));
  ExpectInvariants();
}

TEST_F(ReclaimTest, AnotherNamespacesReleasedNeighbourIsNotNamed) {
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "nvme"), OnDriver(kDevB, 1, "nvme")}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1", 2), "node-a").status());
  ASSERT_OK(allocator_->DeleteClaim({"default", "vm1-nvme"}, true));
  ASSERT_OK(allocator_->HandOverDevice("node-a", Addr(kDevA), {"tenant-b", "restore"}));
  ASSERT_OK(allocator_->CreateClaim({"tenant-b", "restore"}, PinnedTo(kDevA)).status());
  const std::string message =
      Filter(VmPod("vm-b", "ub1", 1, {"restore"}, "tenant-b"), {"node-a"}).MessageFor(0);
  EXPECT_THAT(message, HasSubstr("shares its IOMMU group with a Released device of another "
                                 "namespace"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr(kDevB)));
}

TEST_F(ReclaimTest, UndoingAPinnedBindMakesTheDeviceReleasedAgain) {
  BindAndDelete(ReclaimPolicy::kRetain);
  ASSERT_OK(allocator_->CreateClaim({"default", "restore"}, PinnedTo(kDevA)).status());
  ASSERT_OK_AND_ASSIGN(BindOutcome b,
                       allocator_->Bind(VmPod("vm2", "u2", 1, {"restore"}), "node-a"));
  ASSERT_EQ(b.took_released.size(), 1u);
  EXPECT_THAT(allocator_->GetNode("node-a")->released, IsEmpty());
  ASSERT_OK(allocator_->Undo(b));
  EXPECT_THAT(allocator_->GetNode("node-a")->released, ElementsAre(b.took_released[0]));
  EXPECT_EQ(Filter(VmPod("vm3", "u3"), {"node-a"}).nodes[0].verdict, Verdict::kUnresolvable);
  ASSERT_OK(allocator_->Undo(b));  // Idempotent.
  EXPECT_EQ(allocator_->GetNode("node-a")->released.size(), 1u);
  ExpectInvariants();
}

TEST_F(ReclaimTest, AnAdministratorReleaseFreesTheDevice) {
  BindAndDelete(ReclaimPolicy::kRetain);
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "vfio-pci"), OnDriver(kDevB, 2, "nvme")}));
  struct Case {
    std::string node;
    std::string address;
    absl::StatusCode code;
    std::string message;
  };
  const Case errors[] = {
      {"node-z", kDevA, absl::StatusCode::kNotFound, "node node-z is not known"},
      {"node-a", kDevB, absl::StatusCode::kFailedPrecondition,
       "device 0000:5e:00.0 on node node-a is not Released (it is free)"},
      {"node-a", "0000:af:00.0", absl::StatusCode::kNotFound,
       "node node-a has no device 0000:af:00.0 and no Released mark for it"},
  };
  for (const Case& c : errors) {
    EXPECT_THAT(allocator_->ReleaseDevice(c.node, Addr(c.address)),
                StatusIs(c.code, HasSubstr(c.message)))
        << c.node << " " << c.address;
  }
  ASSERT_OK(allocator_->Bind(VmPod("vm3", "u3"), "node-a").status());  // Takes kDevB.
  EXPECT_THAT(allocator_->ReleaseDevice("node-a", Addr(kDevB)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("is not Released (it is held by claim default/vm3-nvme)")));
  const uint64_t before = allocator_->GetNodeAllocations("node-a")->version;
  ASSERT_OK(allocator_->ReleaseDevice("node-a", Addr(kDevA)));
  EXPECT_GT(allocator_->GetNodeAllocations("node-a")->version, before);
  EXPECT_THAT(allocator_->GetNode("node-a")->released, IsEmpty());
  EXPECT_THAT(allocator_->ReleaseDevice("node-a", Addr(kDevA)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(VmPod("vm2", "u2"), "node-a"));
  EXPECT_THAT(b.claims[0].devices, ElementsAre(Addr(kDevA)));
  ExpectInvariants();
}

// An erase that will not finish: the administrator ends the wait, the
// device stays out of the free pool (Released, no claim may pin it) until
// the administrator releases it or hands it over.
TEST_F(ReclaimTest, AnAbandonedEraseLeavesTheDeviceHeldForAnAdministrator) {
  BindAndDelete(ReclaimPolicy::kDelete);
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "vfio-pci", DeviceHealth::kUnhealthy,
                                       NvmeDevice(kDevA, 1).serial),
                              OnDriver(kDevB, 2, "nvme")}));
  EXPECT_THAT(allocator_->ReleaseDevice("node-a", Addr(kDevA)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("abandon-erase")));
  struct Case {
    std::string node;
    std::string address;
    absl::StatusCode code;
    std::string message;
  };
  const Case errors[] = {
      {"node-z", kDevA, absl::StatusCode::kNotFound, "node node-z is not known"},
      {"node-a", kDevB, absl::StatusCode::kFailedPrecondition,
       "is not waiting to be erased and returned to its host driver (it is free)"},
      {"node-a", "0000:af:00.0", absl::StatusCode::kNotFound, "waiting to be erased"},
  };
  for (const Case& c : errors) {
    EXPECT_THAT(allocator_->AbandonErase(c.node, Addr(c.address)),
                StatusIs(c.code, HasSubstr(c.message)))
        << c.node << " " << c.address;
  }
  ASSERT_OK(allocator_->AbandonErase("node-a", Addr(kDevA)));
  EXPECT_THAT(allocator_->GetNodeAllocations("node-a")->return_to_host, IsEmpty());
  ASSERT_OK_AND_ASSIGN(NodeView v, allocator_->GetNode("node-a"));
  ASSERT_EQ(v.released.size(), 1u);
  EXPECT_EQ(v.released[0].claim, ClaimKey{});
  EXPECT_EQ(v.released[0].serial, NvmeDevice(kDevA, 1).serial);
  EXPECT_THAT(allocator_->AbandonErase("node-a", Addr(kDevA)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("(it is Released)")));
  // Healthy again: still held, for no claim of any namespace.
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "vfio-pci", DeviceHealth::kHealthy,
                                       NvmeDevice(kDevA, 1).serial)}));
  ASSERT_OK(allocator_->CreateClaim({"default", "restore"}, PinnedTo(kDevA)).status());
  Attempt a = Try("u2", {"restore"});
  EXPECT_THAT(a.filter.MessageFor(0), HasSubstr("erase that was abandoned"));
  EXPECT_THAT(a.bind, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Filter(VmPod("vm3", "u3"), {"node-a"}).nodes[0].verdict, Verdict::kUnresolvable);
  ExpectInvariants();
  // Survives a restart; then the administrator decides.
  Reopen();
  EXPECT_EQ(allocator_->GetNode("node-a")->released.size(), 1u);
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "vfio-pci", DeviceHealth::kHealthy,
                                       NvmeDevice(kDevA, 1).serial)}));
  ASSERT_OK(allocator_->HandOverDevice("node-a", Addr(kDevA), {"default", "restore"}));
  ASSERT_OK(allocator_->Bind(VmPod("vm2", "u4", 1, {"restore"}), "node-a").status());
  EXPECT_THAT(DevicesOf({"default", "restore"}), ElementsAre(Addr(kDevA)));
  ExpectInvariants();
}

// A claim the allocator never took up (withheld at recovery) is deleted: its
// reclaim policy applies to the devices only it named; the devices another
// claim also named stay held for an administrator.
TEST_F(ReclaimTest, AWithheldClaimsDeletionAppliesItsReclaimPolicy) {
  for (ReclaimPolicy policy : {ReclaimPolicy::kRetain, ReclaimPolicy::kDelete}) {
    SCOPED_TRACE(ToString(policy));
    Reopen();
    Report(Inventory("node-a", {OnDriver(kDevA, 1, "vfio-pci", DeviceHealth::kHealthy, "SN-A"),
                                OnDriver(kDevB, 2, "vfio-pci", DeviceHealth::kHealthy, "SN-B")}));
    ASSERT_OK(allocator_->CreateClaim({"default", "taken"}, Spec(kNvme, 1)).status());
    EXPECT_THAT(allocator_->ReclaimWithheld({"default", "taken"}, "u", "node-a",
                                            {{Addr(kDevA), "SN-A"}}, {}, policy),
                StatusIs(absl::StatusCode::kFailedPrecondition));
    EXPECT_THAT(allocator_->ReclaimWithheld({"default", "gone"}, "u", "node-z",
                                            {{Addr(kDevA), "SN-A"}}, {}, policy),
                StatusIs(absl::StatusCode::kNotFound));
    ASSERT_OK(allocator_->ReclaimWithheld({"default", "gone"}, "uid-gone", "node-a",
                                          {{Addr(kDevA), "SN-A"}}, {Addr(kDevB)}, policy));
    Reopen();  // Durable.
    Report(Inventory("node-a", {OnDriver(kDevA, 1, "vfio-pci", DeviceHealth::kHealthy, "SN-A"),
                                OnDriver(kDevB, 2, "vfio-pci", DeviceHealth::kHealthy, "SN-B")}));
    ASSERT_OK_AND_ASSIGN(NodeView v, allocator_->GetNode("node-a"));
    if (policy == ReclaimPolicy::kDelete) {
      EXPECT_THAT(v.return_to_host, ElementsAre(Addr(kDevA)));
      ASSERT_EQ(v.released.size(), 1u);
    } else {
      EXPECT_THAT(v.return_to_host, IsEmpty());
      ASSERT_EQ(v.released.size(), 2u);
      EXPECT_EQ(v.released[0].address, Addr(kDevA));
      EXPECT_EQ(v.released[0].claim, (ClaimKey{"default", "gone"}));
      EXPECT_EQ(v.released[0].claim_uid, "uid-gone");
    }
    EXPECT_EQ(v.released.back().address, Addr(kDevB));
    EXPECT_EQ(v.released.back().claim, ClaimKey{});  // Shared: an administrator decides.
    EXPECT_EQ(Filter(VmPod("vm2", "u2"), {"node-a"}).nodes[0].verdict, Verdict::kUnresolvable);
    ExpectInvariants();
    ASSERT_OK(allocator_->DeleteClaim({"default", "taken"}, true));
  }
}

// The one spec field a user may change on a bound claim: the value at
// deletion counts (a Delete -> Retain edit keeps the data).
TEST_F(ReclaimTest, TheReclaimPolicyAtDeletionCounts) {
  AllocatorOptions o = TestOptions();
  o.template_reclaim_policy = ReclaimPolicy::kDelete;
  Reopen(o);
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "nvme")}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-a").status());
  EXPECT_THAT(allocator_->SetReclaimPolicy({"default", "nope"}, ReclaimPolicy::kRetain),
              StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(allocator_->SetReclaimPolicy({"default", "vm1-nvme"}, ReclaimPolicy::kRetain));
  Reopen(o);  // Durable.
  EXPECT_EQ(allocator_->GetClaim({"default", "vm1-nvme"})->spec.reclaim_policy,
            ReclaimPolicy::kRetain);
  ASSERT_OK(allocator_->DeleteClaim({"default", "vm1-nvme"}, true));
  ASSERT_OK_AND_ASSIGN(NodeView v, allocator_->GetNode("node-a"));
  EXPECT_THAT(v.return_to_host, IsEmpty());
  EXPECT_EQ(v.released.size(), 1u);
  ExpectInvariants();
}

TEST_F(ReclaimTest, TheReleasedMarkFollowsTheDriveNotTheAddress) {
  BindAndDelete(ReclaimPolicy::kRetain);
  const std::string serial = NvmeDevice(kDevA, 1).serial;
  struct Step {
    std::string what;
    std::vector<Device> reported;
    bool still_released;
  };
  const Step steps[] = {
      {"the drive vanished", {}, true},
      {"the same drive is back", {OnDriver(kDevA, 1, "vfio-pci", DeviceHealth::kHealthy, serial)},
       true},
      {"back on nvme by hand", {OnDriver(kDevA, 1, "nvme", DeviceHealth::kHealthy, serial)}, true},
      {"no serial readable", {OnDriver(kDevA, 1, "vfio-pci")}, true},
      {"another drive at the address",
       {OnDriver(kDevA, 1, "nvme", DeviceHealth::kHealthy, "SN-NEW")},
       false},
  };
  for (const Step& step : steps) {
    std::vector<Device> reported = step.reported;
    if (step.what == "no serial readable") reported[0].serial.clear();
    Report(Inventory("node-a", reported));
    EXPECT_EQ(allocator_->GetNode("node-a")->released.size(), step.still_released ? 1u : 0u)
        << step.what;
    ExpectInvariants();
  }
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(VmPod("vm2", "u2"), "node-a"));
  EXPECT_THAT(b.claims[0].devices, ElementsAre(Addr(kDevA)));
}

TEST_F(ReclaimTest, ReleasedSurvivesRestartsFromSnapshotAndLog) {
  BindAndDelete(ReclaimPolicy::kRetain);
  ASSERT_OK(allocator_->Checkpoint());  // In the snapshot ...
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "vfio-pci", DeviceHealth::kHealthy,
                                       NvmeDevice(kDevA, 1).serial),
                              OnDriver(kDevB, 2, "nvme")}));
  ASSERT_OK(allocator_->Bind(VmPod("vm3", "u3"), "node-a").status());
  ASSERT_OK(allocator_->DeleteClaim({"default", "vm3-nvme"}, true));  // ... and in the log.
  ASSERT_OK_AND_ASSIGN(NodeView before, allocator_->GetNode("node-a"));
  ASSERT_EQ(before.released.size(), 2u);
  Reopen();
  ASSERT_OK_AND_ASSIGN(NodeView after, allocator_->GetNode("node-a"));
  EXPECT_EQ(after.released, before.released);
  clock_.Advance(absl::Seconds(1));
  Report(before.inventory);
  EXPECT_EQ(Filter(VmPod("vm2", "u2"), {"node-a"}).nodes[0].verdict, Verdict::kUnresolvable);
  ExpectInvariants();
  ASSERT_OK(allocator_->Checkpoint());
  Reopen();
  EXPECT_EQ(allocator_->GetNode("node-a")->released, before.released);
}

TEST_F(ReclaimTest, RemovingTheNodeKeepsItsReleasedMarks) {
  BindAndDelete(ReclaimPolicy::kRetain);
  ASSERT_OK(allocator_->RemoveNode("node-a"));
  ASSERT_OK_AND_ASSIGN(NodeView v, allocator_->GetNode("node-a"));
  EXPECT_THAT(v.inventory.devices, IsEmpty());
  EXPECT_EQ(v.released.size(), 1u);
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "vfio-pci", DeviceHealth::kHealthy,
                                       NvmeDevice(kDevA, 1).serial)}));
  EXPECT_EQ(Filter(VmPod("vm2", "u2"), {"node-a"}).nodes[0].verdict, Verdict::kUnresolvable);
  ExpectInvariants();
}

TEST_F(ReclaimTest, AClaimLostWithItsNodeLeavesItsDevicesReleased) {
  AllocatorOptions o = TestOptions();
  Reopen(o);
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "nvme")}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1"), "node-a").status());
  ASSERT_OK(allocator_->RemoveNode("node-a"));
  EXPECT_THAT(allocator_->GetNode("node-a"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(allocator_->DeleteClaim({"default", "vm1-nvme"}, true));
  ASSERT_OK_AND_ASSIGN(NodeView v, allocator_->GetNode("node-a"));
  EXPECT_EQ(v.released.size(), 1u);
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "vfio-pci", DeviceHealth::kHealthy,
                                       NvmeDevice(kDevA, 1).serial)}));
  EXPECT_EQ(Filter(VmPod("vm2", "u2"), {"node-a"}).nodes[0].verdict, Verdict::kUnresolvable);
  ExpectInvariants();
}

TEST_F(ReclaimTest, APinNeverTakesAReleasedNeighbourInItsIommuGroup) {
  Report(Inventory("node-a", {OnDriver(kDevA, 1, "nvme"), OnDriver(kDevB, 1, "nvme")}));
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1", 2), "node-a").status());
  ASSERT_OK(allocator_->DeleteClaim({"default", "vm1-nvme"}, true));
  ASSERT_EQ(allocator_->GetNode("node-a")->released.size(), 2u);
  ASSERT_OK(allocator_->CreateClaim({"default", "restore"}, PinnedTo(kDevA)).status());
  Attempt a = Try("u2", {"restore"});
  EXPECT_THAT(a.filter.MessageFor(0), HasSubstr("shares its IOMMU group with 0000:5e:00.0, "
                                                "which is Released"));
  EXPECT_THAT(a.bind, StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(allocator_->ReleaseDevice("node-a", Addr(kDevB)));
  // The group goes whole: the pinned device to its claim, its neighbour to
  // the pod's template claim.
  SchedulingRequest pod = VmPod("vm2", "u3", 2, {"restore"});
  ASSERT_OK(allocator_->Bind(pod, "node-a").status());
  EXPECT_THAT(DevicesOf({"default", "restore"}), ElementsAre(Addr(kDevA)));
  EXPECT_THAT(DevicesOf({"default", "vm2-nvme"}), ElementsAre(Addr(kDevB)));
  ExpectInvariants();
}

}  // namespace
}  // namespace pdc::testing
