// The whole life of a VM's DRA claim with pdc-extender's claim keeper, on
// the kube-apiserver double, for both resourceclaim controller behaviours
// (1.34/1.35: stops syncing a claim with a VM entry; 1.36: keeps it and
// prunes pods). The invariants are checked after every step
// (DraKeeperOnDoubleTest::CheckInvariants).
#include <random>

#include "tests/kube/dra_keeper_on_double.h"

namespace pdc::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

bool Is134(ClaimControllerVersion v) { return v == ClaimControllerVersion::kVersion134; }

TEST_P(DraKeeperOnDoubleTest, StartStopStartKeepsTheDeviceThenTheVmsDeletionFreesIt) {
  const std::string vm_uid = NewVm("vm1");
  ASSERT_OK_AND_ASSIGN(DraSchedulerDouble::Placement first, StartVm("vm1", vm_uid, "launcher-1"));
  EXPECT_TRUE(first.allocated_now);
  const std::vector<AllocatedDevice> device = AllocatedDevices(ClaimNow().json);
  ASSERT_EQ(device.size(), 1u);
  // The keeper adds the VM once the claim is allocated and reserved.
  KubeReply c = AwaitReservedFor({"pods/launcher-1", "virtualmachines/vm1"});
  EXPECT_THAT(VmEntries(c.json), ElementsAre(Cat("vm1/", vm_uid)));
  CheckInvariants("VM started");
  AwaitObject(Cat("/api/v1/namespaces/", ns_, "/events"), [](const KubeReply& r) {
    return r.text.find("\"reason\":\"VmReserved\"") != std::string::npos;
  });
  // kubectl describe vm shows it too.
  AwaitVmEvent("vm1", vm_uid, "VmReserved");

  // The VM stops: its pod is deleted.
  StopVm("vm1", "launcher-1");
  ResourceClaimControllerDouble::Outcome o = SyncController();
  if (Is134(GetParam())) {
    EXPECT_THAT(o.status.message(), HasSubstr("unsupported ReservedFor entry"));
  } else {
    ASSERT_OK(o.status);
    EXPECT_FALSE(o.deallocated);
  }
  CheckInvariants("controller after stop");
  // On 1.34 nobody else prunes the pod: the keeper does.
  c = AwaitReservedFor({"virtualmachines/vm1"});
  EXPECT_EQ(AllocatedDevices(c.json), device);
  o = SyncController();
  EXPECT_FALSE(o.deallocated);
  CheckInvariants("VM stopped");

  // It starts again: same device, same node, no new allocation.
  ASSERT_OK_AND_ASSIGN(DraSchedulerDouble::Placement again, StartVm("vm1", vm_uid, "launcher-2"));
  EXPECT_FALSE(again.allocated_now);
  EXPECT_EQ(again.node, first.node);
  c = AwaitReservedFor({"virtualmachines/vm1", "pods/launcher-2"});
  EXPECT_EQ(AllocatedDevices(c.json), device);
  CheckInvariants("VM started again");

  // Stopped and deleted: its entry goes, and the claim can be given up.
  StopVm("vm1", "launcher-2");
  AwaitReservedFor({"virtualmachines/vm1"});
  ASSERT_EQ(Call("DELETE", Vms("/vm1")).status, 200);
  c = AwaitReservedFor({});
  EXPECT_EQ(AllocatedDevices(c.json), device) << "only the VM entry goes; the allocation stays";
  CheckInvariants("VM deleted");
  AwaitObject(Cat("/api/v1/namespaces/", ns_, "/events"), [](const KubeReply& r) {
    return r.text.find("\"reason\":\"VmUnreserved\"") != std::string::npos;
  });
  // A pod that cannot go to its node now gets the claim deallocated
  // (PostFilter: nobody else reserved it).
  ASSERT_EQ(Call("POST", Pods(), dra::PodJson("other", kClaim)).status, 201);
  bool deallocated = false;
  const std::string other_node = first.node == "node-a" ? "node-b" : "node-a";
  EXPECT_FALSE(scheduler_->Schedule(ns_, "other", kClaim, {other_node}, &deallocated).ok());
  EXPECT_TRUE(deallocated);
  const extender::dra::ClaimKeeper::Counts n = app_->claim_keeper()->counts();
  EXPECT_EQ(n.added, 1u);
  EXPECT_EQ(n.pruned_vms, 1u);
  EXPECT_GE(n.pruned_pods, Is134(GetParam()) ? 2u : 0u);
}

TEST_P(DraKeeperOnDoubleTest, AVmDeletedWhileRunningLeavesThePodsToTheController) {
  const std::string vm_uid = NewVm("vm1");
  ASSERT_OK(StartVm("vm1", vm_uid, "launcher-1").status());
  AwaitReservedFor({"pods/launcher-1", "virtualmachines/vm1"});
  StopVm("vm1", "launcher-1");
  ASSERT_EQ(Call("DELETE", Vms("/vm1")).status, 200);
  // The keeper removes the VM's entry (and prunes the pod, or leaves it to
  // the controller): either way the controller then frees the claim.
  AwaitObject(dra::ClaimPath(ns_, kClaim),
              [&](const KubeReply& r) { return VmEntries(r.json).empty(); });
  CheckInvariants("VM deleted");
  ResourceClaimControllerDouble::Outcome o = SyncController();
  ASSERT_OK(o.status);
  KubeReply c = ClaimNow();
  EXPECT_THAT(dra::ReservedFor(c.json), IsEmpty());
}

TEST_P(DraKeeperOnDoubleTest, AVmRecreatedUnderTheSameNameGetsNothingFromTheOld) {
  const std::string old_uid = NewVm("vm1");
  ASSERT_OK(StartVm("vm1", old_uid, "launcher-1").status());
  AwaitReservedFor({"pods/launcher-1", "virtualmachines/vm1"});
  StopVm("vm1", "launcher-1");
  AwaitReservedFor({"virtualmachines/vm1"});
  // Deleted and made again at once, under the same name.
  ASSERT_EQ(Call("DELETE", Vms("/vm1")).status, 200);
  const std::string new_uid = NewVm("vm1");
  ASSERT_NE(new_uid, old_uid);
  KubeReply c = AwaitReservedFor({});
  CheckInvariants("VM re-created");
  // Its first start: its own entry, by its own UID.
  ASSERT_OK(StartVm("vm1", new_uid, "launcher-2").status());
  c = AwaitReservedFor({"pods/launcher-2", "virtualmachines/vm1"});
  EXPECT_THAT(VmEntries(c.json), ElementsAre(Cat("vm1/", new_uid)));
  CheckInvariants("re-created VM started");
}

TEST_P(DraKeeperOnDoubleTest, ARestartedKeeperConverges) {
  const std::string vm_uid = NewVm("vm1");
  // The VM starts and stops while no keeper runs.
  StopKeeper();
  ASSERT_OK(StartVm("vm1", vm_uid, "launcher-1").status());
  StartKeeper();
  AwaitReservedFor({"pods/launcher-1", "virtualmachines/vm1"});
  StopKeeper();
  StopVm("vm1", "launcher-1");
  SyncController();
  CheckInvariants("stopped while the keeper is down");
  StartKeeper();
  KubeReply c = AwaitReservedFor({"virtualmachines/vm1"});
  EXPECT_EQ(AllocatedDevices(c.json).size(), 1u);
  CheckInvariants("keeper restarted");
  // The VM deleted while the keeper is down: the next one removes it.
  StopKeeper();
  ASSERT_EQ(Call("DELETE", Vms("/vm1")).status, 200);
  StartKeeper();
  AwaitReservedFor({});
  CheckInvariants("VM deleted while the keeper was down");
}

TEST_P(DraKeeperOnDoubleTest, AConflictingWriteIsReadAgainAndRetried) {
  const std::string vm_uid = NewVm("vm1");
  StopKeeper();
  ASSERT_OK(StartVm("vm1", vm_uid, "launcher-1").status());
  // The keeper's write waits in the apiserver while another writer changes
  // the claim: it must get 409, read again and keep the other's change.
  const std::string put = Cat("PUT /apis/resource.k8s.io/v1/namespaces/", ns_,
                              "/resourceclaims/disk/status");
  auto puts = [&] {
    int n = 0;
    for (const std::string& r : api_->requests()) n += r.rfind(put, 0) == 0;
    return n;
  };
  const int before = puts();  // The scheduling double's.
  api_->DelayRequests({"PUT", Cat(ns_, "/resourceclaims/disk/status")}, 1, absl::Seconds(1));
  StartKeeper();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  auto arrived = [&] { return puts() > before; };
  while (!arrived() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(arrived());
  ASSERT_EQ(Call("PATCH", dra::ClaimPath(ns_, kClaim), R"({"metadata":{"labels":{"by":"other"}}})",
                 "application/merge-patch+json")
                .status,
            200);
  KubeReply c = AwaitReservedFor({"pods/launcher-1", "virtualmachines/vm1"});
  EXPECT_EQ(c.Str({"metadata", "labels", "by"}), "other");
  EXPECT_GE(app_->claim_keeper()->counts().conflicts, 1u);
  CheckInvariants("after the conflict");
}

TEST_P(DraKeeperOnDoubleTest, AStoppedVmThatNamesItsClaimIsKeptEvenUnseenAndLetGoWhenItNoLonger) {
  // The VM's spec names the claim (as KubeVirt's VMs do).
  const std::string vm_uid = Create(
      Vms(), Cat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"vm1"},)",
                 R"("spec":{"running":true,"template":{"spec":{"resourceClaims":[{"name":"data",)",
                 R"("resourceClaimName":")", kClaim, R"("}]}}}})"));
  // It starts and stops while no keeper runs; the resourceclaim controller
  // has not looked at the claim yet (it would deallocate it).
  StopKeeper();
  ASSERT_OK_AND_ASSIGN(DraSchedulerDouble::Placement first, StartVm("vm1", vm_uid, "launcher-1"));
  const std::vector<AllocatedDevice> device = AllocatedDevices(ClaimNow().json);
  StopVm("vm1", "launcher-1");
  StartKeeper();
  // The keeper never saw its pod run, but the VM names the claim and only
  // a gone pod holds it: the VM is added, the pod pruned.
  KubeReply c = AwaitReservedFor({"virtualmachines/vm1"});
  EXPECT_EQ(AllocatedDevices(c.json), device);
  ResourceClaimControllerDouble::Outcome o = SyncController();
  EXPECT_FALSE(o.deallocated);
  CheckInvariants("kept unseen");
  ASSERT_OK_AND_ASSIGN(DraSchedulerDouble::Placement again, StartVm("vm1", vm_uid, "launcher-2"));
  EXPECT_FALSE(again.allocated_now);
  EXPECT_EQ(again.node, first.node);
  StopVm("vm1", "launcher-2");
  AwaitReservedFor({"virtualmachines/vm1"});
  CheckInvariants("started again");
  // The VM's spec no longer names the claim: its entry goes.
  ASSERT_EQ(Call("PATCH", Vms("/vm1"),
                 R"({"spec":{"template":{"spec":{"resourceClaims":[]}}}})",
                 "application/merge-patch+json")
                .status,
            200);
  AwaitReservedFor({});
  AwaitVmEvent("vm1", vm_uid, "VmUnreserved");
  CheckInvariants("no longer named");
}

TEST_P(DraKeeperOnDoubleTest, ApiserverFaultsAndANodeDownNeverMoveTheDevice) {
  const std::string vm_uid = NewVm("vm1");
  const std::pair<std::string, std::string> status_put{
      "PUT", Cat(ns_, "/resourceclaims/", kClaim, "/status")};
  // The keeper's first write is answered 409 (another writer came first):
  // read again, written again.
  StopKeeper();
  ASSERT_OK_AND_ASSIGN(DraSchedulerDouble::Placement first, StartVm("vm1", vm_uid, "launcher-1"));
  const std::vector<AllocatedDevice> device = AllocatedDevices(ClaimNow().json);
  api_->FailRequests({status_put.first, status_put.second}, 1, 409);
  StartKeeper();
  AwaitReservedFor({"pods/launcher-1", "virtualmachines/vm1"});
  EXPECT_GE(app_->claim_keeper()->counts().conflicts, 1u);
  CheckInvariants("after a 409");

  // The pruning of the stopped VM's pod is committed but its answer lost:
  // the keeper reads again and finds nothing more to do.
  StopKeeper();
  StopVm("vm1", "launcher-1");
  api_->DropAfterCommit({status_put.first, status_put.second}, 1);
  StartKeeper();
  KubeReply c = AwaitReservedFor({"virtualmachines/vm1"});
  EXPECT_EQ(AllocatedDevices(c.json), device);
  CheckInvariants("after a lost answer");

  // Watches cut and etcd compacted (the keeper relists from 410 Expired).
  EXPECT_GT(api_->CutWatches(), 0);
  ASSERT_OK(api_->CompactEtcd().status());
  CheckInvariants("after cut watches");

  // The device's node is down: the VM's new pod fits nowhere else and waits
  // Pending; the allocation stays, the controller does not deallocate.
  const std::string other = first.node == "node-a" ? "node-b" : "node-a";
  bool deallocated = false;
  CreateLauncher("vm1", vm_uid, "launcher-2");
  EXPECT_FALSE(scheduler_->Schedule(ns_, "launcher-2", kClaim, {other}, &deallocated).ok());
  EXPECT_FALSE(deallocated) << "PostFilter never drops a claim a VM holds";
  EXPECT_FALSE(SyncController().deallocated);
  c = ClaimNow();
  EXPECT_EQ(AllocatedDevices(c.json), device);
  EXPECT_EQ(dra::ReservedFor(c.json), std::vector<std::string>{"virtualmachines/vm1"});
  CheckInvariants("node down");
  // The node is back: the same device, and the keeper (on its relisted
  // watches) prunes the pod once the VM stops again.
  ASSERT_OK_AND_ASSIGN(DraSchedulerDouble::Placement back,
                       scheduler_->Schedule(ns_, "launcher-2", kClaim, {"node-a", "node-b"}));
  EXPECT_EQ(back.node, first.node);
  EXPECT_FALSE(back.allocated_now);
  AwaitReservedFor({"virtualmachines/vm1", "pods/launcher-2"});
  StopVm("vm1", "launcher-2");
  c = AwaitReservedFor({"virtualmachines/vm1"});
  EXPECT_EQ(AllocatedDevices(c.json), device);
  CheckInvariants("node back, VM stopped");
}

// The keeper stopped at seeded random points of a VM's life and started
// again: whatever it missed, it converges, and the invariants hold after
// every step.
TEST_P(DraKeeperOnDoubleTest, AKeeperKilledAtRandomPointsConverges) {
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed() + 34);
  const std::string vm_uid = NewVm("vm1");
  std::vector<AllocatedDevice> device;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(Cat("round ", round));
    const std::string pod = Cat("launcher-", round);
    if (rng() % 2) StopKeeper();
    ASSERT_OK(StartVm("vm1", vm_uid, pod).status());
    if (device.empty()) device = AllocatedDevices(ClaimNow().json);
    if (app_ == nullptr) StartKeeper();
    AwaitReservedFor(round == 0 ? std::vector<std::string>{Cat("pods/", pod), "virtualmachines/vm1"}
                                : std::vector<std::string>{"virtualmachines/vm1", Cat("pods/", pod)});
    CheckInvariants("started");
    if (rng() % 2) StopKeeper();
    StopVm("vm1", pod);
    if (app_ == nullptr) StartKeeper();
    KubeReply c = AwaitReservedFor({"virtualmachines/vm1"});
    EXPECT_EQ(AllocatedDevices(c.json), device);
    EXPECT_FALSE(SyncController().deallocated);
    CheckInvariants("stopped");
  }
}

TEST_P(DraKeeperOnDoubleTest, TwoVmsNeverShareTheClaim) {
  const std::string a = NewVm("vm-a");
  const std::string b = NewVm("vm-b");
  ASSERT_OK(StartVm("vm-a", a, "launcher-a").status());
  AwaitReservedFor({"pods/launcher-a", "virtualmachines/vm-a"});
  // A second VM naming the same claim (kube-scheduler lets it share): it
  // gets no entry, and an Event says why.
  ASSERT_OK(StartVm("vm-b", b, "launcher-b").status());
  AwaitObject(Cat("/api/v1/namespaces/", ns_, "/events"), [](const KubeReply& r) {
    return r.text.find("a claim is never kept for two VMs") != std::string::npos;
  });
  AwaitVmEvent("vm-b", b, "KeepFailed");
  KubeReply c = ClaimNow();
  EXPECT_THAT(VmEntries(c.json), ElementsAre(Cat("vm-a/", a)));
  CheckInvariants("second VM");
}

TEST_P(DraKeeperOnDoubleTest, APodOwnedClaimIsNeverKeptAndGoesWithItsPod) {
  // A claim made from the pod's resourceClaimTemplateName: owned by the pod.
  const std::string vm_uid = NewVm("vm1");
  const std::string pod_uid = CreateLauncher("vm1", vm_uid, "launcher-1", "tmpl");
  std::string claim = dra::ClaimJson("tmpl");
  claim.insert(claim.find(R"(},"spec")"),
               Cat(R"(,"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"launcher-1",)",
                   R"("uid":")", pod_uid, R"(","controller":true,"blockOwnerDeletion":true}])"));
  ASSERT_EQ(Call("POST", dra::ClaimsPath(ns_), claim).status, 201);
  ASSERT_OK(scheduler_->Schedule(ns_, "launcher-1", "tmpl", {"node-a", "node-b"}).status());
  // A VM entry on it (written by an older keeper) is removed, not kept.
  const std::string path = dra::ClaimPath(ns_, "tmpl");
  std::string text = Call("GET", path).text;
  const size_t list = text.find(R"("reservedFor":[)");
  ASSERT_NE(list, std::string::npos) << text;
  text.insert(list + std::string_view(R"("reservedFor":[)").size(),
              Cat(dra::Consumer("kubevirt.io", "virtualmachines", "vm1", vm_uid), ","));
  ASSERT_EQ(Call("PUT", Cat(path, "/status"), text).status, 200);
  AwaitObject(path, [](const KubeReply& r) {
    return dra::ReservedFor(r.json) == std::vector<std::string>{"pods/launcher-1"};
  });
  // Its pod deleted, the resourceclaim controller deletes it and its
  // device is free.
  StopVm("vm1", "launcher-1");
  int status = 0;
  for (int i = 0; i < 5 && status != 404; ++i) {
    ResourceClaimControllerDouble::Outcome o = controller_->SyncClaim(ns_, "tmpl");
    if (!absl::IsAborted(o.status)) {
      ASSERT_OK(o.status);
    }
    status = Call("GET", path).status;
  }
  EXPECT_EQ(status, 404);
  EXPECT_EQ(app_->claim_keeper()->counts().added, 0u);
}

TEST_P(DraKeeperOnDoubleTest, OnlyTheLeaderKeepsAndTheNextLeaderTakesOver) {
  StopKeeper();
  configure_ = [](PdcConfig* c) {
    c->extender.dra_keeper.enabled = true;
    c->extender.dra_keeper.resync_period = absl::Milliseconds(200);
    c->extender.leader_election.enabled = true;
    c->extender.leader_election.lease_name = "pdc-keeper-test";
    c->extender.leader_election.lease_duration = absl::Seconds(2);
    c->extender.leader_election.renew_deadline = absl::Milliseconds(1500);
    c->extender.leader_election.retry_period = absl::Milliseconds(250);
  };
  // Claim lists (a keeper starting): only a leader makes one.
  auto claim_lists = [&] {
    int n = 0;
    for (const std::string& r : api_->requests()) {
      n += r.rfind("GET /apis/resource.k8s.io/v1/resourceclaims?", 0) == 0 &&
           r.find("watch=") == std::string::npos;
    }
    return n;
  };
  const int lists_before = claim_lists();
  StartKeeper();
  std::unique_ptr<extender::ExtenderApp> first = std::move(app_);
  StartKeeper();
  std::unique_ptr<extender::ExtenderApp> second = std::move(app_);
  auto leader = [&]() -> extender::ExtenderApp* {
    const absl::Time deadline = absl::Now() + absl::Seconds(15);
    while (absl::Now() < deadline) {
      for (auto* a : {first.get(), second.get()}) {
        if (a != nullptr && a->leadership()->Leading()) return a;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return nullptr;
  };
  extender::ExtenderApp* lead = leader();
  ASSERT_NE(lead, nullptr);
  const std::string vm_uid = NewVm("vm1");
  ASSERT_OK(StartVm("vm1", vm_uid, "launcher-1").status());
  AwaitReservedFor({"pods/launcher-1", "virtualmachines/vm1"});
  EXPECT_EQ(claim_lists(), lists_before + 1) << "a follower runs a keeper";
  // The leader stops (a rolling update): the other takes over and prunes.
  (lead == first.get() ? first : second).reset();
  ASSERT_NE(leader(), nullptr);
  StopVm("vm1", "launcher-1");
  AwaitReservedFor({"virtualmachines/vm1"});
  EXPECT_EQ(claim_lists(), lists_before + 2);
  CheckInvariants("after the hand-over");
  first.reset();
  second.reset();
}

INSTANTIATE_TEST_SUITE_P(Controllers, DraKeeperOnDoubleTest,
                         ::testing::Values(ClaimControllerVersion::kVersion134,
                                           ClaimControllerVersion::kVersion136),
                         [](const auto& info) { return Is134(info.param) ? "v134" : "v136"; });

}  // namespace
}  // namespace pdc::testing
