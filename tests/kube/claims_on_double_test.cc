// store: kubernetes against the kube-apiserver double on a real etcd: claims
// are PersistentDeviceClaim objects. A claim created with the API becomes a
// Pending claim with pdc's finalizer; a VM pod's template claim is created
// as an object owned by the VM; the status is the record a restarted
// pdc-extender starts from; a deleted Retain claim leaves its device
// Released in the node's holds; a device in two claims' status is used for
// neither.
#include <string>

#include "api/claim_object.h"
#include "extender/kube_api_store.h"
#include "tests/kube/extender_on_double.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ClaimsOnDoubleTest : public ExtenderOnDoubleTest {
 protected:
  // pdc-extender lists the claims of all namespaces: leave none behind for
  // the next test.
  void TearDown() override {
    ExtenderOnDoubleTest::TearDown();
    if (IsSkipped()) return;
    DeleteAllClaims();
  }

  std::string PdcGet(const std::string& path) {
    absl::StatusOr<HttpResponse> r = pdc_->Get(path);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? absl::StrCat(r->status, " ", r->body) : "";
  }
  std::string NvmeClaim(const std::string& name, const std::string& policy) {
    return absl::StrCat(
        R"({"apiVersion":"pdc.kubevirt.io/v1alpha1","kind":"PersistentDeviceClaim",)",
        R"("metadata":{"name":")", name,
        R"("},"spec":{"resourceName":"devices.kubevirt.io/nvme","count":1,"reclaimPolicy":")",
        policy, R"("}})");
  }
  // The Events of this test's namespace, once one has `reason` (10 s).
  std::string AwaitEvent(const std::string& reason) {
    const std::string path = absl::StrCat("/api/v1/namespaces/", ns_, "/events");
    return AwaitObject(path, [&](const KubeReply& r) {
             return r.text.find(absl::StrCat(R"("reason":")", reason, R"(")")) !=
                    std::string::npos;
           }).text;
  }
  // A virt-launcher pod of VM `vm` (its VMI `vmi_uid`) for pdc's scheduler,
  // asking for one NVMe drive and naming `claims` in its annotation.
  KubeReply CreateClaimPod(const std::string& vm, const std::string& vmi_uid,
                           const std::string& pod, const std::string& claims) {
    return Call(
        "POST", Pods(),
        absl::StrCat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", pod, R"(",)",
                     R"("annotations":{"pdc.kubevirt.io/claims":")", claims, R"("},)",
                     R"("labels":{"kubevirt.io/created-by":")", vmi_uid, R"("},)",
                     Owner("VirtualMachineInstance", vm, vmi_uid),
                     R"(},"spec":{"schedulerName":"pdc-scheduler","containers":[{"name":"compute","image":"virt-launcher","resources":{"limits":{"devices.kubevirt.io/nvme":"1"},"requests":{"devices.kubevirt.io/nvme":"1"}}}]}})"));
  }
  // Writes a claim's status as someone restoring a backup might; the
  // HTTP status of the PATCH to `status_path` (Claims("/<name>/status")).
  int WriteStatus(const std::string& status_path, const std::string& body) {
    return Call("PATCH", status_path, body, "application/merge-patch+json").status;
  }
  std::string Holds(const std::string& node) {
    return absl::StrCat("/api/v1/namespaces/", ns_, "/configmaps/",
                        extender::HoldsConfigMapName(node));
  }
};

TEST_F(ClaimsOnDoubleTest, AClaimObjectIsAClaimAndItsDeletionLeavesTheDeviceReleased) {
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  ASSERT_EQ(Call("POST", Claims(), NvmeClaim("data", "Retain")).status, 201);

  // pdc takes it: finalizer on, status Pending with the generation seen.
  KubeReply pending = AwaitObject(Claims("/data"), [](const KubeReply& r) {
    return r.Str({"status", "phase"}) == "Pending";
  });
  EXPECT_THAT(pending.text, HasSubstr(R"("finalizers":["pdc.kubevirt.io/device-protection"])"));
  EXPECT_EQ(pending.Int({"status", "observedGeneration"}), 1);
  EXPECT_THAT(PdcGet(absl::StrCat("/v1/namespaces/", ns_, "/claims/data")),
              HasSubstr(R"("phase":"Pending")"));
  // The REST API shows claims; kubectl makes and deletes them.
  ASSERT_OK_AND_ASSIGN(HttpResponse post,
                       pdc_->Post(absl::StrCat("/v1/namespaces/", ns_, "/claims"),
                                  R"({"name":"x","resourceName":"devices.kubevirt.io/nvme"})"));
  EXPECT_EQ(post.status, 405);
  EXPECT_THAT(post.body, HasSubstr("create and delete it with kubectl"));

  // A VM pod that names the claim binds it; the status records the binding.
  const std::string vmi_uid = CreateVm("vm1");
  KubeReply pod = CreateClaimPod("vm1", vmi_uid, "virt-launcher-vm1-x", "data");
  ASSERT_EQ(pod.status, 201) << pod.text;
  EXPECT_EQ(Bind("virt-launcher-vm1-x", pod.Str({"metadata", "uid"})).body, R"({"Error":""})");
  KubeReply bound = Call("GET", Claims("/data"));
  EXPECT_EQ(bound.Str({"status", "phase"}), "Bound");
  EXPECT_EQ(bound.Str({"status", "node"}), "node-a");
  EXPECT_EQ(bound.Str({"status", "reservedFor", "podName"}), "virt-launcher-vm1-x");
  // The device as node-a's inventory describes it, and conditions.
  EXPECT_THAT(bound.text, HasSubstr(R"("address":"0000:3b:00.0","serial":"SNA0","iommuGroup":12,"numaNode":0)"));
  EXPECT_THAT(bound.text, HasSubstr(R"("type":"Bound","status":"True")"));
  EXPECT_THAT(bound.text, HasSubstr(R"("type":"Reserved","status":"True","observedGeneration":1)"));
  EXPECT_THAT(bound.text, HasSubstr(R"("reason":"HandOffPending")"));
  // kubectl describe tells it: on the claim and on the pod.
  EXPECT_THAT(AwaitEvent("ClaimBound"), HasSubstr("bound to node node-a: 0000:3b:00.0"));
  EXPECT_THAT(AwaitEvent("DevicesBound"), HasSubstr(R"("kind":"Pod")"));

  // A new pdc-extender starts from what the API holds.
  RestartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  const std::string after = PdcGet(absl::StrCat("/v1/namespaces/", ns_, "/claims/data"));
  EXPECT_THAT(after, HasSubstr(R"("phase":"Bound")"));
  EXPECT_THAT(after, HasSubstr(R"("node":"node-a")"));
  EXPECT_THAT(after, HasSubstr(bound.Str({"metadata", "uid"})));
  // ... the IOMMU group too, before node-a reports again.
  ASSERT_OK_AND_ASSIGN(NodeView node_a, app_->allocator()->GetNode("node-a"));
  ASSERT_EQ(node_a.inventory.devices.size(), 1u);
  EXPECT_EQ(node_a.inventory.devices[0].iommu_group, 12);

  // Deleting it while the VM's pod runs: kept, by the finalizer.
  ASSERT_EQ(Call("DELETE", Claims("/data")).status, 200);
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(Call("GET", Claims("/data")).status, 200);
  // The pod is gone: the claim goes, its device stays Released (Retain).
  ASSERT_EQ(Call("DELETE", Pods("/virt-launcher-vm1-x"),
                 R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})")
                .status,
            200);
  AwaitObject(Claims("/data"), [](const KubeReply& r) { return r.status == 404; });
  KubeReply holds = Call("GET", Holds("node-a"));
  ASSERT_EQ(holds.status, 200) << holds.text;
  EXPECT_THAT(holds.Str({"data", "holds"}), HasSubstr(absl::StrCat(R"("claim":")", ns_, "/data")));
  EXPECT_THAT(PdcGet("/v1/devices"), HasSubstr(R"("state":"Released")"));
  EXPECT_THAT(AwaitEvent("ClaimReleased"), HasSubstr("reclaimPolicy Retain"));

  // And so it stays after a restart, until an administrator releases it.
  RestartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  EXPECT_THAT(PdcGet("/v1/devices"), HasSubstr(R"("state":"Released")"));
}

// reclaimPolicy Delete: the deleted claim's object stays, with pdc's
// finalizer and the condition Reclaiming, until node-a's driver reports its
// device back on the host driver (erased), also across a restart; then it
// goes.
TEST_F(ClaimsOnDoubleTest, ADeletedDeleteClaimStaysUntilItsDeviceIsErased) {
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  ASSERT_EQ(Call("POST", Claims(), NvmeClaim("scratch", "Delete")).status, 201);
  AwaitObject(Claims("/scratch"),
              [](const KubeReply& r) { return r.Str({"status", "phase"}) == "Pending"; });
  const std::string vmi_uid = CreateVm("vm1");
  KubeReply pod = CreateClaimPod("vm1", vmi_uid, "virt-launcher-vm1-x", "scratch");
  ASSERT_EQ(pod.status, 201) << pod.text;
  ASSERT_EQ(Bind("virt-launcher-vm1-x", pod.Str({"metadata", "uid"})).body, R"({"Error":""})");
  // The device went to vfio-pci for the VM.
  auto report = [&](const std::string& driver) {
    Device d = NvmeDevice("0000:3b:00.0", 12, 0, "SNA0");
    d.driver = driver;
    NodeInventory inv = Inventory("node-a", {d, NvmeDevice("0000:5e:00.0", 13, 0, "SNA1")});
    // pdc-node acknowledges the erase of the drive once it is done.
    if (driver == "nvme") inv.returned = {"SNA0"};
    ASSERT_OK_AND_ASSIGN(HttpResponse r,
                         pdc_->Put("/v1/nodes/node-a/inventory", api::WriteInventory(inv)));
    ASSERT_EQ(r.status, 200) << r.body;
  };
  report("vfio-pci");

  ASSERT_EQ(Call("DELETE", Pods("/virt-launcher-vm1-x"),
                 R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})")
                .status,
            200);
  ASSERT_EQ(Call("DELETE", Claims("/scratch")).status, 200);
  KubeReply reclaiming = AwaitObject(Claims("/scratch"), [](const KubeReply& r) {
    return r.text.find(R"("type":"Reclaiming","status":"True")") != std::string::npos;
  });
  EXPECT_THAT(reclaiming.text, HasSubstr("pdc.kubevirt.io/device-protection"));
  EXPECT_THAT(reclaiming.text, HasSubstr("erases device(s) 0000:3b:00.0"));
  EXPECT_THAT(reclaiming.text, HasSubstr(R"("type":"Reserved","status":"False")"));
  EXPECT_THAT(Call("GET", Holds("node-a")).Str({"data", "holds"}), HasSubstr("0000:3b:00.0"));
  EXPECT_THAT(PdcGet(absl::StrCat("/v1/namespaces/", ns_, "/claims/scratch")), HasSubstr("404"));
  EXPECT_THAT(AwaitEvent("ClaimReleased"), HasSubstr("reclaimPolicy Delete"));

  // A new pdc-extender knows the object waits: it is no claim, and stays.
  RestartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  EXPECT_THAT(PdcGet(absl::StrCat("/v1/namespaces/", ns_, "/claims/scratch")), HasSubstr("404"));
  report("vfio-pci");  // Still not erased.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(Call("GET", Claims("/scratch")).status, 200);
  EXPECT_THAT(PdcGet("/v1/devices"), HasSubstr(R"("state":"ReturningToHost")"));

  // Erased and back on nvme: the object goes, the device is free.
  report("nvme");
  AwaitObject(Claims("/scratch"), [](const KubeReply& r) { return r.status == 404; });
  EXPECT_THAT(PdcGet("/v1/devices"), Not(HasSubstr(R"("state":"ReturningToHost")")));
}

TEST_F(ClaimsOnDoubleTest, ATemplateClaimIsAnObjectOwnedByTheVm) {
  const std::string vmi_uid = CreateVm("vm1");
  const std::string vm_uid = Call("GET", Vms("/vm1")).Str({"metadata", "uid"});
  const std::string pod = CreatePod("vm1", "virt-launcher-vm1-abcde", vmi_uid);
  rapidjson::Document d;
  d.Parse(pod.data(), pod.size());
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  EXPECT_EQ(Bind("virt-launcher-vm1-abcde", kube::GetString(d, {"metadata", "uid"})).body,
            R"({"Error":""})");

  KubeReply claim = Call("GET", Claims("/vm1-nvme"));
  ASSERT_EQ(claim.status, 200) << claim.text;
  EXPECT_EQ(claim.Str({"status", "phase"}), "Bound");
  EXPECT_EQ(claim.Str({"spec", "ownerVM"}), "vm1");
  EXPECT_THAT(claim.text, HasSubstr(absl::StrCat(R"("kind":"VirtualMachine","name":"vm1","uid":")",
                                                 vm_uid, R"(","controller":true)")));
  EXPECT_THAT(claim.text, HasSubstr("pdc.kubevirt.io/device-protection"));

  // After a restart the allocator holds the same claim, bound where it was.
  RestartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  EXPECT_THAT(PdcGet(absl::StrCat("/v1/namespaces/", ns_, "/claims/vm1-nvme")),
              HasSubstr(R"("node":"node-a")"));

  // node-a's bus is renumbered: the two drives trade addresses. The claim
  // follows its drive's serial, and its object says so.
  ASSERT_OK_AND_ASSIGN(
      HttpResponse r,
      pdc_->Put("/v1/nodes/node-a/inventory",
                api::WriteInventory(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 12, 0, "SNA1"),
                                                         NvmeDevice("0000:5e:00.0", 13, 0, "SNA0")}))));
  ASSERT_EQ(r.status, 200) << r.body;
  KubeReply moved = AwaitObject(Claims("/vm1-nvme"), [](const KubeReply& o) {
    return o.text.find(R"("address":"0000:5e:00.0","serial":"SNA0")") != std::string::npos;
  });
  EXPECT_EQ(moved.Str({"status", "phase"}), "Bound");
  EXPECT_THAT(AwaitEvent("DeviceMoved"),
              HasSubstr("serial SNA0 on node node-a is now at 0000:5e:00.0 (was 0000:3b:00.0)"));
}

// A bind the apiserver refused after pdc created the VM's template claim:
// the claim is let go, and so is its object (it does not stay behind as a
// Pending claim nobody made); the VM's next try creates it again.
TEST_F(ClaimsOnDoubleTest, TheTemplateClaimOfAnUndoneBindIsDeleted) {
  const std::string vmi_uid = CreateVm("vm1");
  const std::string pod = CreatePod("vm1", "virt-launcher-vm1-abcde", vmi_uid);
  rapidjson::Document d;
  d.Parse(pod.data(), pod.size());
  const std::string pod_uid = kube::GetString(d, {"metadata", "uid"});
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  api_->FailRequests({"POST", "/binding"}, 1, 422);
  EXPECT_THAT(Bind("virt-launcher-vm1-abcde", pod_uid).body, HasSubstr("Kubernetes API"));
  AwaitObject(Claims("/vm1-nvme"), [](const KubeReply& r) { return r.status == 404; });
  EXPECT_THAT(PdcGet(absl::StrCat("/v1/namespaces/", ns_, "/claims/vm1-nvme")), HasSubstr("404"));

  EXPECT_EQ(Bind("virt-launcher-vm1-abcde", pod_uid).body, R"({"Error":""})");
  EXPECT_EQ(Call("GET", Claims("/vm1-nvme")).Str({"status", "phase"}), "Bound");
}

TEST_F(ClaimsOnDoubleTest, ADeviceInTwoClaimsIsUsedForNeither) {
  // Two claims whose status (written here as an administrator restoring a
  // backup might) both name 0000:3b:00.0 on node-a.
  for (const std::string name : {"one", "two"}) {
    KubeReply c = Call("POST", Claims(), NvmeClaim(name, "Retain"));
    ASSERT_EQ(c.status, 201) << c.text;
    ASSERT_EQ(WriteStatus(Claims(absl::StrCat("/", name, "/status")),
                          R"({"status":{"phase":"Bound","node":"node-a","devices":[{"address":"0000:3b:00.0","serial":"SNA0"}]}})"),
              200);
  }
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  EXPECT_THAT(PdcGet(absl::StrCat("/v1/namespaces/", ns_, "/claims/one")), HasSubstr("404"));
  EXPECT_THAT(PdcGet(absl::StrCat("/v1/namespaces/", ns_, "/claims/two")), HasSubstr("404"));
  const std::string devices = PdcGet("/v1/devices");
  EXPECT_THAT(devices, HasSubstr(R"("address":"0000:3b:00.0")"));
  EXPECT_THAT(devices, HasSubstr(R"("state":"Released")"));
  EXPECT_THAT(AwaitEvent("DeviceConflict"),
              HasSubstr(absl::StrCat("is in the status of claims ", ns_, "/one and ", ns_, "/two")));
  ASSERT_OK_AND_ASSIGN(HttpResponse metrics, pdc_->Get("/metrics"));
  EXPECT_THAT(metrics.body, HasSubstr("pdc_claim_conflicts 1"));
  // The API still says what it said: pdc did not pick a winner; both
  // claims say why they are not used.
  for (const std::string name : {"one", "two"}) {
    KubeReply c = AwaitObject(Claims(absl::StrCat("/", name)), [](const KubeReply& r) {
      return r.text.find("DeviceConflict") != std::string::npos;
    });
    EXPECT_EQ(c.Str({"status", "phase"}), "Bound");
    EXPECT_THAT(c.text, HasSubstr(R"("type":"DeviceConflict","status":"True")"));
    EXPECT_THAT(c.text, HasSubstr(absl::StrCat("is also in the status of claim(s) ", ns_, "/",
                                               name == "one" ? "two" : "one")));
  }

  // The administrator deletes the wrong one: it goes (pdc holds nothing for
  // it), the device stays unused, and the next start takes up the other.
  ASSERT_EQ(Call("DELETE", Claims("/two")).status, 200);
  AwaitObject(Claims("/two"), [](const KubeReply& r) { return r.status == 404; });
  EXPECT_THAT(PdcGet(absl::StrCat("/v1/namespaces/", ns_, "/claims/one")), HasSubstr("404"));
  std::string metrics_after;
  for (const absl::Time until = absl::Now() + absl::Seconds(10);
       metrics_after.find("pdc_claim_conflicts 0") == std::string::npos && absl::Now() < until;
       absl::SleepFor(absl::Milliseconds(20))) {
    metrics_after = PdcGet("/metrics");
  }
  EXPECT_THAT(metrics_after, HasSubstr("pdc_claim_conflicts 0"));
  RestartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  EXPECT_THAT(PdcGet(absl::StrCat("/v1/namespaces/", ns_, "/claims/one")),
              HasSubstr(R"("phase":"Bound")"));
}

// A claim in conflict for one of its devices holds its other devices' data
// too: none of them is offered to another claim.
TEST_F(ClaimsOnDoubleTest, EveryDeviceOfAClaimInConflictIsHeld) {
  KubeReply c = Call(
      "POST", Claims(),
      R"({"apiVersion":"pdc.kubevirt.io/v1alpha1","kind":"PersistentDeviceClaim","metadata":{"name":"pair"},"spec":{"resourceName":"devices.kubevirt.io/nvme","count":2,"reclaimPolicy":"Retain"}})");
  ASSERT_EQ(c.status, 201) << c.text;
  ASSERT_EQ(WriteStatus(Claims("/pair/status"),
                        R"({"status":{"phase":"Bound","node":"node-a","devices":[{"address":"0000:3b:00.0","serial":"SNA0"},{"address":"0000:5e:00.0","serial":"SNA1"}]}})"),
            200);
  ASSERT_EQ(Call("POST", Claims(), NvmeClaim("single", "Retain")).status, 201);
  ASSERT_EQ(WriteStatus(Claims("/single/status"),
                        R"({"status":{"phase":"Bound","node":"node-a","devices":[{"address":"0000:3b:00.0","serial":"SNA0"}]}})"),
            200);
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  ReportNodeA();
  const std::string devices = PdcGet("/v1/devices");
  EXPECT_THAT(devices, Not(HasSubstr(R"("state":"Free")")));
  EXPECT_THAT(devices, HasSubstr(absl::StrCat(R"("address":"0000:5e:00.0")")));
  // A fresh claim finds no device on node-a.
  ASSERT_EQ(Call("POST", Claims(), NvmeClaim("fresh", "Retain")).status, 201);
  AwaitObject(Claims("/fresh"),
              [](const KubeReply& r) { return r.Str({"status", "phase"}) == "Pending"; });
  const std::string vmi_uid = CreateVm("vm2");
  KubeReply pod = CreateClaimPod("vm2", vmi_uid, "virt-launcher-vm2-x", "fresh");
  ASSERT_EQ(pod.status, 201) << pod.text;
  EXPECT_THAT(Bind("virt-launcher-vm2-x", pod.Str({"metadata", "uid"})).body,
              Not(HasSubstr(R"({"Error":""})")));
}

}  // namespace
}  // namespace pdc::testing
