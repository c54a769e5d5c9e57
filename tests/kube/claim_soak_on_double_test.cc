// A randomized soak of Kubernetes mode against the kube-apiserver double on
// a real etcd: VMs created, started, stopped, deleted and re-created under
// the same names, their claims deleted, node-a's driver reporting erases as
// done (a returned drive back on nvme and named in the inventory's
// `returned`), their reclaim policy edited and their immutable spec fields edited
// (refused, 422, by the CRD's CEL rules, which the double enforces:
// tests/testing/kube_crd_rules.h), with apiserver delays, failures, lost
// answers and refusals (403: a quota, a forbidden status write; 422: a
// claim's create or status write found invalid) and leader kills (two
// pdc-extender replicas elect a leader over the double's Lease; the leader
// is stopped, the other takes over from what the API holds, a new replica
// stands by), under templateReclaimPolicy Delete and Retain. The
// invariants (tests/kube/claim_invariants.h) are checked after every step.
// Seeded (PDC_SOAK_SEED, default 31); PDC_SOAK_STEPS steps per policy
// (default 100: seconds, for ctest).
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/rest_json.h"
#include "tests/kube/claim_invariants.h"
#include "tests/kube/extender_on_double.h"
#include "tests/testing/kube_crd_rules.h"

namespace pdc::testing {
namespace {

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  int64_t n = 0;
  return v != nullptr && absl::SimpleAtoi(v, &n) && n > 0 ? n : fallback;
}

class ClaimSoakOnDoubleTest : public ExtenderOnDoubleTest,
                              public ::testing::WithParamInterface<ReclaimPolicy> {
 protected:
  void TearDown() override {
    kube::EnforceCrdRules(false);
    if (standby_) standby_->Stop();
    ExtenderOnDoubleTest::TearDown();
    if (IsSkipped()) return;
    DeleteAllClaims();
  }

  static constexpr int kVms = 3;
  static constexpr int kDrives = 4;

  struct Vm {
    std::string name;
    bool exists = false;
    std::string vmi_uid;
    std::string pod;  // "" no pod.
    std::string pod_uid;
    std::string pod_json;
    int generation = 0;  // Pods made, for their names.
    bool started = false;  // Its VMI has had a pod: the next start makes another VMI.
  };

  // node-a's drives; each on vfio-pci while pdc holds it for a claim or as
  // Released, else on nvme (an erase has finished).
  void Report() {
    std::map<std::string, std::string> driver;
    // Drives of deleted Delete-policy claims: pdc-node erases them, puts
    // them back on nvme and says so (the inventory's `returned`).
    std::vector<std::string> returned;
    absl::StatusOr<HttpResponse> listed = pdc_->Get("/v1/devices");
    if (listed.ok() && listed->status == 200) {
      absl::StatusOr<std::vector<api::DeviceListing>> devices = api::ParseDeviceList(listed->body);
      if (devices.ok()) {
        for (const api::DeviceListing& d : *devices) {
          const bool held =
              d.state == api::DeviceState::kAllocated || d.state == api::DeviceState::kReleased;
          driver[d.device.address.ToString()] = held ? "vfio-pci" : "nvme";
          if (d.state == api::DeviceState::kReturning) returned.push_back(d.device.serial);
        }
      }
    }
    std::vector<Device> inventory;
    for (int i = 0; i < kDrives; ++i) {
      Device d = NvmeDevice(Addr(absl::StrCat("0000:", absl::Hex(0x3b + i, absl::kZeroPad2),
                                              ":00.0")),
                            12 + i, 0, absl::StrCat("SN", i));
      auto it = driver.find(d.address.ToString());
      d.driver = it == driver.end() ? "nvme" : it->second;
      inventory.push_back(d);
    }
    NodeInventory inv = Inventory("node-a", inventory);
    inv.returned = returned;
    absl::StatusOr<HttpResponse> r = pdc_->Put("/v1/nodes/node-a/inventory", api::WriteInventory(inv));
    EXPECT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
  }

  // An administrator makes one Released drive free again (pdcctl release
  // device).
  void ReleaseOne() {
    absl::StatusOr<HttpResponse> listed = pdc_->Get("/v1/devices");
    if (!listed.ok() || listed->status != 200) return;
    absl::StatusOr<std::vector<api::DeviceListing>> devices = api::ParseDeviceList(listed->body);
    if (!devices.ok()) return;
    for (const api::DeviceListing& d : *devices) {
      if (d.state != api::DeviceState::kReleased) continue;
      (void)pdc_->Post(absl::StrCat("/v1/nodes/node-a/devices/", d.device.address.ToString(),
                                    "/release"),
                       "");
      return;
    }
  }

  // Waits (20 s) until the replica app_ serves as the leader.
  bool AwaitLeader() {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      absl::StatusOr<HttpResponse> r = pdc_->Get("/readyz/leader");
      if (r.ok() && r->status == 200) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }
  // A second replica, standing by (it waits for the Lease).
  void StartStandby() {
    std::unique_ptr<extender::ExtenderApp> leader = std::move(app_);
    std::unique_ptr<HttpClient> client = std::move(pdc_);
    StartExtender(StoreKind::kKubernetes);
    standby_ = std::move(app_);
    standby_client_ = std::move(pdc_);
    app_ = std::move(leader);
    pdc_ = std::move(client);
  }
  // The leader is killed: the standby takes the Lease over and serves from
  // what the API holds; a new replica stands by.
  void KillLeader() {
    app_->Stop();
    app_ = std::move(standby_);
    pdc_ = std::move(standby_client_);
    ASSERT_TRUE(AwaitLeader());
    StartStandby();
  }

  std::unique_ptr<extender::ExtenderApp> standby_;
  std::unique_ptr<HttpClient> standby_client_;

  void DeletePod(Vm& vm) {
    if (vm.pod.empty()) return;
    Call("DELETE", Pods(absl::StrCat("/", vm.pod)),
         R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})");
    vm.pod.clear();
  }
};

TEST_P(ClaimSoakOnDoubleTest, RandomLifecyclesKeepTheInvariants) {
  const ReclaimPolicy policy = GetParam();
  configure_ = [policy](PdcConfig* c) {
    c->extender.allocator.template_reclaim_policy = policy;
    c->extender.bind_deadline = absl::Seconds(4);
    // No pdc-node confirms hand-offs here: the gate would refuse every VM
    // after the first.
    c->extender.allocator.serialize_handoffs = false;
    // Two replicas electing a leader over the double's Lease.
    LeaderElectionConfig& le = c->extender.leader_election;
    le.enabled = true;
    le.lease_duration = absl::Seconds(4);
    le.renew_deadline = absl::Seconds(3);
    le.retry_period = absl::Milliseconds(200);
  };
  // The claim CRD's CEL rules, as kube-apiserver enforces them.
  kube::EnforceCrdRules(true);
  StartExtender(StoreKind::kKubernetes);
  ASSERT_TRUE(AwaitLeader());
  StartStandby();
  Report();
  ClaimInvariants invariants(client_.get(), ns_);
  const int64_t steps = EnvInt("PDC_SOAK_STEPS", 100);
  std::mt19937 rng(static_cast<uint32_t>(EnvInt("PDC_SOAK_SEED", 31)) +
                   (policy == ReclaimPolicy::kDelete ? 0 : 1));
  std::vector<Vm> vms(kVms);
  for (int i = 0; i < kVms; ++i) vms[i].name = absl::StrCat("vm", i);
  std::map<std::string, int64_t> done;
  std::map<std::string, int64_t> faults;  // Of the starts: what befell the bind.
  int64_t acked = 0;

  for (int64_t step = 0; step < steps; ++step) {
    Vm& vm = vms[std::uniform_int_distribution<int>(0, kVms - 1)(rng)];
    const int action = std::uniform_int_distribution<int>(0, 9)(rng);
    std::string what;
    switch (action) {
      case 0:
      case 1:  // Create (or re-create) the VM.
        if (vm.exists) {
          what = "report";
          Report();
          break;
        }
        what = "create VM";
        vm.vmi_uid = CreateVm(vm.name);
        vm.exists = true;
        vm.started = false;
        break;
      case 2:
      case 3:
      case 4: {  // Start it: a pod, filter, bind (maybe with a fault).
        if (!vm.exists || !vm.pod.empty()) {
          what = "report";
          Report();
          break;
        }
        what = "start VM";
        if (vm.started) vm.vmi_uid = RestartVmi(vm.name);
        vm.started = true;
        vm.pod = absl::StrCat("virt-launcher-", vm.name, "-", ++vm.generation);
        vm.pod_json = CreatePod(vm.name, vm.pod, vm.vmi_uid);
        rapidjson::Document d;
        d.Parse(vm.pod_json.data(), vm.pod_json.size());
        vm.pod_uid = kube::GetString(d, {"metadata", "uid"});
        bool kill_during_bind = false;
        switch (std::uniform_int_distribution<int>(0, 10)(rng)) {
          case 10:  // The leader is killed while the bind's claim write is slow.
            what += " (leader killed during the bind)";
            api_->DelayRequests({"", "persistentdeviceclaims"}, 1, absl::Milliseconds(500));
            kill_during_bind = true;
            break;
          case 0:
            what += " (claim write delayed)";
            api_->DelayRequests({"PATCH", "/persistentdeviceclaims/"}, 1, absl::Milliseconds(300));
            break;
          case 1:
            what += " (Binding answer lost)";
            api_->DropAfterCommit({"POST", "/binding"}, 1);
            break;
          case 2:
            what += " (annotation refused)";
            api_->FailRequests({"PATCH", absl::StrCat("/pods/", vm.pod)}, 1, 500);
            break;
          case 3:  // 403: the namespace's quota on claims is used up.
            what += " (claim create over quota)";
            api_->admission().ExceedQuota(ns_, "pdc.kubevirt.io", "persistentdeviceclaims");
            break;
          case 4:  // 403: a policy forbids pdc the claims' status here.
            what += " (claim status forbidden)";
            api_->admission().Forbid(
                {"pdc.kubevirt.io", "persistentdeviceclaims/status", "patch", ns_});
            break;
          case 5:  // 422: a validating admission policy refuses the claim's create.
            what += " (claim create invalid)";
            api_->FailRequests({"POST", "persistentdeviceclaims"}, 1, 422);
            break;
          case 6:  // 422: ... or a write of its status.
            what += " (claim status invalid)";
            api_->FailRequests({"PATCH", "/persistentdeviceclaims/"}, 1, 422);
            break;
          default:
            break;
        }
        (void)Filter(vm.pod_json);
        std::string answer;
        if (kill_during_bind) {
          std::thread bind([&, port = app_->port()] {
            HttpClientOptions o;
            o.base_url = absl::StrCat("http://127.0.0.1:", port);
            o.timeout = absl::Seconds(20);
            std::unique_ptr<HttpClient> c = std::move(HttpClient::Create(o)).value();
            absl::StatusOr<HttpResponse> r = c->Post(
                "/scheduler/bind",
                absl::StrCat(R"({"PodName":")", vm.pod, R"(","PodNamespace":")", ns_,
                             R"(","PodUID":")", vm.pod_uid, R"(","Node":"node-a"})"));
            answer = r.ok() ? r->body : r.status().ToString();
          });
          // Most often the bind is under way by then; either order is a case.
          absl::SleepFor(absl::Milliseconds(100));
          KillLeader();
          bind.join();
          if (HasFatalFailure()) return;
        } else {
          answer = Bind(vm.pod, vm.pod_uid).body;
        }
        api_->ClearFaults();
        api_->admission().Clear();
        if (answer == R"({"Error":""})") {
          invariants.Acknowledged({vm.pod, vm.pod_uid, {absl::StrCat(vm.name, "-nvme")}});
          ++acked;
        }
        break;
      }
      case 5:  // Stop it.
        what = "stop VM";
        DeletePod(vm);
        break;
      case 6:  // Delete it.
        if (!vm.exists) {
          what = "report";
          Report();
          break;
        }
        what = "delete VM";
        DeletePod(vm);
        Call("DELETE", Vmis(absl::StrCat("/", vm.name)));
        Call("DELETE", Vms(absl::StrCat("/", vm.name)));
        vm.exists = false;
        break;
      case 7:  // kubectl delete its claim, or edit its spec.
        if (const int edit = std::uniform_int_distribution<int>(0, 5)(rng); edit >= 3) {
          // An immutable field: the CRD's rules refuse it (422), whatever
          // the claim's state; an absent claim is 404.
          static constexpr const char* kEdits[] = {
              R"({"spec":{"count":2}})", R"({"spec":{"node":"node-b"}})",
              R"({"spec":{"serial":"SN-OTHER"}})"};
          what = "edit immutable spec";
          const KubeReply r = Call("PATCH", Claims(absl::StrCat("/", vm.name, "-nvme")),
                                   kEdits[edit - 3], "application/merge-patch+json");
          if (r.status != 404) {
            EXPECT_EQ(r.status, 422) << kEdits[edit - 3] << ": " << r.text;
            EXPECT_THAT(r.text, ::testing::HasSubstr("is immutable")) << r.text;
          }
          break;
        }
        if (std::uniform_int_distribution<int>(0, 1)(rng) == 0) {
          what = "edit reclaimPolicy";
          Call("PATCH", Claims(absl::StrCat("/", vm.name, "-nvme")),
               absl::StrCat(R"({"spec":{"reclaimPolicy":")",
                            std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? "Delete"
                                                                               : "Retain",
                            R"("}})"),
               "application/merge-patch+json");
          break;
        }
        what = "delete claim";
        Call("DELETE", Claims(absl::StrCat("/", vm.name, "-nvme")));
        break;
      case 8:  // The node's driver reports (erases done); Released drives freed.
        what = "report";
        ReleaseOne();
        Report();
        break;
      case 9:  // The leader killed: the other replica takes over from the API.
        what = "leader kill";
        KillLeader();
        if (HasFatalFailure()) return;
        Report();
        break;
    }
    const size_t fault = what.find(" (");
    ++done[what.substr(0, fault)];
    if (fault != std::string::npos) ++faults[what.substr(fault + 2, what.size() - fault - 3)];
    std::vector<std::string> v = invariants.Check();
    EXPECT_TRUE(v.empty()) << "step " << step << " (" << what << ", " << vm.name
                           << "): " << ::testing::PrintToString(v);
  }
  std::string summary;
  for (const auto& [what, n] : done) absl::StrAppend(&summary, " ", what, "=", n);
  absl::StrAppend(&summary, "; of the starts:");
  for (const auto& [what, n] : faults) absl::StrAppend(&summary, " ", what, "=", n);
  std::cout << "soak (" << ToString(policy) << "): " << invariants.steps() << " steps, "
            << acked << " binds acknowledged, " << invariants.violations()
            << " violations;" << summary << std::endl;
  RecordProperty("steps", static_cast<int>(invariants.steps()));
  RecordProperty("violations", static_cast<int>(invariants.violations()));
  EXPECT_EQ(invariants.violations(), 0);
}

INSTANTIATE_TEST_SUITE_P(Policies, ClaimSoakOnDoubleTest,
                         ::testing::Values(ReclaimPolicy::kDelete, ReclaimPolicy::kRetain),
                         [](const ::testing::TestParamInfo<ReclaimPolicy>& p) {
                           return std::string(ToString(p.param));
                         });

}  // namespace
}  // namespace pdc::testing
