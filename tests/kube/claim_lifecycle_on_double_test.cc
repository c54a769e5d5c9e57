// A claim's whole life in Kubernetes mode against the kube-apiserver double
// on a real etcd, the invariants (tests/kube/claim_invariants.h) checked
// after every step: a VM re-created under its old name waits for its old
// template claim's object to be gone; a running VM's claim is never taken
// from it; a retried bind is answered only once durable, and an attempt's
// late undo never reverts what a later attempt of the same pod relies on.
#include <string>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "extender/kube_api_store.h"
#include "tests/kube/claim_invariants.h"
#include "tests/kube/extender_on_double.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class ClaimLifecycleOnDoubleTest : public ExtenderOnDoubleTest {
 protected:
  void SetUp() override {
    ExtenderOnDoubleTest::SetUp();
    if (IsSkipped()) return;
    invariants_ = std::make_unique<ClaimInvariants>(client_.get(), ns_);
  }
  void TearDown() override {
    ExtenderOnDoubleTest::TearDown();
    if (IsSkipped()) return;
    DeleteAllClaims();
  }

  // Checks the invariants now; `step` names the step in a failure.
  void Step(const std::string& step) {
    std::vector<std::string> v = invariants_->Check();
    EXPECT_THAT(v, IsEmpty()) << "after step: " << step;
  }


  // node-a's two drives, 0000:3b:00.0 on `driver_3b`. Back on nvme, the
  // drive is acknowledged as handed back (erased), as pdc-node does for a
  // drive of its return list; an acknowledgement of a drive not on the list
  // changes nothing.
  void Report(const std::string& driver_3b) {
    Device d = NvmeDevice("0000:3b:00.0", 12, 0, "SNA0");
    d.driver = driver_3b;
    NodeInventory inv = Inventory("node-a", {d, NvmeDevice("0000:5e:00.0", 13, 0, "SNA1")});
    if (driver_3b == "nvme") inv.returned = {"SNA0"};
    ASSERT_OK_AND_ASSIGN(HttpResponse r,
                         pdc_->Put("/v1/nodes/node-a/inventory", api::WriteInventory(inv)));
    ASSERT_EQ(r.status, 200) << r.body;
  }

  // A VM, its VMI and a virt-launcher pod asking for one drive; the pod's
  // uid and its JSON (as kube-scheduler sends it to filter).
  struct VmPod {
    std::string uid;
    std::string json;
  };
  VmPod StartVm(const std::string& vm, const std::string& pod) {
    const std::string vmi_uid = CreateVm(vm);
    VmPod p;
    p.json = CreatePod(vm, pod, vmi_uid);
    rapidjson::Document d;
    d.Parse(p.json.data(), p.json.size());
    p.uid = kube::GetString(d, {"metadata", "uid"});
    return p;
  }
  void DeleteVm(const std::string& vm, const std::string& pod) {
    const std::string now = R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})";
    EXPECT_EQ(Call("DELETE", Pods(absl::StrCat("/", pod)), now).status, 200);
    EXPECT_EQ(Call("DELETE", Vmis(absl::StrCat("/", vm))).status, 200);
    EXPECT_EQ(Call("DELETE", Vms(absl::StrCat("/", vm))).status, 200);
  }
  // Binds; on OK the bind is acknowledged for the invariants.
  std::string BindAcked(const std::string& pod, const std::string& uid,
                        const std::string& claim) {
    std::string body = Bind(pod, uid).body;
    if (body == R"({"Error":""})") invariants_->Acknowledged({pod, uid, {claim}});
    return body;
  }

  std::unique_ptr<ClaimInvariants> invariants_;

  // A bind on another connection (kube-scheduler's first attempt).
  std::thread BindInBackground(const std::string& pod, const std::string& uid,
                               std::string* answer) {
    return std::thread([this, pod, uid, answer] {
      HttpClientOptions o;
      o.base_url = absl::StrCat("http://127.0.0.1:", app_->port());
      o.timeout = absl::Seconds(20);
      std::unique_ptr<HttpClient> c = std::move(HttpClient::Create(o)).value();
      absl::StatusOr<HttpResponse> r = c->Post(
          "/scheduler/bind", absl::StrCat(R"({"PodName":")", pod, R"(","PodNamespace":")", ns_,
                                          R"(","PodUID":")", uid, R"(","Node":"node-a"})"));
      *answer = r.ok() ? r->body : r.status().ToString();
    });
  }
  // Waits (10 s) until the double received a request starting with `what`.
  bool AwaitRequest(const std::string& what) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      for (const std::string& r : api_->requests()) {
        if (r.starts_with(what)) return true;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }
};

// templateReclaimPolicy Delete: VM vm-r is deleted, its claim vm-r-nvme
// stays (Reclaiming) until node-a has erased its drive. vm-r re-created
// and started meanwhile is refused, saying which object it waits for and
// why; it never binds into that object, and its drive never goes on the
// erase path. Once the old object is gone, it gets a claim of its own.
TEST_F(ClaimLifecycleOnDoubleTest, AVmReCreatedWaitsUntilItsOldClaimIsErased) {
  configure_ = [](PdcConfig* c) { c->extender.allocator.template_reclaim_policy = ReclaimPolicy::kDelete; };
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  Report("nvme");

  VmPod first = StartVm("vm-r", "virt-launcher-vm-r-1");
  ASSERT_EQ(BindAcked("virt-launcher-vm-r-1", first.uid, "vm-r-nvme"), R"({"Error":""})");
  const std::string old_uid = Call("GET", Claims("/vm-r-nvme")).Str({"metadata", "uid"});
  Report("vfio-pci");
  Step("vm-r bound");

  // The VM goes; the garbage collector deletes its claim, whose drive is
  // to be erased first.
  DeleteVm("vm-r", "virt-launcher-vm-r-1");
  AwaitObject(Claims("/vm-r-nvme"), [](const KubeReply& r) {
    return r.text.find(R"("type":"Reclaiming","status":"True")") != std::string::npos;
  });
  Step("vm-r deleted, its claim Reclaiming");

  // Re-created under the same name and started.
  VmPod second = StartVm("vm-r", "virt-launcher-vm-r-2");
  HttpResponse filter = Filter(second.json);
  EXPECT_THAT(filter.body, HasSubstr(absl::StrCat("PersistentDeviceClaim ", ns_,
                                                  "/vm-r-nvme (UID ", old_uid, ")")));
  EXPECT_THAT(filter.body, HasSubstr("erased device(s) 0000:3b:00.0"));
  EXPECT_THAT(filter.body, HasSubstr("FailedNodes"));
  const std::string refused = BindAcked("virt-launcher-vm-r-2", second.uid, "vm-r-nvme");
  EXPECT_THAT(refused, HasSubstr("is being deleted and waits until pdc-node on node node-a"));
  EXPECT_EQ(Call("GET", Claims("/vm-r-nvme")).Str({"metadata", "uid"}), old_uid);
  Step("vm-r re-created, refused");

  // The old drive comes back erased: the old object goes, vm-r binds anew.
  Report("nvme");
  AwaitObject(Claims("/vm-r-nvme"), [](const KubeReply& r) { return r.status == 404; });
  Step("old claim gone");
  ASSERT_EQ(BindAcked("virt-launcher-vm-r-2", second.uid, "vm-r-nvme"), R"({"Error":""})");
  KubeReply mine = Call("GET", Claims("/vm-r-nvme"));
  EXPECT_NE(mine.Str({"metadata", "uid"}), old_uid);
  EXPECT_EQ(mine.Str({"status", "phase"}), "Bound");
  EXPECT_EQ(mine.Str({"status", "reservedFor", "podUid"}), second.uid);
  Step("vm-r bound again");
  // Its drive is nobody's to erase, also after a restart.
  RestartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  Report(mine.Str({"status", "devices", "0", "address"}) == "0000:3b:00.0" ? "vfio-pci" : "nvme");
  Step("restarted");
  EXPECT_EQ(invariants_->violations(), 0);
}

// The object of a running VM's claim is deleted with its finalizer taken
// off by hand: the claim stays with its VM (its drive is not put on the
// erase path) until the VM's pod is gone.
TEST_F(ClaimLifecycleOnDoubleTest, ARunningVmsClaimIsNeverTakenFromIt) {
  configure_ = [](PdcConfig* c) { c->extender.allocator.template_reclaim_policy = ReclaimPolicy::kDelete; };
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  Report("nvme");
  VmPod vm = StartVm("vm1", "virt-launcher-vm1-1");
  ASSERT_EQ(BindAcked("virt-launcher-vm1-1", vm.uid, "vm1-nvme"), R"({"Error":""})");
  Report("vfio-pci");
  Step("vm1 bound");

  // Deleted (pdc keeps it: the VM runs), then its finalizer taken off.
  ASSERT_EQ(Call("DELETE", Claims("/vm1-nvme")).status, 200);
  AwaitObject(Claims("/vm1-nvme"), [](const KubeReply& r) {
    return !r.Str({"metadata", "deletionTimestamp"}).empty();
  });
  ASSERT_EQ(Call("PATCH", Claims("/vm1-nvme"), R"({"metadata":{"finalizers":null}})",
                 "application/merge-patch+json")
                .status,
            200);
  AwaitObject(Claims("/vm1-nvme"), [](const KubeReply& r) { return r.status == 404; });
  invariants_->RemovedByHand("vm1-nvme");
  // The claim controller has seen it (the watch) and decided.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (app_->claim_controller()->waiting() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(app_->claim_controller()->waiting(), 1u);
  ASSERT_OK_AND_ASSIGN(HttpResponse devices, pdc_->Get("/v1/devices"));
  EXPECT_THAT(devices.body, Not(HasSubstr("ReturningToHost")));
  Step("object removed by hand while vm1 runs");

  // The pod ends: now the claim goes by its policy.
  const std::string now = R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})";
  ASSERT_EQ(Call("DELETE", Pods("/virt-launcher-vm1-1"), now).status, 200);
  const absl::Time until = absl::Now() + absl::Seconds(15);
  std::string body;
  while (absl::Now() < until) {
    absl::StatusOr<HttpResponse> r = pdc_->Get("/v1/devices");
    if (r.ok()) body = r->body;
    if (body.find("ReturningToHost") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_THAT(body, HasSubstr("ReturningToHost"));
  Step("vm1's pod gone");
  EXPECT_EQ(invariants_->violations(), 0);
}


// kube-scheduler retries a pod while the first bind's claim write is still
// on its way to the apiserver: the retry finds the claims in place in
// memory and is answered only once they are in the API.
TEST_F(ClaimLifecycleOnDoubleTest, ARetriedBindIsAnsweredOnlyOnceTheClaimIsInTheApi) {
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  Report("nvme");
  VmPod vm = StartVm("vm1", "virt-launcher-vm1-1");
  api_->DelayRequests({"PATCH", "/persistentdeviceclaims/vm1-nvme/status"}, 1,
                      absl::Milliseconds(2000));
  std::string first;
  std::thread attempt1 = BindInBackground("virt-launcher-vm1-1", vm.uid, &first);
  ASSERT_TRUE(AwaitRequest(absl::StrCat("PATCH /apis/pdc.kubevirt.io/v1alpha1/namespaces/", ns_,
                                        "/persistentdeviceclaims/vm1-nvme/status")));
  // The retry, while the claim is Bound in memory only.
  EXPECT_EQ(BindAcked("virt-launcher-vm1-1", vm.uid, "vm1-nvme"), R"({"Error":""})");
  Step("the retry answered");
  attempt1.join();
  // The first attempt finds the pod bound by the retry: bound.
  EXPECT_EQ(first, R"({"Error":""})");
  Step("the first attempt answered");
  EXPECT_EQ(invariants_->violations(), 0);
}

// The first attempt's annotation is slow; the retry binds the pod; then
// the first attempt's Binding is refused: it undoes nothing the retry
// bound (an undo belongs to its attempt).
TEST_F(ClaimLifecycleOnDoubleTest, AnAttemptNeverUndoesWhatALaterAttemptOfThePodBound) {
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitReady());
  Report("nvme");
  VmPod vm = StartVm("vm1", "virt-launcher-vm1-1");
  api_->DelayRequests({"PATCH", "/pods/virt-launcher-vm1-1"}, 1, absl::Milliseconds(2000));
  std::string first;
  std::thread attempt1 = BindInBackground("virt-launcher-vm1-1", vm.uid, &first);
  ASSERT_TRUE(AwaitRequest(absl::StrCat("PATCH /api/v1/namespaces/", ns_,
                                        "/pods/virt-launcher-vm1-1")));
  EXPECT_EQ(BindAcked("virt-launcher-vm1-1", vm.uid, "vm1-nvme"), R"({"Error":""})");
  Step("the retry bound the pod");
  // The first attempt's Binding is refused for sure.
  api_->FailRequests({"POST", "/binding"}, 1, 403);
  attempt1.join();
  EXPECT_THAT(first, HasSubstr("taken over by a later bind"));
  Step("the first attempt failed late");
  KubeReply claim = Call("GET", Claims("/vm1-nvme"));
  EXPECT_EQ(claim.Str({"status", "phase"}), "Bound");
  EXPECT_EQ(claim.Str({"status", "reservedFor", "podUid"}), vm.uid);
  EXPECT_EQ(invariants_->violations(), 0);
}

}  // namespace
}  // namespace pdc::testing
