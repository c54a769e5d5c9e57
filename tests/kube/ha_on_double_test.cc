// Highly available pdc-extender: three replicas of the program (leader
// election through a Lease) against two kube-apiserver doubles - two
// kube-apiservers - over a real three-member etcd cluster. Four binders
// restart VMs through a client that fails over like kube-scheduler behind
// the Service (it retries until one replica answers), a heartbeat plays
// pdc-node (inventory and hand-off confirmations, through the same client),
// and the leader is killed with SIGKILL again and again, every third time
// with an etcd member down, every fourth time cut off from its apiserver
// instead. Asserted: every acknowledged bind is in the claims, every VM
// keeps its device across every failover, no device is ever in two claims,
// no two replicas ever served binds at once, a cut-off leader exits 1;
// reported: the time from each kill to the first bind served by the new
// leader, and the filter and bind calls no replica served meanwhile.
//
// PDC_HA_KILLS (default 4) sets the number of kills; the figures in
// bench/README.md come from PDC_HA_KILLS=20.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/handoff_json.h"
#include "tests/kube/extender_on_double.h"
#include "tests/testing/extender_process.h"

namespace pdc::testing {
namespace {

constexpr int kReplicas = 3;
constexpr int kVms = 12;
constexpr int kBinders = 4;

class HaOnDoubleTest : public ExtenderOnDoubleTest {
 protected:
  static void SetUpTestSuite() {
    StartEtcdAndDouble(3);
    if (etcd_ == nullptr) return;
    // The second apiserver runs no garbage collector (kube-controller-
    // manager's runs once per cluster).
    KubeApiServerOptions o = DoubleOptions();
    o.garbage_collector = false;
    absl::StatusOr<std::unique_ptr<KubeApiServerDouble>> b =
        KubeApiServerDouble::Start(etcd_->client_ports(), o);
    ASSERT_TRUE(b.ok()) << b.status();
    api_b_ = b->release();
    // The test's own calls (virt-controller's, pdc-node's) go to a third,
    // which no fault touches.
    absl::StatusOr<std::unique_ptr<KubeApiServerDouble>> c =
        KubeApiServerDouble::Start(etcd_->client_ports(), o);
    ASSERT_TRUE(c.ok()) << c.status();
    api_c_ = c->release();
  }
  static void TearDownTestSuite() {
    delete api_b_;
    api_b_ = nullptr;
    delete api_c_;
    api_c_ = nullptr;
    KubeDoubleTest::TearDownTestSuite();
  }
  void SetUp() override {
    ExtenderOnDoubleTest::SetUp();
    if (IsSkipped()) return;
    std::string text = *ReadFileToString(kubeconfig_);
    const std::string a = Url();
    text.replace(text.find(a), a.size(), api_b_->url());
    kubeconfig_b_ = dir_.Join("kubeconfig-b");
    ASSERT_OK(WriteFileAtomically(kubeconfig_b_, text));
    HttpClientOptions o;
    o.base_url = api_c_->url();
    o.timeout = absl::Seconds(10);
    client_ = std::move(HttpClient::Create(o)).value();
  }
  void TearDown() override {
    stop_.store(true);
    for (std::thread& t : threads_) t.join();
    for (auto& r : replicas_) r.reset();
    ExtenderOnDoubleTest::TearDown();
    if (!IsSkipped()) DeleteAllClaims();
  }

  // Replica i talks to apiserver A (i even) or B (i odd).
  void StartReplica(int i) {
    replicas_[i] = std::make_unique<ExtenderProcess>(
        PDC_EXTENDER_BINARY,
        std::vector<std::string>{
            "--extender.listen=127.0.0.1:0", "--extender.store=kubernetes",
            "--extender.kubernetes.mode=kubeconfig",
            "--extender.kubernetes.kubeconfig=" +
                (i % 2 == 0 ? kubeconfig_ : kubeconfig_b_),
            "--extender.kubernetes.namespace=" + ns_,
            "--extender.workerThreads=4",
            "--extender.leaderElection.enabled=true",
            absl::StrCat("--extender.leaderElection.identity=replica-", i),
            "--extender.leaderElection.leaseDuration=2s",
            "--extender.leaderElection.renewDeadline=1500ms",
            "--extender.leaderElection.retryPeriod=250ms", "--logLevel=warn"});
    ASSERT_NE(replicas_[i]->port(), 0) << "replica " << i << " did not start";
    ports_[i].store(replicas_[i]->port());
  }

  // Each thread's connections to the replicas (a client serialises its
  // requests; kube-scheduler binds in parallel).
  struct Clients {
    uint16_t port[kReplicas] = {};
    std::unique_ptr<HttpClient> client[kReplicas];
  };
  HttpClient* ClientOf(Clients& cs, int i) {
    const uint16_t p = ports_[i].load();
    if (p == 0) return nullptr;
    if (cs.port[i] != p) {
      HttpClientOptions o;
      o.base_url = absl::StrCat("http://127.0.0.1:", p);
      o.timeout = absl::Seconds(3);
      absl::StatusOr<std::unique_ptr<HttpClient>> c = HttpClient::Create(o);
      if (!c.ok()) return nullptr;
      cs.client[i] = *std::move(c);
      cs.port[i] = p;
    }
    return cs.client[i].get();
  }

  // The replica that answers /readyz/leader with 200, or -1.
  int Leader(Clients& cs) {
    for (int i = 0; i < kReplicas; ++i) {
      HttpClient* c = ClientOf(cs, i);
      if (c == nullptr) continue;
      absl::StatusOr<HttpResponse> r = c->Get("/readyz/leader");
      if (r.ok() && r->status == 200) return i;
    }
    return -1;
  }

  // As kube-scheduler and pdc-node behind the Service: the first replica
  // that answers 2xx (the others are standing by, starting or dead).
  // `served_by`: the replica that answered.
  std::optional<HttpResponse> Failover(Clients& cs, const std::string& method,
                                       const std::string& path,
                                       const std::string& body,
                                       int* served_by = nullptr) {
    for (int i = 0; i < kReplicas; ++i) {
      HttpClient* c = ClientOf(cs, i);
      if (c == nullptr) continue;
      HttpRequestOptions o;
      o.content_type = "application/json";
      absl::StatusOr<HttpResponse> r = c->Do(method, path, body, o);
      if (r.ok() && r->status / 100 == 2) {
        if (served_by != nullptr) *served_by = i;
        return *r;
      }
    }
    return std::nullopt;
  }

  // pdc-node: inventory and hand-off confirmations, every 100 ms.
  void Heartbeat() {
    std::vector<Device> devices;
    for (int i = 0; i < 32; ++i) {
      devices.push_back(NvmeDevice(absl::StrFormat("0000:%02x:00.0", 0x10 + i),
                                   20 + i, 0, absl::StrCat("SN", i)));
    }
    const std::string inventory =
        api::WriteInventory(Inventory("node-a", devices));
    Clients cs;
    while (!stop_.load()) {
      Failover(cs, "PUT", "/v1/nodes/node-a/inventory", inventory);
      if (std::optional<HttpResponse> list =
              Failover(cs, "GET", "/v1/nodes/node-a/handoffs", "")) {
        absl::StatusOr<std::vector<PendingHandoff>> pending =
            api::ParseHandoffList(list->body);
        if (pending.ok()) {
          for (const PendingHandoff& p : *pending) {
            Failover(cs, "POST", "/v1/nodes/node-a/handoffs",
                     api::WriteHandoffConfirm(
                         {p.pod.pod_uid, p.resource_name, p.devices}));
          }
        }
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  }

  // One VM start: a new virt-launcher pod, filtered and bound through the
  // failing-over client until a replica binds it (or 30 s).
  bool StartVm(Clients& cs, int vm, int run) {
    const std::string name = absl::StrCat("vm", vm);
    const std::string pod_name = absl::StrCat("virt-launcher-", name, "-", run);
    if (run > 0) {
      Call(
          "DELETE", Pods(absl::StrCat("/virt-launcher-", name, "-", run - 1)),
          R"({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0})");
    }
    if (run > 0) vmi_uid_[vm] = RestartVmi(name);
    const std::string pod = CreatePod(name, pod_name, vmi_uid_[vm]);
    const std::string pod_uid =
        Call("GET", Pods("/" + pod_name)).Str({"metadata", "uid"});
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!stop_.load() && absl::Now() < deadline) {
      std::optional<HttpResponse> f =
          Failover(cs, "POST", "/scheduler/filter", NamesArgs(pod, {"node-a"}));
      if (!f) no_leader_.fetch_add(1);
      if (f && f->body.find(R"("NodeNames":["node-a"])") != std::string::npos) {
        int binder = -1;
        std::optional<HttpResponse> b = Failover(
            cs, "POST", "/scheduler/bind",
            absl::StrCat(R"({"PodName":")", pod_name, R"(","PodNamespace":")",
                         ns_, R"(","PodUID":")", pod_uid,
                         R"(","Node":"node-a"})"),
            &binder);
        if (!b) no_leader_.fetch_add(1);
        if (b && b->body == R"({"Error":""})") {
          // An acknowledged bind is recorded: its claim is Bound in the API.
          KubeReply claim =
              Call("GET", Claims(absl::StrCat("/", name, "-nvme")));
          EXPECT_EQ(claim.Str({"status", "phase"}), "Bound") << claim.text;
          binds_.fetch_add(1);
          std::lock_guard<std::mutex> l(mu_);
          last_bind_ = absl::Now();
          bind_times_.push_back(last_bind_);
          served_.push_back({last_bind_, binder});
          return true;
        }
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  // The device of each Bound claim, checked: no device in two claims.
  std::map<std::string, std::string> BoundDevices() {
    std::map<std::string, std::string> out;
    std::map<std::string, std::string> owner;
    KubeReply list = Call("GET", Claims());
    const kube::Value* items = kube::Find(list.json, {"items"});
    if (items == nullptr || !items->IsArray()) return out;
    for (const kube::Value& item : items->GetArray()) {
      const std::string name = kube::GetString(item, {"metadata", "name"});
      const kube::Value* d = kube::Find(item, {"status", "devices"});
      if (d == nullptr || !d->IsArray()) continue;
      std::string devices;
      for (const kube::Value& dev : d->GetArray()) {
        const std::string a = kube::GetString(dev, {"address"});
        EXPECT_TRUE(owner.emplace(a, name).second)
            << "device " << a << " in claims " << owner[a] << " and " << name;
        absl::StrAppend(&devices, a, ";");
      }
      if (kube::GetString(item, {"status", "phase"}) == "Bound")
        out[name] = devices;
    }
    return out;
  }

  // The VMs, three replicas (one leads), the heartbeat and the binders.
  void StartLoad(Clients& cs) {
    for (int vm = 0; vm < kVms; ++vm)
      vmi_uid_.push_back(CreateVm(absl::StrCat("vm", vm)));
    for (int i = 0; i < kReplicas; ++i) {
      StartReplica(i);
      if (HasFatalFailure()) return;
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (Leader(cs) < 0 && absl::Now() < deadline)
      absl::SleepFor(absl::Milliseconds(50));
    ASSERT_GE(Leader(cs), 0) << "no replica became the leader";
    threads_.emplace_back([this] { Heartbeat(); });
    // Each binder restarts its own VMs, one after the other, for ever.
    for (int b = 0; b < kBinders; ++b) {
      threads_.emplace_back([this, b] {
        Clients mine;
        std::vector<int> runs(kVms, 0);
        for (int n = 0; !stop_.load(); ++n) {
          const int vm = b + kBinders * (n % (kVms / kBinders));
          if (!StartVm(mine, vm, runs[vm]++) && !stop_.load())
            failed_starts_.fetch_add(1);
        }
      });
    }
  }
  void StopLoad() {
    stop_.store(true);
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  // Waits (10 s) until `n` more binds were acknowledged.
  bool AwaitBinds(int n) {
    const int before = binds_.load();
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (binds_.load() < before + n && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    return binds_.load() >= before + n;
  }
  // Every Bound claim still has the devices it had when first seen.
  void CheckNoVmChangedDevice() {
    for (const auto& [claim, devices] : BoundDevices()) {
      auto [it, fresh] = first_.emplace(claim, devices);
      EXPECT_EQ(it->second, devices) << claim << " changed device";
    }
  }

  static inline KubeApiServerDouble* api_b_ = nullptr;
  static inline KubeApiServerDouble* api_c_ = nullptr;
  std::string kubeconfig_b_;
  std::unique_ptr<ExtenderProcess> replicas_[kReplicas];
  std::mutex mu_;
  std::atomic<uint16_t> ports_[kReplicas] = {};
  std::vector<std::string> vmi_uid_;
  std::atomic<bool> stop_{false};
  std::atomic<int> binds_{0};
  // Filter or bind calls that no replica answered (no leader serving).
  std::atomic<int> no_leader_{0};
  absl::Time last_bind_ = absl::InfinitePast();
  std::vector<std::thread> threads_;
  std::atomic<int> failed_starts_{0};
  std::map<std::string, std::string>
      first_;                           // claim -> devices, at first sight.
  std::vector<absl::Time> bind_times_;  // Under mu_.
  // Each acknowledged bind: when, and which replica served it. Under mu_.
  std::vector<std::pair<absl::Time, int>> served_;
};

TEST_F(HaOnDoubleTest, KillingTheLeaderLosesNoBindAndNoVmChangesDevice) {
  int kills = 4;
  if (const char* k = std::getenv("PDC_HA_KILLS"); k != nullptr) {
    ASSERT_TRUE(absl::SimpleAtoi(k, &kills)) << k;
  }
  Clients cs;
  StartLoad(cs);
  if (HasFatalFailure()) return;
  // Every VM bound once before the first kill.
  {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (BoundDevices().size() < static_cast<size_t>(kVms) &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    ASSERT_EQ(BoundDevices().size(), static_cast<size_t>(kVms));
  }

  std::vector<double> failover_ms;
  for (int k = 0; k < kills; ++k) {
    SCOPED_TRACE(absl::StrCat("kill ", k));
    ASSERT_TRUE(AwaitBinds(4)) << "binds do not flow";
    CheckNoVmChangedDevice();
    const int leader = Leader(cs);
    ASSERT_GE(leader, 0);
    // Every third round, an etcd member is down during the failover too.
    const bool etcd_down = k % 3 == 2;
    const int member = k % etcd_->members();
    if (etcd_down) {
      ASSERT_OK(etcd_->KillMember(member));
    }
    // Every fourth round the leader is not killed but cut off from its
    // apiserver: it must stop serving by itself, and exit, before another
    // replica (on the other apiserver) takes over.
    const bool cut_off = k % 4 == 3;
    KubeApiServerDouble* its_api = leader % 2 == 0 ? api_ : api_b_;
    const absl::Time killed = absl::Now();
    if (cut_off) {
      its_api->FailRequests({"", ""}, 1 << 30, 503);
      its_api->CutWatches();
    } else {
      replicas_[leader]->Kill(SIGKILL);
      ports_[leader].store(0);
    }
    // A new leader serves a bind. (A bind the old leader had in flight
    // may still be answered after the cut; the check below holds every
    // bind it served before every bind of the new leader.)
    const absl::Time deadline = killed + absl::Seconds(30);
    absl::Time served = absl::InfinitePast();
    while (absl::Now() < deadline) {
      {
        std::lock_guard<std::mutex> l(mu_);
        for (const auto& [at, by] : served_) {
          if (by != leader && at > killed) {
            served = at;
            break;
          }
        }
      }
      if (served != absl::InfinitePast()) break;
      absl::SleepFor(absl::Milliseconds(5));
    }
    ASSERT_NE(served, absl::InfinitePast())
        << "no bind within 30 s of killing the leader";
    failover_ms.push_back(absl::ToDoubleMilliseconds(served - killed));
    const int now_leader = Leader(cs);
    EXPECT_NE(now_leader, leader);
    // Never two replicas serving at once: every bind the old leader served
    // came before every bind another replica served after it.
    {
      std::lock_guard<std::mutex> l(mu_);
      absl::Time old_last = absl::InfinitePast();
      absl::Time new_first = absl::InfiniteFuture();
      for (const auto& [at, by] : served_) {
        if (by == leader) old_last = std::max(old_last, at);
        if (by != leader && at > killed) new_first = std::min(new_first, at);
      }
      EXPECT_LT(old_last, new_first)
          << "the old and the new leader both served binds";
    }
    if (cut_off) {
      // It exits (status 1) once it lost the lease; its apiserver comes back.
      const int status = replicas_[leader]->Kill(0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1)
          << "exit status " << status;
      ports_[leader].store(0);
      its_api->ClearFaults();
    }
    StartReplica(leader);  // Back as a follower.
    if (HasFatalFailure()) return;
    if (etcd_down) {
      ASSERT_OK(etcd_->RestartMember(member));
    }
  }
  StopLoad();
  CheckNoVmChangedDevice();
  EXPECT_EQ(failed_starts_.load(), 0)
      << "VM starts that no replica bound within 30 s";
  // Every VM was bound at least once, each to a device of its own.
  EXPECT_EQ(first_.size(), static_cast<size_t>(kVms));

  std::sort(failover_ms.begin(), failover_ms.end());
  if (!failover_ms.empty()) {
    std::cout << "HA failover over " << failover_ms.size()
              << " kills (lease 2s, renew 1.5s, retry 250ms): p50 "
              << failover_ms[failover_ms.size() / 2] << " ms, max "
              << failover_ms.back() << " ms; binds acknowledged "
              << binds_.load() << ", filter/bind calls no replica served "
              << no_leader_.load() << std::endl;
  }
}

}  // namespace
}  // namespace pdc::testing

namespace pdc::testing {
namespace {

// A rolling update: every replica in turn gets SIGTERM and a successor,
// under load. The leader hands its lease over when it stops, so no VM start
// waits for a lease to expire: no gap between two acknowledged binds is as
// long as one lease (2 s).
TEST_F(HaOnDoubleTest,
       ARollingRestartUnderLoadLosesNothingAndNeverWaitsALease) {
  Clients cs;
  StartLoad(cs);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(AwaitBinds(4)) << "binds do not flow";
  const absl::Time rollout = absl::Now();
  // The followers first, the leader last, as a rollout may do.
  const int leader = Leader(cs);
  ASSERT_GE(leader, 0);
  std::vector<int> order;
  for (int i = 0; i < kReplicas; ++i) {
    if (i != leader) order.push_back(i);
  }
  order.push_back(leader);
  for (int i : order) {
    SCOPED_TRACE(absl::StrCat("replica ", i));
    const int status = replicas_[i]->Kill(SIGTERM);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "exit status " << status;
    ports_[i].store(0);
    StartReplica(i);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(AwaitBinds(4)) << "binds stopped after replacing replica " << i;
  }
  StopLoad();
  CheckNoVmChangedDevice();
  EXPECT_EQ(failed_starts_.load(), 0);
  absl::Duration longest = absl::ZeroDuration();
  {
    std::lock_guard<std::mutex> l(mu_);
    std::sort(bind_times_.begin(), bind_times_.end());
    for (size_t k = 1; k < bind_times_.size(); ++k) {
      if (bind_times_[k] < rollout) continue;
      longest = std::max(longest, bind_times_[k] - bind_times_[k - 1]);
    }
  }
  EXPECT_LT(longest, absl::Seconds(2))
      << "a gap between binds as long as the lease";
  std::cout << "HA rolling restart: longest gap between acknowledged binds "
            << absl::ToDoubleMilliseconds(longest) << " ms, binds "
            << binds_.load() << std::endl;
}

}  // namespace
}  // namespace pdc::testing
