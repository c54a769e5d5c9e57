// pdc-extender (the program, store: kubernetes) killed with SIGKILL at
// random points of VMs' lives, against the kube-apiserver double on a real
// etcd with faults injected into its writes: every VM start gets the VM's
// own device, no device is ever in two claims, a VM re-created under the
// same name never gets the old VM's device, and after every restart
// pdc-extender's claims equal what the API holds.
#include <signal.h>

#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/handoff_json.h"
#include "tests/kube/extender_on_double.h"
#include "tests/testing/extender_process.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;

class Kill9OnDoubleTest : public ExtenderOnDoubleTest {
 protected:
  void TearDown() override {
    proc_.reset();
    ExtenderOnDoubleTest::TearDown();
    if (IsSkipped()) return;
    DeleteAllClaims();
  }

  // Starts pdc-extender and waits until it is ready and node-a reported.
  void Spawn() {
    proc_ = std::make_unique<ExtenderProcess>(
        PDC_EXTENDER_BINARY,
        std::vector<std::string>{"--extender.listen=127.0.0.1:0", "--extender.store=kubernetes",
                                 "--extender.kubernetes.mode=kubeconfig",
                                 "--extender.kubernetes.kubeconfig=" + kubeconfig_,
                                 "--extender.kubernetes.namespace=" + ns_,
                                 "--extender.workerThreads=2", "--logLevel=warn"});
    ASSERT_NE(proc_->port(), 0) << "pdc-extender did not start";
    pdc_ = proc_->Client();
    ASSERT_TRUE(AwaitReady());
    ASSERT_OK_AND_ASSIGN(
        HttpResponse r,
        pdc_->Put("/v1/nodes/node-a/inventory",
                  api::WriteInventory(Inventory(
                      "node-a", {NvmeDevice("0000:3b:00.0", 12, 0, "SN0"),
                                 NvmeDevice("0000:5e:00.0", 13, 0, "SN1"),
                                 NvmeDevice("0000:86:00.0", 14, 1, "SN2"),
                                 NvmeDevice("0000:af:00.0", 15, 1, "SN3")}))));
    ASSERT_EQ(r.status, 200) << r.body;
  }

  // As pdc-node's device plugin does once kubelet's Allocate answered: the
  // pods waiting for their devices on node-a received them.
  void ConfirmHandoffs() {
    ASSERT_OK_AND_ASSIGN(HttpResponse list, pdc_->Get("/v1/nodes/node-a/handoffs"));
    ASSERT_EQ(list.status, 200) << list.body;
    ASSERT_OK_AND_ASSIGN(std::vector<PendingHandoff> pending, api::ParseHandoffList(list.body));
    for (const PendingHandoff& p : pending) {
      ASSERT_OK_AND_ASSIGN(
          HttpResponse r,
          pdc_->Post("/v1/nodes/node-a/handoffs",
                     api::WriteHandoffConfirm({p.pod.pod_uid, p.resource_name, p.devices})));
      ASSERT_EQ(r.status, 200) << r.body;
    }
  }

  // What the API holds, checked: no device in two claims' status, and
  // pdc-extender's view of each claim the same. The devices of Bound claims
  // by claim name.
  std::map<std::string, std::string> CheckAgainstApi() {
    std::map<std::string, std::string> out;
    KubeReply list = Call("GET", Claims());
    const kube::Value* items = kube::Find(list.json, {"items"});
    if (items == nullptr || !items->IsArray()) return out;
    std::map<std::string, std::string> owner_of_device;
    for (const kube::Value& item : items->GetArray()) {
      const std::string name = kube::GetString(item, {"metadata", "name"});
      if (kube::Find(item, {"metadata", "deletionTimestamp"}) != nullptr) continue;
      const std::string phase = kube::GetString(item, {"status", "phase"});
      std::string devices;
      if (const kube::Value* d = kube::Find(item, {"status", "devices"});
          d != nullptr && d->IsArray()) {
        for (const kube::Value& dev : d->GetArray()) {
          const std::string a = kube::GetString(dev, {"address"});
          EXPECT_TRUE(owner_of_device.emplace(a, name).second)
              << "device " << a << " in claims " << owner_of_device[a] << " and " << name;
          absl::StrAppend(&devices, a, ";");
        }
      }
      if (phase == "Bound") out[name] = devices;
      // pdc-extender says the same.
      absl::StatusOr<HttpResponse> mine =
          pdc_->Get(absl::StrCat("/v1/namespaces/", ns_, "/claims/", name));
      if (!mine.ok() || phase.empty()) continue;
      EXPECT_EQ(mine->status, 200) << name << ": " << mine->body;
      EXPECT_THAT(mine->body, HasSubstr(absl::StrCat(R"("phase":")", phase, R"(")")));
      if (!devices.empty()) {
        EXPECT_THAT(mine->body,
                    HasSubstr(absl::StrCat(R"("address":")", devices.substr(0, 12), R"(")")));
      }
    }
    return out;
  }

  std::unique_ptr<ExtenderProcess> proc_;
};

TEST_F(Kill9OnDoubleTest, EveryRestartGetsItsOwnDeviceWhateverFails) {
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  const std::vector<std::string> vms = {"vm0", "vm1", "vm2"};
  std::map<std::string, std::string> vmi_uid;
  for (const std::string& vm : vms) vmi_uid[vm] = CreateVm(vm);
  // What each VM's template claim was first bound to: never changes.
  std::map<std::string, std::string> first_device;
  std::string old_vm2_device;
  const std::vector<std::function<void()>> faults = {
      [] {},
      [] { api_->DropAfterCommit({"PATCH", "/status"}); },
      [] { api_->FailRequests({"PATCH", "/status"}, 2, 503); },
      [] { api_->DelayRequests({"POST", "persistentdeviceclaims"}, 1, absl::Milliseconds(300)); },
      [] { api_->FailRequests({"POST", "/binding"}, 1, 500); },
      [] { api_->DropAfterCommit({"POST", "/binding"}); },
  };
  constexpr int kRounds = 12;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    Spawn();
    if (HasFatalFailure()) return;
    ConfirmHandoffs();
    if (HasFatalFailure()) return;
    const std::map<std::string, std::string> bound = CheckAgainstApi();
    for (const auto& [vm, dev] : first_device) {
      auto it = bound.find(absl::StrCat(vm, "-nvme"));
      if (it != bound.end()) {
        EXPECT_EQ(it->second, dev) << vm << " changed device";
      }
    }

    if (round == kRounds / 2) {
      // vm2 is deleted and created again under its name: another VM.
      old_vm2_device = first_device["vm2"];
      ASSERT_EQ(Call("DELETE", Vms("/vm2")).status, 200);
      ASSERT_TRUE(api_->WaitGarbageCollectorIdle(absl::Seconds(10)));
      // The old VM's claim goes (pdc lets go of it once its pod is gone).
      const absl::Time deadline = absl::Now() + absl::Seconds(20);
      while (Call("GET", Claims("/vm2-nvme")).status != 404 && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(50));
      }
      ASSERT_EQ(Call("GET", Claims("/vm2-nvme")).status, 404);
      first_device.erase("vm2");
      vmi_uid["vm2"] = CreateVm("vm2");
    }

    // One VM starts: a new virt-launcher pod.
    const std::string& vm = vms[round % vms.size()];
    const std::string pod_name = absl::StrCat("virt-launcher-", vm, "-", round);
    Call("DELETE", Pods(absl::StrCat("/virt-launcher-", vm, "-", round - 3)),
         R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})");
    if (round >= static_cast<int>(vms.size())) vmi_uid[vm] = RestartVmi(vm);
    const std::string pod = CreatePod(vm, pod_name, vmi_uid[vm]);
    const std::string pod_uid = Call("GET", Pods("/" + pod_name)).Str({"metadata", "uid"});
    // The watch may not have brought the new VMI yet.
    std::string answer;
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      answer = Filter(pod).body;
      if (answer.find(R"("NodeNames":["node-a"])") != std::string::npos) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    ASSERT_THAT(answer, HasSubstr(R"("NodeNames":["node-a"])"));
    faults[round % faults.size()]();

    // Bind, and kill -9 at a random moment (or once it answered).
    std::string bind_answer;
    std::thread binder([&] {
      absl::StatusOr<HttpResponse> r = pdc_->Post(
          "/scheduler/bind", absl::StrCat(R"({"PodName":")", pod_name, R"(","PodNamespace":")",
                                          ns_, R"(","PodUID":")", pod_uid,
                                          R"(","Node":"node-a"})"));
      if (r.ok()) bind_answer = r->body;
    });
    if (round % 2 == 0) {
      absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(0, 40)(rng)));
      proc_->Kill(SIGKILL);
      binder.join();
    } else {
      binder.join();
      proc_->Kill(SIGKILL);
    }
    if (bind_answer == R"({"Error":""})") {
      // A bind answered OK is recorded: its claim is Bound in the API.
      KubeReply claim = Call("GET", Claims(absl::StrCat("/", vm, "-nvme")));
      EXPECT_EQ(claim.Str({"status", "phase"}), "Bound") << claim.text;
    }
    KubeReply claim = Call("GET", Claims(absl::StrCat("/", vm, "-nvme")));
    if (claim.Str({"status", "phase"}) == "Bound" && !first_device.contains(vm)) {
      std::string devices;
      for (const kube::Value& d : kube::Find(claim.json, {"status", "devices"})->GetArray()) {
        absl::StrAppend(&devices, kube::GetString(d, {"address"}), ";");
      }
      first_device[vm] = devices;
    }
  }
  Spawn();
  CheckAgainstApi();
  // Every VM got a device at some start, and the re-created vm2 never got
  // the old vm2's (Retain: it stays Released).
  EXPECT_EQ(first_device.size(), vms.size());
  ASSERT_FALSE(old_vm2_device.empty());
  if (first_device.contains("vm2")) {
    EXPECT_NE(first_device["vm2"], old_vm2_device);
  }
}

}  // namespace
}  // namespace pdc::testing
