// A VM is its UID when the caller knows it (Kubernetes mode, docs/design.md
// §4.5): a VM deleted and re-created under the same name takes over neither
// the old VM's reservations nor its template claims, and a VM that is gone
// releases what it held.
#include <string>
#include <vector>

#include "allocator/allocator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allocator/allocator_test_util.h"

namespace pdc::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::vector<std::string> kTwoNodes = {"node-a", "node-b"};

// A pod of VM `vm` with UID `vm_uid` ("" = unknown, standalone mode).
SchedulingRequest UidPod(std::string vm, std::string vm_uid, std::string pod_uid,
                         std::vector<std::string> claims = {}) {
  SchedulingRequest r = VmPod(std::move(vm), std::move(pod_uid), 1, std::move(claims));
  r.vm_uid = std::move(vm_uid);
  return r;
}

TEST(ReservedBySameVmTest, SameNamespaceNameAndUidWhenBothKnown) {
  struct Case {
    std::string name;
    std::optional<Reservation> reserved_for;
    std::string ns, vm, vm_uid;
    bool same;
  };
  const Reservation held{"vm1", "virt-launcher-vm1-a", "pod-1", "uid-A"};
  const Reservation held_no_uid{"vm1", "virt-launcher-vm1-a", "pod-1"};
  const std::vector<Case> cases = {
      {"same uid", held, "default", "vm1", "uid-A", true},
      {"request without uid", held, "default", "vm1", "", true},
      {"reservation without uid", held_no_uid, "default", "vm1", "uid-B", true},
      {"neither has a uid", held_no_uid, "default", "vm1", "", true},
      {"same name, other uid", held, "default", "vm1", "uid-B", false},
      {"other name, same uid", held, "default", "vm2", "uid-A", false},
      {"other namespace", held, "other", "vm1", "uid-A", false},
      {"not reserved", std::nullopt, "default", "vm1", "uid-A", false},
  };
  for (const Case& c : cases) {
    Claim claim;
    claim.key = {"default", "data"};
    claim.status.reserved_for = c.reserved_for;
    EXPECT_EQ(ReservedBySameVm(claim, c.ns, c.vm, c.vm_uid), c.same) << c.name;
  }
}

class VmUidTest : public AllocatorFixture {
 protected:
  void SetUp() override {
    AllocatorFixture::SetUp();
    Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 10), NvmeDevice("0000:5e:00.0", 11)}));
    Report(Inventory("node-b", {NvmeDevice("0000:3b:00.0", 20), NvmeDevice("0000:5e:00.0", 21)}));
  }

  Claim Get(const ClaimKey& key) {
    absl::StatusOr<Claim> c = allocator_->GetClaim(key);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : Claim{};
  }
};

TEST_F(VmUidTest, BindRecordsTheVmUid) {
  ASSERT_OK(allocator_->Bind(UidPod("vm1", "uid-A", "pod-1"), "node-a").status());
  const Claim c = Get({"default", "vm1-nvme"});
  EXPECT_EQ(c.spec.owner_vm, "vm1");
  EXPECT_EQ(c.spec.owner_vm_uid, "uid-A");
  ASSERT_TRUE(c.status.reserved_for.has_value());
  EXPECT_EQ(c.status.reserved_for->vm_uid, "uid-A");
  // And it survives a restart (the record keeps it).
  Reopen();
  EXPECT_EQ(Get({"default", "vm1-nvme"}), c);
}

// Who may take over a named claim reserved by VM vm1 (uid-A) on node-a.
TEST_F(VmUidTest, OnlyTheSameVmTakesAReservationOver) {
  ASSERT_OK(allocator_->CreateClaim({"default", "data"}, Spec(kNvme, 1)).status());
  ASSERT_OK(allocator_->Bind(UidPod("vm1", "uid-A", "pod-1", {"data"}), "node-a").status());
  struct Case {
    std::string name;
    SchedulingRequest pod;
    bool takes_over;
    std::string message;  // When it does not.
  };
  const std::vector<Case> cases = {
      {"new pod of the same VM", UidPod("vm1", "uid-A", "pod-2", {"data"}), true, ""},
      {"pod whose VM uid is unknown", UidPod("vm1", "", "pod-3", {"data"}), true, ""},
      {"re-created VM of the same name", UidPod("vm1", "uid-B", "pod-4", {"data"}), false,
       "claim default/data is in use by an earlier VM named default/vm1 (uid uid-A); it is "
       "released once that VM is deleted"},
      {"another VM", UidPod("vm2", "uid-C", "pod-5", {"data"}), false,
       "claim default/data is in use by VM default/vm1"},
  };
  for (const Case& c : cases) {
    FilterResult f = Filter(c.pod, kTwoNodes);
    if (c.takes_over) {
      EXPECT_EQ(f.nodes[0].verdict, Verdict::kFits) << c.name << ": " << f.MessageFor(0);
      EXPECT_EQ(f.nodes[0].reason, FilterReason::kStickyHit) << c.name;
      continue;
    }
    EXPECT_EQ(f.nodes[0].verdict, Verdict::kFailed) << c.name;
    EXPECT_EQ(f.nodes[0].reason, FilterReason::kReservedByOther) << c.name;
    EXPECT_EQ(f.MessageFor(0), c.message) << c.name;
    EXPECT_THAT(allocator_->Score(c.pod, Names(kTwoNodes)), ElementsAre(0, 0)) << c.name;
    EXPECT_THAT(allocator_->Preemptable(c.pod, Names(kTwoNodes)), ElementsAre("node-a")) << c.name;
    EXPECT_THAT(allocator_->Bind(c.pod, "node-a"), StatusIs(absl::StatusCode::kAborted))
        << c.name;
  }
  // The re-created VM gets the claim once the earlier one is gone.
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimKey> released, allocator_->ReleaseVm("default", "uid-A"));
  EXPECT_THAT(released, ElementsAre(ClaimKey{"default", "data"}));
  ASSERT_OK(allocator_->Bind(UidPod("vm1", "uid-B", "pod-6", {"data"}), "node-a").status());
  EXPECT_EQ(Get({"default", "data"}).status.reserved_for->vm_uid, "uid-B");
}

// One launcher pod per VMI (Reservation::vmi_uid): another pod of the VMI
// whose pod holds the claim takes nothing over, also after a restart; a pod
// of the VM's next VMI does, and so does any pod of a reservation whose VMI
// is unknown.
TEST_F(VmUidTest, NoSecondPodOfTheHoldingVmiTakesTheReservationOver) {
  SchedulingRequest first = UidPod("vm1", "uid-A", "pod-1");
  first.vmi_uid = "vmi-1";
  ASSERT_OK(allocator_->Bind(first, "node-a").status());
  EXPECT_EQ(Get({"default", "vm1-nvme"}).status.reserved_for->vmi_uid, "vmi-1");
  Reopen();
  EXPECT_EQ(Get({"default", "vm1-nvme"}).status.reserved_for->vmi_uid, "vmi-1");
  Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 10), NvmeDevice("0000:5e:00.0", 11)}));
  Report(Inventory("node-b", {NvmeDevice("0000:3b:00.0", 20), NvmeDevice("0000:5e:00.0", 21)}));
  struct Case {
    std::string name;
    std::string pod_uid;
    std::string vmi_uid;
    bool takes_over;
  };
  const std::vector<Case> cases = {
      {"the holding pod again", "pod-1", "vmi-1", true},
      {"another pod of the same VMI", "pod-2", "vmi-1", false},
      {"a pod of the VM's next VMI", "pod-3", "vmi-2", true},
      {"a pod whose VMI is unknown", "pod-4", "", true},
  };
  for (const Case& c : cases) {
    SchedulingRequest pod = UidPod("vm1", "uid-A", c.pod_uid);
    pod.vmi_uid = c.vmi_uid;
    FilterResult f = Filter(pod, kTwoNodes);
    if (c.takes_over) {
      EXPECT_EQ(f.nodes[0].verdict, Verdict::kFits) << c.name << ": " << f.MessageFor(0);
      continue;
    }
    EXPECT_EQ(f.nodes[0].verdict, Verdict::kUnresolvable) << c.name;
    EXPECT_EQ(f.nodes[0].reason, FilterReason::kReservedByOther) << c.name;
    EXPECT_THAT(f.MessageFor(0), HasSubstr("of the same VirtualMachineInstance takes over nothing"))
        << c.name;
    EXPECT_THAT(allocator_->Bind(pod, "node-a"), StatusIs(absl::StatusCode::kFailedPrecondition))
        << c.name;
    EXPECT_EQ(Get({"default", "vm1-nvme"}).status.reserved_for->pod_uid, "pod-1") << c.name;
  }
}

TEST_F(VmUidTest, RecreatedVmDoesNotInheritTheTemplateClaim) {
  ASSERT_OK(allocator_->Bind(UidPod("vm1", "uid-A", "pod-1"), "node-a").status());
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimKey> released, allocator_->ReleaseVm("default", "uid-A"));
  ASSERT_THAT(released, ElementsAre(ClaimKey{"default", "vm1-nvme"}));
  const SchedulingRequest recreated = UidPod("vm1", "uid-B", "pod-2");
  const std::string message =
      "claim default/vm1-nvme was made for an earlier VM named vm1 (uid uid-A); this VM "
      "(uid uid-B) gets its own once that claim is deleted";
  FilterResult f = Filter(recreated, kTwoNodes);
  for (size_t i = 0; i < kTwoNodes.size(); ++i) {
    // Kubernetes' garbage collector deletes the claim with the old VM: it
    // may clear, so kFailed and not kUnresolvable.
    EXPECT_EQ(f.nodes[i].verdict, Verdict::kFailed) << kTwoNodes[i];
    EXPECT_EQ(f.nodes[i].reason, FilterReason::kClaimProblem) << kTwoNodes[i];
    EXPECT_EQ(f.MessageFor(i), message) << kTwoNodes[i];
  }
  EXPECT_THAT(allocator_->Score(recreated, Names(kTwoNodes)), ElementsAre(0, 0));
  EXPECT_THAT(allocator_->Preemptable(recreated, Names(kTwoNodes)), IsEmpty());
  EXPECT_THAT(allocator_->Bind(recreated, "node-a"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(message)));
  EXPECT_THAT(allocator_->Resolve(recreated), StatusIs(absl::StatusCode::kFailedPrecondition));
  // A pod that does not know its VM's UID (standalone) is the VM by name.
  EXPECT_EQ(Filter(UidPod("vm1", "", "pod-3"), kTwoNodes).nodes[0].verdict, Verdict::kFits);

  // Once the old claim is deleted, the new VM gets a claim of its own.
  ASSERT_OK(allocator_->DeleteClaim({"default", "vm1-nvme"}, /*force=*/false));
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(recreated, "node-b"));
  ASSERT_EQ(b.claims.size(), 1u);
  EXPECT_TRUE(b.claims[0].created);
  EXPECT_EQ(Get({"default", "vm1-nvme"}).spec.owner_vm_uid, "uid-B");
}

// A template claim from before VM UIDs were kept (or made in standalone
// mode) belongs to the first VM of its name that binds it with a UID.
TEST_F(VmUidTest, TemplateClaimWithoutUidIsAdoptedByTheVmThatBindsIt) {
  ASSERT_OK(allocator_->Bind(UidPod("vm1", "", "pod-1"), "node-a").status());
  EXPECT_EQ(Get({"default", "vm1-nvme"}).spec.owner_vm_uid, "");
  const uint64_t before = allocator_->revision();
  ASSERT_OK(allocator_->Bind(UidPod("vm1", "uid-A", "pod-2"), "node-a").status());
  EXPECT_EQ(allocator_->revision(), before + 1);
  const Claim c = Get({"default", "vm1-nvme"});
  EXPECT_EQ(c.spec.owner_vm_uid, "uid-A");
  EXPECT_EQ(c.status.reserved_for->vm_uid, "uid-A");
  ASSERT_OK(allocator_->ReleaseVm("default", "uid-A").status());
  EXPECT_EQ(Filter(UidPod("vm1", "uid-B", "pod-3"), kTwoNodes).nodes[0].reason,
            FilterReason::kClaimProblem);
}

TEST_F(VmUidTest, ReleaseVmClearsEveryReservationOfTheVmAsOneRecord) {
  ASSERT_OK(allocator_->CreateClaim({"default", "data"}, Spec(kNvme, 1)).status());
  ASSERT_OK(allocator_->Bind(UidPod("vm1", "uid-A", "pod-1", {"data"}), "node-a").status());
  SchedulingRequest two = UidPod("vm1", "uid-A", "pod-1", {"data"});
  two.resources = {{kNvme, 2}};  // data plus a template claim.
  ASSERT_OK(allocator_->Bind(two, "node-a").status());
  ASSERT_OK(allocator_->Bind(UidPod("vm2", "uid-B", "pod-2"), "node-b").status());
  SchedulingRequest elsewhere = UidPod("vm1", "uid-A", "pod-3");
  elsewhere.ns = "other";  // Another namespace: never released with default's VM.
  ASSERT_OK(allocator_->Bind(elsewhere, "node-b").status());
  EXPECT_THAT(allocator_->ReservingVms(""),
              ElementsAre(ReservingVm{"default", "uid-A", "vm1"},
                          ReservingVm{"default", "uid-B", "vm2"},
                          ReservingVm{"other", "uid-A", "vm1"}));
  EXPECT_THAT(allocator_->ReservingVms("other"),
              ElementsAre(ReservingVm{"other", "uid-A", "vm1"}));

  int changes = 0;
  allocator_->SetChangeListener([&](const Allocator::Change&) { ++changes; });
  const uint64_t before = allocator_->revision();
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimKey> released, allocator_->ReleaseVm("default", "uid-A"));
  EXPECT_THAT(released, ElementsAre(ClaimKey{"default", "data"}, ClaimKey{"default", "vm1-nvme"}));
  EXPECT_EQ(allocator_->revision(), before + 1);
  EXPECT_EQ(changes, 1);
  EXPECT_FALSE(Get({"default", "data"}).status.reserved_for.has_value());
  EXPECT_FALSE(Get({"default", "vm1-nvme"}).status.reserved_for.has_value());
  EXPECT_EQ(Get({"default", "data"}).status.phase, ClaimPhase::kBound);  // Keeps its device.
  EXPECT_TRUE(Get({"default", "vm2-nvme"}).status.reserved_for.has_value());
  EXPECT_TRUE(Get({"other", "vm1-nvme"}).status.reserved_for.has_value());
  EXPECT_THAT(allocator_->ReservingVms("default"),
              ElementsAre(ReservingVm{"default", "uid-B", "vm2"}));
  // The named claim is free for another VM now.
  EXPECT_EQ(Filter(UidPod("vm3", "uid-C", "pod-4", {"data"}), kTwoNodes).nodes[0].verdict,
            Verdict::kFits);

  // Nothing left to release: no record.
  ASSERT_OK_AND_ASSIGN(released, allocator_->ReleaseVm("default", "uid-A"));
  EXPECT_THAT(released, IsEmpty());
  ASSERT_OK_AND_ASSIGN(released, allocator_->ReleaseVm("default", "uid-unknown"));
  EXPECT_THAT(released, IsEmpty());
  EXPECT_EQ(allocator_->revision(), before + 1);
  EXPECT_EQ(changes, 1);
  EXPECT_THAT(allocator_->ReleaseVm("default", ""),
              StatusIs(absl::StatusCode::kInvalidArgument));

  // Durable: the released state is what a restart recovers.
  Reopen();
  EXPECT_FALSE(Get({"default", "data"}).status.reserved_for.has_value());
  EXPECT_TRUE(Get({"default", "vm2-nvme"}).status.reserved_for.has_value());
}

TEST_F(VmUidTest, ReservationsWithoutAUidAreNotListedNorReleasedByUid) {
  ASSERT_OK(allocator_->Bind(UidPod("vm1", "", "pod-1"), "node-a").status());
  EXPECT_THAT(allocator_->ReservingVms(""), IsEmpty());
  const uint64_t before = allocator_->revision();
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimKey> released, allocator_->ReleaseVm("default", "pod-1"));
  EXPECT_THAT(released, IsEmpty());
  EXPECT_EQ(allocator_->revision(), before);
}

TEST_F(VmUidTest, VmUidsOutOfBoundsAreRefused) {
  SchedulingRequest pod = UidPod("vm1", std::string(200, 'u'), "pod-1");
  FilterResult f = Filter(pod, kTwoNodes);
  EXPECT_EQ(f.nodes[0].reason, FilterReason::kClaimProblem);
  EXPECT_THAT(f.MessageFor(0), HasSubstr("VM uid"));
  ClaimSpec spec = Spec(kNvme, 1);
  spec.owner_vm_uid = "uid-A";
  EXPECT_THAT(allocator_->CreateClaim({"default", "x"}, spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ownerVMUid")));
  spec.owner_vm = "vm1";
  spec.owner_vm_uid = "has space";
  EXPECT_THAT(allocator_->CreateClaim({"default", "x"}, spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ownerVMUid")));
  spec.owner_vm_uid = "uid-A";
  EXPECT_OK(allocator_->CreateClaim({"default", "x"}, spec).status());
}

// With hand-offs serialised, an earlier VM of the same name still waiting
// for its devices is another VM: it blocks the node.
TEST_F(VmUidTest, EarlierVmOfTheSameNameBlocksAHandoff) {
  AllocatorOptions o = TestOptions();
  o.serialize_handoffs = true;
  Reopen(o);
  Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 10), NvmeDevice("0000:5e:00.0", 11)}));
  ASSERT_OK(allocator_->CreateClaim({"default", "data"}, Spec(kNvme, 1)).status());
  ASSERT_OK(allocator_->Bind(UidPod("vm1", "uid-A", "pod-1", {"data"}), "node-a").status());
  // Both pods below want a fresh device (their template claim) on node-a.
  FilterResult f = Filter(UidPod("vm1", "uid-B", "pod-2"), {"node-a"});
  EXPECT_EQ(f.nodes[0].reason, FilterReason::kHandoffPending) << f.MessageFor(0);
  EXPECT_EQ(Filter(UidPod("vm1", "uid-A", "pod-3"), {"node-a"}).nodes[0].verdict,
            Verdict::kFits);
}

}  // namespace
}  // namespace pdc::testing
