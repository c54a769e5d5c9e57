// The DRA claim keeper of pdc-extender (extender/dra/claim_keeper.h):
//   BM_KeeperMemory/claims  heap bytes per claim the keeper follows (its
//                           watch cache and consumer index), each claim
//                           allocated and reserved for one VM; no apiserver.
//   BM_KeepLatency          on the kube-apiserver double over a real etcd,
//                           with the whole pdc-extender (keeper enabled):
//                           from the status write that reserves an allocated
//                           claim for a virt-launcher pod (what
//                           kube-scheduler's PreBind does) to the VM entry
//                           in the stored claim. The claim is read back
//                           every 0.5 ms: that is the resolution. Counters
//                           p50_ms, p99_ms.
//   BM_RestartConverged/claims  a keeper started on that many claims, each
//                           holding its VM and the entry of a pod that is
//                           gone (a keeper down while the VMs stopped): from
//                           ExtenderApp::Start to every pod entry pruned.
// The double is not kube-apiserver (no admission, no authentication, JSON
// only): floors, not a cluster's figures. Needs etcd.
#include <malloc.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "benchmark/benchmark.h"
#include "common/file_util.h"
#include "config/config.h"
#include "extender/dra/claim_keeper.h"
#include "extender/extender_app.h"
#include "net/http_client.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/kube_apiserver_double.h"
#include "tests/testing/temp_dir.h"

namespace pdc::extender {
namespace {

class NoConsumers final : public dra::ConsumerDirectory {
 public:
  bool Synced() const override { return true; }
  dra::PodLook LookAtPod(std::string_view, std::string_view, std::string_view) override {
    return {};
  }
  std::set<std::string> LiveVms(const std::vector<std::string>&) const override { return {}; }
};

std::string KeptClaimJson(int i) {
  return absl::StrCat(
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"claim-)", i,
      R"(","namespace":"bench","uid":"9b41c3de-0000-4000-8000-)", 100000000000 + i,
      R"(","resourceVersion":")", i + 1,
      R"("},"spec":{"devices":{"requests":[{"name":"disk","exactly":{"deviceClassName":"nvme.pdc.kubevirt.io","count":1}}]}},)",
      R"("status":{"allocation":{"devices":{"results":[{"request":"disk","driver":"nvme.pdc.kubevirt.io","pool":"node-)",
      i % 100, R"(","device":"s)", i, R"("}]}},"reservedFor":[{"apiGroup":"kubevirt.io","resource":"virtualmachines","name":"vm-)",
      i, R"(","uid":"3c7e0000-0000-4000-8000-)", 100000000000 + i, R"("}]}})");
}

void BM_KeeperMemory(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<std::string> texts;
  for (int i = 0; i < n; ++i) texts.push_back(KeptClaimJson(i));
  kube::KubeClientConfig kc;
  kc.server = "http://127.0.0.1:1";  // Never called: the keeper is not started.
  std::unique_ptr<kube::KubeApi> api = std::move(kube::KubeApi::Connect(kc)).value();
  NoConsumers consumers;
  double per_claim = 0;
  for (auto _ : state) {
    std::vector<rapidjson::Document> docs(n);
    std::vector<const api::json::Value*> items;
    for (int i = 0; i < n; ++i) {
      docs[i].Parse(texts[i].data(), texts[i].size());
      items.push_back(&docs[i]);
    }
    const size_t before = mallinfo2().uordblks;
    auto keeper = std::make_unique<dra::ClaimKeeper>(api.get(), &consumers,
                                                     dra::ClaimKeeper::Options{});
    keeper->claim_sink()->Replace(items);
    const size_t after = mallinfo2().uordblks;
    per_claim = static_cast<double>(after - before) / n;
    if (keeper->kept() != static_cast<size_t>(n)) state.SkipWithError("not all claims kept");
  }
  state.counters["bytes_per_claim"] = per_claim;
}
BENCHMARK(BM_KeeperMemory)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(1);

struct DoubleEnv {
  std::unique_ptr<testing::EtcdProcess> etcd;
  std::unique_ptr<testing::KubeApiServerDouble> api;
  std::unique_ptr<HttpClient> client;
  testing::TempDir dir;
  std::string error;
};

DoubleEnv* TheDouble() {
  static DoubleEnv* env = [] {
    auto* e = new DoubleEnv;
    auto etcd = testing::EtcdProcess::Start();
    if (!etcd.ok()) {
      e->error = std::string(etcd.status().message());
      return e;
    }
    e->etcd = *std::move(etcd);
    auto api = testing::KubeApiServerDouble::Start(e->etcd->client_ports(), {});
    if (!api.ok()) {
      e->error = std::string(api.status().message());
      return e;
    }
    e->api = *std::move(api);
    HttpClientOptions o;
    o.base_url = e->api->url();
    o.timeout = absl::Seconds(30);
    e->client = std::move(HttpClient::Create(o)).value();
    return e;
  }();
  return env;
}

// POSTs `json` to `path`; the created object's body ("" on failure).
std::string Post(DoubleEnv& env, const std::string& path, const std::string& json) {
  auto r = env.client->Post(path, json);
  return r.ok() && r->status == 201 ? r->body : std::string();
}

std::string UidOf(const std::string& body) {
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  if (!d.IsObject()) return "";
  const auto* m = api::json::Find(d, "metadata");
  const auto* u = m != nullptr ? api::json::Find(*m, "uid") : nullptr;
  return u != nullptr && u->IsString() ? std::string(api::json::StringOf(*u)) : "";
}

// Writes `status` (JSON) into the claim `body` and PUTs it on /status.
bool PutStatus(DoubleEnv& env, const std::string& ns, const std::string& name,
               const std::string& body, const std::string& status) {
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  rapidjson::Document st;
  st.Parse(status.data(), status.size());
  if (!d.IsObject() || !st.IsObject()) return false;
  d.RemoveMember("status");
  d.AddMember("status", rapidjson::Value(st, d.GetAllocator()), d.GetAllocator());
  rapidjson::StringBuffer b;
  rapidjson::Writer<rapidjson::StringBuffer> w(b);
  d.Accept(w);
  auto r = env.client->Put(
      absl::StrCat("/apis/resource.k8s.io/v1/namespaces/", ns, "/resourceclaims/", name, "/status"),
      std::string(b.GetString(), b.GetSize()));
  return r.ok() && r->status == 200;
}

std::string ClaimBody(const std::string& name) {
  return absl::StrCat(
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":")", name,
      R"("},"spec":{"devices":{"requests":[{"name":"disk","exactly":{"deviceClassName":"nvme.pdc.kubevirt.io","count":1}}]}}})");
}
std::string Allocation(int i) {
  return absl::StrCat(
      R"("allocation":{"devices":{"results":[{"request":"disk","driver":"nvme.pdc.kubevirt.io","pool":"node-a","device":"s)",
      i, R"("}]}})");
}
std::string Entry(const std::string& group, const std::string& resource, const std::string& name,
                  const std::string& uid) {
  return absl::StrCat(R"({)", group.empty() ? "" : absl::StrCat(R"("apiGroup":")", group, R"(",)"),
                      R"("resource":")", resource, R"(","name":")", name, R"(","uid":")", uid,
                      R"("})");
}

absl::StatusOr<std::unique_ptr<ExtenderApp>> StartKeeperApp(DoubleEnv& env) {
  PdcConfig c;
  c.extender.listen = "127.0.0.1:0";
  c.extender.store = StoreKind::kMemory;
  c.extender.kubernetes.mode = KubernetesMode::kKubeconfig;
  const std::string path = env.dir.Join("kubeconfig");
  absl::Status s = WriteFileAtomically(
      path, absl::StrCat("apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                         "contexts: [{name: t, context: {cluster: c, user: u}}]\n"
                         "clusters: [{name: c, cluster: {server: \"",
                         env.api->url(), "\"}}]\nusers: [{name: u, user: {token: t}}]\n"));
  if (!s.ok()) return s;
  c.extender.kubernetes.kubeconfig = path;
  c.extender.kubernetes.ns = "pdc-system";
  c.extender.dra_keeper.enabled = true;
  c.log_level = "error";
  return ExtenderApp::Start(c, {.version = "bench"});
}

void BM_KeepLatency(benchmark::State& state) {
  DoubleEnv* env = TheDouble();
  if (!env->error.empty()) {
    state.SkipWithError(env->error.c_str());
    return;
  }
  auto app = StartKeeperApp(*env);
  if (!app.ok()) {
    state.SkipWithError(std::string(app.status().message()).c_str());
    return;
  }
  const std::string ns = "bench-latency";
  std::vector<double> ms;
  int i = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string vm = absl::StrCat("vm-", i), pod = absl::StrCat("launcher-", i);
    const std::string claim = absl::StrCat("claim-", i);
    const std::string vm_uid = UidOf(Post(
        *env, absl::StrCat("/apis/kubevirt.io/v1/namespaces/", ns, "/virtualmachines"),
        absl::StrCat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":")",
                     vm, R"("},"spec":{"running":true}})")));
    const std::string owner = [&](const std::string& kind, const std::string& uid) {
      return absl::StrCat(R"("ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":")", kind,
                          R"(","name":")", vm, R"(","uid":")", uid, R"(","controller":true}])");
    }("VirtualMachine", vm_uid);
    const std::string vmi_uid = UidOf(Post(
        *env, absl::StrCat("/apis/kubevirt.io/v1/namespaces/", ns, "/virtualmachineinstances"),
        absl::StrCat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":")",
                     vm, R"(",)", owner, R"(},"spec":{}})")));
    const std::string pod_uid = UidOf(Post(
        *env, absl::StrCat("/api/v1/namespaces/", ns, "/pods"),
        absl::StrCat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", pod,
                     R"(","labels":{"kubevirt.io":"virt-launcher"},"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","name":")",
                     vm, R"(","uid":")", vmi_uid,
                     R"(","controller":true}]},"spec":{"containers":[{"name":"compute","image":"x"}]}})")));
    const std::string body =
        Post(*env, absl::StrCat("/apis/resource.k8s.io/v1/namespaces/", ns, "/resourceclaims"),
             ClaimBody(claim));
    if (vm_uid.empty() || vmi_uid.empty() || pod_uid.empty() || body.empty()) {
      state.SkipWithError("could not create the objects");
      break;
    }
    // Let pdc-extender's watches see the VM, its VMI and its pod.
    absl::SleepFor(absl::Milliseconds(100));
    state.ResumeTiming();
    const absl::Time t0 = absl::Now();
    if (!PutStatus(*env, ns, claim, body,
                   absl::StrCat("{", Allocation(i), R"(,"reservedFor":[)",
                                Entry("", "pods", pod, pod_uid), "]}"))) {
      state.SkipWithError("status write refused");
      break;
    }
    bool kept = false;
    while (!kept && absl::Now() - t0 < absl::Seconds(30)) {
      auto r = env->client->Get(
          absl::StrCat("/apis/resource.k8s.io/v1/namespaces/", ns, "/resourceclaims/", claim));
      kept = r.ok() && r->body.find(R"("resource":"virtualmachines")") != std::string::npos;
      if (!kept) absl::SleepFor(absl::Microseconds(500));
    }
    ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    if (!kept) {
      state.SkipWithError("not kept within 30 s");
      break;
    }
    ++i;
  }
  (*app)->Stop();
  std::sort(ms.begin(), ms.end());
  if (!ms.empty()) {
    state.counters["p50_ms"] = ms[ms.size() / 2];
    state.counters["p99_ms"] = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  }
}
BENCHMARK(BM_KeepLatency)->Unit(benchmark::kMillisecond)->Iterations(200)->UseRealTime();

void BM_RestartConverged(benchmark::State& state) {
  DoubleEnv* env = TheDouble();
  if (!env->error.empty()) {
    state.SkipWithError(env->error.c_str());
    return;
  }
  const int n = static_cast<int>(state.range(0));
  const std::string ns = absl::StrCat("bench-restart-", n);
  for (int i = 0; i < n; ++i) {
    const std::string vm = absl::StrCat("vm-", i), claim = absl::StrCat("claim-", i);
    const std::string vm_uid = UidOf(Post(
        *env, absl::StrCat("/apis/kubevirt.io/v1/namespaces/", ns, "/virtualmachines"),
        absl::StrCat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":")",
                     vm, R"("},"spec":{"running":true}})")));
    const std::string body =
        Post(*env, absl::StrCat("/apis/resource.k8s.io/v1/namespaces/", ns, "/resourceclaims"),
             ClaimBody(claim));
    // Its pod is gone (never existed in this namespace).
    if (vm_uid.empty() || body.empty() ||
        !PutStatus(*env, ns, claim, body,
                   absl::StrCat("{", Allocation(i), R"(,"reservedFor":[)",
                                Entry("kubevirt.io", "virtualmachines", vm, vm_uid), ",",
                                Entry("", "pods", absl::StrCat("launcher-", i),
                                      absl::StrCat("9d0c0000-0000-4000-8000-", 100000000000 + i)),
                                "]}"))) {
      state.SkipWithError("could not create the objects");
      return;
    }
  }
  for (auto _ : state) {
    auto app = StartKeeperApp(*env);
    if (!app.ok()) {
      state.SkipWithError(std::string(app.status().message()).c_str());
      return;
    }
    const absl::Time t0 = absl::Now();
    while ((*app)->claim_keeper()->counts().pruned_pods < static_cast<uint64_t>(n) &&
           absl::Now() - t0 < absl::Minutes(10)) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    state.counters["pruned"] = static_cast<double>((*app)->claim_keeper()->counts().pruned_pods);
    (*app)->Stop();
  }
}
BENCHMARK(BM_RestartConverged)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace pdc::extender

BENCHMARK_MAIN();
