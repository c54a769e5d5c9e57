// The fixture of the tests that run the whole pdc-extender in Kubernetes
// mode (kubeconfig) against the kube-apiserver double on a real etcd, and
// drive it as kube-scheduler, virt-controller and pdc-node would.
#ifndef PDC_TESTS_KUBE_EXTENDER_ON_DOUBLE_H_
#define PDC_TESTS_KUBE_EXTENDER_ON_DOUBLE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/rest_json.h"
#include "common/file_util.h"
#include "config/config.h"
#include "extender/extender_app.h"
#include "tests/kube/kube_test_util.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/scheduler_requests.h"
#include "tests/testing/temp_dir.h"

namespace pdc::testing {

class ExtenderOnDoubleTest : public KubeDoubleTest {
 protected:
  void SetUp() override {
    KubeDoubleTest::SetUp();
    if (IsSkipped()) return;
    kubeconfig_ = dir_.Join("kubeconfig");
    ASSERT_OK(WriteFileAtomically(kubeconfig_, absl::StrCat(R"(apiVersion: v1
kind: Config
current-context: t
contexts:
- name: t
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster: {server: ")", Url(), R"("}
users:
- name: u
  user: {token: t0ken}
)")));
  }
  void TearDown() override {
    if (app_) app_->Stop();
  }

  // `data_dir`: the file store's (store: file).
  void StartExtender(StoreKind store = StoreKind::kMemory, const std::string& data_dir = "") {
    PdcConfig c;
    c.extender.listen = "127.0.0.1:0";
    c.extender.store = store;
    if (!data_dir.empty()) c.extender.data_dir = data_dir;
    c.extender.kubernetes.ns = ns_;
    c.extender.worker_threads = 2;
    c.extender.bind_deadline = absl::Seconds(8);
    c.extender.kubernetes.mode = KubernetesMode::kKubeconfig;
    c.extender.kubernetes.kubeconfig = kubeconfig_;
    if (configure_) configure_(&c);
    absl::StatusOr<std::unique_ptr<extender::ExtenderApp>> app =
        extender::ExtenderApp::Start(c, {.version = "test"});
    ASSERT_TRUE(app.ok()) << app.status();
    app_ = *std::move(app);
    HttpClientOptions o;
    o.base_url = absl::StrCat("http://127.0.0.1:", app_->port());
    o.timeout = absl::Seconds(20);
    pdc_ = std::move(HttpClient::Create(o)).value();
  }

  // Changes the configuration StartExtender starts with.
  std::function<void(PdcConfig*)> configure_;

  // Stops pdc-extender and starts a new one. With store: kubernetes the
  // process keeps nothing the API does not hold (every change it
  // acknowledged is there), so the new one sees what a kill -9 leaves.
  void RestartExtender(StoreKind store) {
    app_->Stop();
    app_.reset();
    StartExtender(store);
  }

  // pdc-extender (store: kubernetes) lists the claims of all namespaces:
  // a test that made some removes them, finalizers first, for the next.
  void DeleteAllClaims() {
    KubeReply list = Call("GET", Claims());
    const kube::Value* items = kube::Find(list.json, {"items"});
    if (items == nullptr || !items->IsArray()) return;
    for (const kube::Value& item : items->GetArray()) {
      const std::string name = kube::GetString(item, {"metadata", "name"});
      Call("PATCH", Claims(absl::StrCat("/", name)), R"({"metadata":{"finalizers":null}})",
           "application/merge-patch+json");
      Call("DELETE", Claims(absl::StrCat("/", name)));
    }
  }

  // Waits (10 s) until no VM holds the claim `key` in pdc-extender.
  bool AwaitUnreserved(const ClaimKey& key) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      absl::StatusOr<Claim> c = app_->allocator()->GetClaim(key);
      if (c.ok() && !c->status.reserved_for.has_value()) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  bool AwaitReady() {
    const absl::Time deadline = absl::Now() + absl::Seconds(15);
    while (absl::Now() < deadline) {
      absl::StatusOr<HttpResponse> r = pdc_->Get("/readyz");
      if (r.ok() && r->status == 200) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  void ReportNodeA() {
    ASSERT_OK_AND_ASSIGN(
        HttpResponse r,
        pdc_->Put("/v1/nodes/node-a/inventory",
                  api::WriteInventory(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 12, 0, "SNA0"),
                                                           NvmeDevice("0000:5e:00.0", 13, 0, "SNA1")}))));
    ASSERT_EQ(r.status, 200) << r.body;
  }

  // Creates an object and returns its uid.
  std::string Create(const std::string& path, const std::string& json) {
    KubeReply r = Call("POST", path, json);
    EXPECT_EQ(r.status, 201) << r.text;
    return r.Str({"metadata", "uid"});
  }
  static std::string Owner(const std::string& kind, const std::string& name,
                           const std::string& uid) {
    return absl::StrCat(R"("ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":")", kind,
                        R"(","name":")", name, R"(","uid":")", uid,
                        R"(","controller":true,"blockOwnerDeletion":true}])");
  }
  // A VirtualMachine and its VirtualMachineInstance, as virt-controller
  // makes them; returns the VMI's uid.
  std::string CreateVm(const std::string& vm) {
    const std::string vm_uid = Create(
        Vms(), absl::StrCat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":")",
                            vm, R"("},"spec":{"running":true}})"));
    return Create(Vmis(), absl::StrCat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":")",
                                       vm, R"(",)", Owner("VirtualMachine", vm, vm_uid),
                                       R"(},"spec":{}})"));
  }
  // VM `vm` (made by CreateVm) starts again: virt-controller makes a new
  // VirtualMachineInstance (another UID) for every start, and one launcher
  // pod for it. Deletes the VMI of the last start; returns the new VMI's uid.
  std::string RestartVmi(const std::string& vm) {
    Call("DELETE", Vmis(absl::StrCat("/", vm)));
    const std::string vm_uid = Call("GET", Vms(absl::StrCat("/", vm))).Str({"metadata", "uid"});
    return Create(Vmis(), absl::StrCat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":")",
                                       vm, R"(",)", Owner("VirtualMachine", vm, vm_uid),
                                       R"(},"spec":{}})"));
  }
  // The virt-launcher pod of a VMI, created in the API; returns it as
  // kube-scheduler sees it (the stored object).
  std::string CreatePod(const std::string& vm, const std::string& pod, const std::string& vmi_uid) {
    KubeReply r = Call(
        "POST", Pods(),
        absl::StrCat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", pod,
                     R"(","labels":{"kubevirt.io":"virt-launcher","vm.kubevirt.io/name":")", vm,
                     R"(","kubevirt.io/created-by":")", vmi_uid, R"("},)",
                     Owner("VirtualMachineInstance", vm, vmi_uid),
                     R"(},"spec":{"schedulerName":"pdc-scheduler","containers":[{"name":"compute","image":"virt-launcher","resources":{"limits":{"devices.kubevirt.io/nvme":"1"},"requests":{"devices.kubevirt.io/nvme":"1"}}}]}})"));
    EXPECT_EQ(r.status, 201) << r.text;
    return r.text;
  }

  // Polls the object at `path` until `pred` holds (15 s); the last reply.
  template <typename Pred>
  KubeReply AwaitObject(const std::string& path, Pred pred) {
    KubeReply r;
    const absl::Time deadline = absl::Now() + absl::Seconds(15);
    while (absl::Now() < deadline) {
      r = Call("GET", path);
      if (pred(r)) return r;
      absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << "waited in vain on " << path << ": " << r.text;
    return r;
  }

  // kube-scheduler's filter of `pod` on node-a. A VM created just before
  // may not have reached pdc-extender's watch yet: that answer ("... is not
  // known to pdc-extender (deleted, or not seen yet)") is asked again, as
  // kube-scheduler retries an unschedulable pod, for up to 15 s.
  HttpResponse Filter(const std::string& pod) {
    const absl::Time deadline = absl::Now() + absl::Seconds(15);
    while (true) {
      absl::StatusOr<HttpResponse> r =
          pdc_->Post("/scheduler/filter", NamesArgs(pod, {"node-a"}));
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) return HttpResponse{};
      if (r->body.find("is not known to pdc-extender") == std::string::npos ||
          absl::Now() >= deadline) {
        return *r;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  // kube-scheduler's bind of `pod` to node-a; an answer that the pod's VMI
  // is not known yet is asked again, as Filter does (kube-scheduler puts a
  // pod whose bind failed back in its queue).
  HttpResponse Bind(const std::string& pod, const std::string& uid) {
    const absl::Time deadline = absl::Now() + absl::Seconds(15);
    while (true) {
      absl::StatusOr<HttpResponse> r = pdc_->Post(
          "/scheduler/bind", absl::StrCat(R"({"PodName":")", pod, R"(","PodNamespace":")", ns_,
                                          R"(","PodUID":")", uid, R"(","Node":"node-a"})"));
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) return HttpResponse{};
      if (r->body.find("is not known to pdc-extender") == std::string::npos ||
          absl::Now() >= deadline) {
        return *r;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  TempDir dir_;
  std::string kubeconfig_;
  std::unique_ptr<extender::ExtenderApp> app_;
  std::unique_ptr<HttpClient> pdc_;
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_KUBE_EXTENDER_ON_DOUBLE_H_
