// The whole pdc-extender in Kubernetes mode (kubeconfig) against the
// kube-apiserver double on a real etcd, driven as kube-scheduler and
// virt-controller would: it is ready only once its VirtualMachine and
// VirtualMachineInstance caches synced; it binds a VM pod through
// pods/binding, also when the apiserver committed the Binding and then
// dropped the connection (the pod read back says it is bound); a pod of a
// VM deleted and re-created under the same name is nobody's, and the
// re-created VM does not inherit the deleted one's claims.
#include <string>

#include "tests/kube/extender_on_double.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;

TEST_F(ExtenderOnDoubleTest, ReadyOnlyOnceTheVmCachesSynced) {
  // The first list of VirtualMachineInstances takes a while.
  api_->DelayRequests({"GET", "virtualmachineinstances?limit="}, 1, absl::Seconds(2));
  StartExtender();
  ASSERT_OK_AND_ASSIGN(HttpResponse early, pdc_->Get("/readyz"));
  EXPECT_EQ(early.status, 503);
  EXPECT_THAT(early.body, HasSubstr("watch caches have not synced yet"));
  EXPECT_TRUE(AwaitReady());
}

TEST_F(ExtenderOnDoubleTest, BindsThroughTheApiEvenWhenTheAnswerIsLost) {
  const std::string vmi_uid = CreateVm("vm1");
  const std::string pod = CreatePod("vm1", "virt-launcher-vm1-abcde", vmi_uid);
  rapidjson::Document d;
  d.Parse(pod.data(), pod.size());
  const std::string pod_uid = kube::GetString(d, {"metadata", "uid"});
  StartExtender();
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  EXPECT_THAT(Filter(pod).body, HasSubstr(R"("NodeNames":["node-a"])"));

  // The apiserver commits the Binding and drops the connection: pdc never
  // re-sends the POST; it reads the pod back and finds it bound.
  api_->DropAfterCommit({"POST", "/binding"});
  EXPECT_EQ(Bind("virt-launcher-vm1-abcde", pod_uid).body, R"({"Error":""})");

  KubeReply stored = Call("GET", Pods("/virt-launcher-vm1-abcde"));
  EXPECT_EQ(stored.Str({"spec", "nodeName"}), "node-a");
  EXPECT_THAT(stored.Str({"metadata", "annotations", "pdc.kubevirt.io/devices"}),
              HasSubstr("devices.kubevirt.io/nvme"));
  ASSERT_OK_AND_ASSIGN(HttpResponse claim,
                       pdc_->Get(absl::StrCat("/v1/namespaces/", ns_, "/claims/vm1-nvme")));
  EXPECT_THAT(claim.body, HasSubstr(R"("node":"node-a")"));
  ASSERT_OK_AND_ASSIGN(HttpResponse metrics, pdc_->Get("/metrics"));
  EXPECT_THAT(metrics.body, HasSubstr(R"(pdc_bind_read_backs_total{result="bound"} 1)"));
  // One Binding POST reached the apiserver.
  int bindings = 0;
  for (const std::string& r : api_->requests()) {
    if (r.starts_with("POST ") && r.find("/binding") != std::string::npos) ++bindings;
  }
  EXPECT_EQ(bindings, 1);
}

// The DRA claim keeper on a cluster that refuses its ResourceClaim list
// (no resource.k8s.io/v1, or no RBAC for it): pdc-extender is ready and
// binds all the same; only the keeper waits, and says so.
TEST_F(ExtenderOnDoubleTest, AKeeperThatCannotListStopsNothingElse) {
  for (int status : {404, 403}) {
    SCOPED_TRACE(status);
    api_->FailRequests({"GET", "/apis/resource.k8s.io/v1/resourceclaims?"}, 1'000'000, status);
    configure_ = [](PdcConfig* c) { c->extender.dra_keeper.enabled = true; };
    const std::string vm = absl::StrCat("vm", status);
    const std::string vmi_uid = CreateVm(vm);
    const std::string name = absl::StrCat("virt-launcher-", vm, "-abcde");
    const std::string pod = CreatePod(vm, name, vmi_uid);
    rapidjson::Document d;
    d.Parse(pod.data(), pod.size());
    StartExtender();
    ASSERT_TRUE(AwaitReady());
    ReportNodeA();
    EXPECT_EQ(Bind(name, kube::GetString(d, {"metadata", "uid"})).body, R"({"Error":""})");
    ASSERT_OK_AND_ASSIGN(HttpResponse metrics, pdc_->Get("/metrics"));
    EXPECT_THAT(metrics.body, HasSubstr("pdc_dra_keeper_synced 0"));
    api_->ClearFaults();
    app_->Stop();
    app_.reset();
  }
}

// delete a VM, create one under the same name: the old VM's pod is nobody's.
TEST_F(ExtenderOnDoubleTest, APodOfARecreatedVmIsNobodys) {
  const std::string old_vmi = CreateVm("vm2");
  const std::string old_pod = CreatePod("vm2", "virt-launcher-vm2-aaaaa", old_vmi);
  StartExtender();
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  EXPECT_THAT(Filter(old_pod).body, HasSubstr(R"("NodeNames":["node-a"])"));

  ASSERT_EQ(Call("DELETE", Vms("/vm2")).status, 200);
  ASSERT_TRUE(api_->WaitGarbageCollectorIdle(absl::Seconds(10)));
  const std::string new_vmi = CreateVm("vm2");
  const std::string new_pod = CreatePod("vm2", "virt-launcher-vm2-bbbbb", new_vmi);

  // The watches bring the new objects; the old pod then points at a VMI
  // that is gone, though its label still says vm2.
  std::string answer;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    answer = Filter(old_pod).body;
    if (answer.find("which is gone") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(answer, HasSubstr(absl::StrCat("the pod belongs to VirtualMachineInstance ", ns_,
                                             "/vm2 with uid ", old_vmi, ", which is gone")));
  EXPECT_THAT(Filter(new_pod).body, HasSubstr(R"("NodeNames":["node-a"])"));
}


// Deleting a VM releases what it held; a VM re-created under the same name
// is another VM (another UID) and does not get the old one's template claim
// or its device, and filter says why.
TEST_F(ExtenderOnDoubleTest, ARecreatedVmDoesNotInheritTheOldVmsClaim) {
  const std::string old_vmi = CreateVm("vm3");
  const std::string old_pod = CreatePod("vm3", "virt-launcher-vm3-aaaaa", old_vmi);
  StartExtender();
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  const std::string old_pod_uid =
      Call("GET", Pods("/virt-launcher-vm3-aaaaa")).Str({"metadata", "uid"});
  EXPECT_EQ(Bind("virt-launcher-vm3-aaaaa", old_pod_uid).body, R"({"Error":""})");
  const ClaimKey key{ns_, "vm3-nvme"};
  ASSERT_OK_AND_ASSIGN(Claim held, app_->allocator()->GetClaim(key));
  ASSERT_TRUE(held.status.reserved_for.has_value());
  const std::string old_vm_uid = held.status.reserved_for->vm_uid;
  EXPECT_EQ(old_vm_uid, Call("GET", Vms("/vm3")).Str({"metadata", "uid"}));
  EXPECT_EQ(held.spec.owner_vm_uid, old_vm_uid);

  ASSERT_EQ(Call("DELETE", Vms("/vm3")).status, 200);
  ASSERT_TRUE(api_->WaitGarbageCollectorIdle(absl::Seconds(10)));
  // The VM's watch event releases its reservation.
  ASSERT_TRUE(AwaitUnreserved(key));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);

  const std::string new_vmi = CreateVm("vm3");
  const std::string new_pod = CreatePod("vm3", "virt-launcher-vm3-bbbbb", new_vmi);
  const std::string new_vm_uid = Call("GET", Vms("/vm3")).Str({"metadata", "uid"});
  ASSERT_NE(new_vm_uid, old_vm_uid);
  std::string answer;
  while (absl::Now() < deadline + absl::Seconds(10)) {
    answer = Filter(new_pod).body;
    if (answer.find("earlier VM") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(answer, HasSubstr(absl::StrCat("claim ", ns_,
                                             "/vm3-nvme was made for an earlier VM named vm3 (uid ",
                                             old_vm_uid, "); this VM (uid ", new_vm_uid,
                                             ") gets its own once that claim is deleted")));
  EXPECT_THAT(answer, HasSubstr(R"("NodeNames":[])"));
  ASSERT_OK_AND_ASSIGN(Claim after, app_->allocator()->GetClaim(key));
  EXPECT_FALSE(after.status.reserved_for.has_value());
  EXPECT_EQ(after.status.devices, held.status.devices);
}

// A VM deleted while pdc-extender was down: once its caches synced at the
// next start, pdc-extender finds no VM with the UID holding the claim and
// releases it.
TEST_F(ExtenderOnDoubleTest, ReleasesAVmDeletedWhileItWasDown) {
  const std::string data = dir_.Join("data");
  const std::string vmi = CreateVm("vm4");
  CreatePod("vm4", "virt-launcher-vm4-aaaaa", vmi);
  StartExtender(StoreKind::kFile, data);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  const std::string pod_uid =
      Call("GET", Pods("/virt-launcher-vm4-aaaaa")).Str({"metadata", "uid"});
  const std::string pod = Call("GET", Pods("/virt-launcher-vm4-aaaaa")).text;
  EXPECT_THAT(Filter(pod).body, HasSubstr(R"("NodeNames":["node-a"])"));
  EXPECT_EQ(Bind("virt-launcher-vm4-aaaaa", pod_uid).body, R"({"Error":""})");
  const ClaimKey key{ns_, "vm4-nvme"};
  ASSERT_OK_AND_ASSIGN(Claim held, app_->allocator()->GetClaim(key));
  ASSERT_TRUE(held.status.reserved_for.has_value());
  app_->Stop();
  app_.reset();

  ASSERT_EQ(Call("DELETE", Vms("/vm4")).status, 200);
  ASSERT_TRUE(api_->WaitGarbageCollectorIdle(absl::Seconds(10)));
  StartExtender(StoreKind::kFile, data);
  ASSERT_TRUE(AwaitReady());
  EXPECT_TRUE(AwaitUnreserved(key));
}

// The watch of pdc-scheduler's pods: a VM pod deleted after its bind, before
// kubelet asked for its devices, gives its node's hand-off slot back at once
// (without the watch, the sweeper's grace period of 30 s would pass first).
TEST_F(ExtenderOnDoubleTest, APodDeletedBeforeItsDevicesGivesUpItsHandoffAtOnce) {
  const std::string vmi = CreateVm("vm5");
  const std::string pod = CreatePod("vm5", "virt-launcher-vm5-aaaaa", vmi);
  const std::string pod_uid =
      Call("GET", Pods("/virt-launcher-vm5-aaaaa")).Str({"metadata", "uid"});
  StartExtender();
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  EXPECT_THAT(Filter(pod).body, HasSubstr(R"("NodeNames":["node-a"])"));
  EXPECT_EQ(Bind("virt-launcher-vm5-aaaaa", pod_uid).body, R"({"Error":""})");
  ASSERT_EQ(app_->allocator()->PendingHandoffs("node-a").size(), 1u);

  // Deleted for good (as kubelet does once the pod's containers are gone,
  // or `kubectl delete --force`): a graceful delete only marks it.
  const absl::Time deleted = absl::Now();
  ASSERT_EQ(Call("DELETE", Pods("/virt-launcher-vm5-aaaaa?gracePeriodSeconds=0")).status, 200);
  while (!app_->allocator()->PendingHandoffs("node-a").empty() &&
         absl::Now() - deleted < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(app_->allocator()->PendingHandoffs("node-a"), ::testing::IsEmpty());
  // The claim keeps its device for the VM's next pod.
  ASSERT_OK_AND_ASSIGN(Claim c, app_->allocator()->GetClaim({ns_, "vm5-nvme"}));
  EXPECT_EQ(c.status.phase, ClaimPhase::kBound);
  // And kubectl describe of the claim tells it.
  std::string events;
  for (const absl::Time until = absl::Now() + absl::Seconds(10);
       events.find(R"("reason":"HandoffCancelled")") == std::string::npos && absl::Now() < until;
       absl::SleepFor(absl::Milliseconds(20))) {
    events = Call("GET", absl::StrCat("/api/v1/namespaces/", ns_, "/events")).text;
  }
  EXPECT_THAT(events, HasSubstr(R"("reason":"HandoffCancelled")"));
  EXPECT_THAT(events, HasSubstr(absl::StrCat("pod ", ns_, "/virt-launcher-vm5-aaaaa (uid ", pod_uid,
                                             ") never received the devices from node node-a")));
  EXPECT_THAT(events, HasSubstr(R"("name":"vm5-nvme")"));
}

}  // namespace
}  // namespace pdc::testing
