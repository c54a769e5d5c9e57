// store: kubernetes against the kube-apiserver double on a real etcd
// (tests/testing/kube_apiserver_double.h; etcd from Debian's etcd-server):
//   BM_Recover/claims   pdc-extender's start-up: KubeApiStore::Recover lists
//                       the claim objects (half as many nodes, two devices
//                       each, every claim Bound) and the allocator is built
//                       from them. Counters: claims, heap bytes per claim
//                       (allocator and store together, after the listing's
//                       pages are freed).
//   BM_StatusWrite      one claim's status recorded: Append + Sync of a
//                       record, i.e. the merge patch through the status
//                       subresource with its preconditions, and the answer.
//                       Counters p50_us and p99_us over the run.
//   BM_StartToReady     the whole pdc-extender (ExtenderApp, store:
//                       kubernetes) from Start to /readyz answering 200,
//                       with the claims of BM_Recover and one
//                       VirtualMachine and VirtualMachineInstance per
//                       claim: recovery, then every watch's first list.
//                       Counter rss_MB: the process' resident memory
//                       grown by the running extender.
// The double is not kube-apiserver (no admission, no authentication, no
// conversion, JSON only), so these are floors of what a cluster costs, not
// its figures. Needs etcd: skipped (an error) without it.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "allocator/allocator.h"
#include "api/json_util.h"
#include "common/file_util.h"
#include "config/config.h"
#include "extender/extender_app.h"
#include "tests/testing/temp_dir.h"
#include "benchmark/benchmark.h"
#include "common/clock.h"
#include "extender/kube_api_store.h"
#include "net/http_client.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/kube_apiserver_double.h"

namespace pdc::extender {
namespace {

constexpr char kNvme[] = "devices.kubevirt.io/nvme";

struct Env {
  std::unique_ptr<testing::EtcdProcess> etcd;
  std::unique_ptr<testing::KubeApiServerDouble> api;
  std::unique_ptr<kube::KubeApi> kube;
  std::unique_ptr<HttpClient> client;
  std::string error;
};

// One etcd (default) or a cluster of `members`, with a double over it; made
// once per member count.
Env* TheEnv(int members = 1) {
  static auto* envs = new std::map<int, Env*>;  // Never destroyed.
  Env*& slot = (*envs)[members];
  if (slot != nullptr) return slot;
  slot = [members] {
    auto* e = new Env;
    absl::StatusOr<std::unique_ptr<testing::EtcdProcess>> etcd =
        members == 1 ? testing::EtcdProcess::Start() : testing::EtcdProcess::StartCluster(members);
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
    kube::KubeClientConfig kc;
    kc.server = e->api->url();
    kc.token = "bench";
    e->kube = std::move(kube::KubeApi::Connect(kc)).value();
    HttpClientOptions o;
    o.base_url = e->api->url();
    o.timeout = absl::Seconds(30);
    e->client = std::move(HttpClient::Create(o)).value();
    return e;
  }();
  return slot;
}

AllocatorOptions Options() {
  AllocatorOptions o;
  o.serialize_handoffs = false;  // No node driver confirms hand-offs here.
  o.device_classes = {DeviceClass{kNvme, {PciSelector{0x1b36, 0x0010, {}}}}};
  return o;
}

// `claims` Bound claims in namespace "bench-<tag>", two per node (nodes
// node-<tag>-<i>).
bool Fill(Env& env, int claims, const std::string& tag) {
  const std::string ns = absl::StrCat("bench-", tag);
  for (int i = 0; i < claims; ++i) {
    const std::string name = absl::StrCat("claim-", i);
    const std::string path =
        absl::StrCat("/apis/pdc.kubevirt.io/v1alpha1/namespaces/", ns, "/persistentdeviceclaims");
    auto r = env.client->Post(
        path, absl::StrCat(R"({"apiVersion":"pdc.kubevirt.io/v1alpha1","kind":"PersistentDeviceClaim","metadata":{"name":")",
                           name, R"(","finalizers":["pdc.kubevirt.io/device-protection"]},"spec":{"resourceName":")",
                           kNvme, R"(","count":1,"reclaimPolicy":"Retain"}})"));
    if (!r.ok() || r->status != 201) return false;
    HttpRequestOptions po;
    po.content_type = "application/merge-patch+json";
    auto s = env.client->Do(
        "PATCH", absl::StrCat(path, "/", name, "/status"),
        absl::StrCat(R"({"status":{"phase":"Bound","node":"node-)", tag, "-", i / 2,
                     R"(","devices":[{"address":"0000:)", i % 2 == 0 ? "3b" : "5e",
                     R"(:00.0","serial":"SN-)", i, R"("}]}})"),
        po);
    if (!s.ok() || s->status != 200) return false;
  }
  return true;
}

void BM_Recover(benchmark::State& state) {
  Env* env = TheEnv();
  if (!env->error.empty()) {
    state.SkipWithError(env->error.c_str());
    return;
  }
  const int claims = static_cast<int>(state.range(0));
  static int filled = 0;
  if (filled < claims) {
    if (!Fill(*env, claims, absl::StrCat(claims))) {
      state.SkipWithError("could not create the claims");
      return;
    }
    filled = claims;
  }
  double per_claim = 0;
  for (auto _ : state) {
    const size_t before = mallinfo2().uordblks;
    KubeApiStore::Options so;
    so.holds_namespace = "pdc-system";
    so.list_page = 500;
    auto store = std::make_unique<KubeApiStore>(env->kube.get(), so);
    absl::StatusOr<std::unique_ptr<Allocator>> a = Allocator::Open(Options(), store.get(),
                                                                   RealClock());
    if (!a.ok()) {
      state.SkipWithError(std::string(a.status().message()).c_str());
      return;
    }
    const size_t listed = (*a)->ListClaims("").size();
    per_claim = static_cast<double>(mallinfo2().uordblks - before) / static_cast<double>(listed);
    state.counters["claims"] = static_cast<double>(listed);
    benchmark::DoNotOptimize(a);
  }
  state.counters["heap_B_per_claim"] = per_claim;
}
// All namespaces are listed: 1,000 then 10,000 more (11,000 in the second).
BENCHMARK(BM_Recover)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_StatusWrite(benchmark::State& state) {
  Env* env = TheEnv();
  if (!env->error.empty()) {
    state.SkipWithError(env->error.c_str());
    return;
  }
  const std::string ns = "bench-status";
  auto r = env->client->Post(
      absl::StrCat("/apis/pdc.kubevirt.io/v1alpha1/namespaces/", ns, "/persistentdeviceclaims"),
      absl::StrCat(R"({"apiVersion":"pdc.kubevirt.io/v1alpha1","kind":"PersistentDeviceClaim","metadata":{"name":"c"},"spec":{"resourceName":")",
                   kNvme, R"("}})"));
  if (!r.ok() || (r->status != 201 && r->status != 409)) {
    state.SkipWithError("could not create the claim");
    return;
  }
  KubeApiStore::Options so;
  so.holds_namespace = "pdc-system";
  KubeApiStore store(env->kube.get(), so);
  // Only the store is measured: recover it (every claim of every bench
  // namespace), then write one claim's status again and again.
  absl::StatusOr<RecoveryReport> rep = store.Recover([](const Record&) { return absl::OkStatus(); });
  std::optional<KubeApiStore::ObjectState> st = store.Object(ClaimKey{ns, "c"});
  if (!rep.ok() || !st.has_value()) {
    state.SkipWithError("could not recover");
    return;
  }
  Claim claim;
  claim.key = ClaimKey{ns, "c"};
  claim.uid = st->uid;
  claim.spec.resource_name = kNvme;
  uint64_t revision = rep->last_revision;
  std::vector<double> us;
  for (auto _ : state) {
    claim.status.handed_off_to = absl::StrCat("pod-", revision);
    Record rec;
    rec.revision = ++revision;
    rec.mutations.push_back(PutClaim{claim});
    const absl::Time t0 = absl::Now();
    absl::StatusOr<Store::Ticket> t = store.Append(rec);
    absl::Status s = t.ok() ? store.Sync(*t) : t.status();
    us.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
  }
  std::sort(us.begin(), us.end());
  if (!us.empty()) {
    state.counters["p50_us"] = us[us.size() / 2];
    state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  }
}
BENCHMARK(BM_StatusWrite)->Unit(benchmark::kMicrosecond)->Iterations(2000);

// Resident memory of this process, bytes.
size_t ResidentBytes() {
  absl::StatusOr<std::string> statm = ReadFileToString("/proc/self/statm");
  size_t pages = 0;
  if (statm.ok()) {
    std::vector<std::string> parts = absl::StrSplit(*statm, ' ');
    if (parts.size() > 1) (void)absl::SimpleAtoi(parts[1], &pages);
  }
  return pages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// A kubeconfig for the double, in `dir`.
std::string WriteKubeconfig(const testing::TempDir& dir, const std::string& server) {
  const std::string path = dir.Join("kubeconfig");
  absl::Status s = WriteFileAtomically(
      path, absl::StrCat("apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                         "contexts: [{name: t, context: {cluster: c, user: u}}]\n"
                         "clusters: [{name: c, cluster: {server: \"",
                         server, "\"}}]\nusers: [{name: u, user: {token: t}}]\n"));
  return s.ok() ? path : std::string();
}

// One VirtualMachine and its VirtualMachineInstance per claim of Fill, in
// the claims' namespace.
bool FillVms(Env& env, int claims, const std::string& tag) {
  const std::string ns = absl::StrCat("bench-", tag);
  for (int i = 0; i < claims; ++i) {
    const std::string name = absl::StrCat("vm-", i);
    auto vm = env.client->Post(
        absl::StrCat("/apis/kubevirt.io/v1/namespaces/", ns, "/virtualmachines"),
        absl::StrCat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":")",
                     name, R"("},"spec":{"running":true}})"));
    if (!vm.ok() || vm->status != 201) return false;
    rapidjson::Document d;
    d.Parse(vm->body.data(), vm->body.size());
    const auto* m = d.IsObject() ? api::json::Find(d, "metadata") : nullptr;
    const auto* u = m != nullptr ? api::json::Find(*m, "uid") : nullptr;
    if (u == nullptr || !u->IsString()) return false;
    auto vmi = env.client->Post(
        absl::StrCat("/apis/kubevirt.io/v1/namespaces/", ns, "/virtualmachineinstances"),
        absl::StrCat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":")",
                     name, R"(","ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":")",
                     name, R"(","uid":")", std::string(api::json::StringOf(*u)),
                     R"(","controller":true}]},"spec":{}})"));
    if (!vmi.ok() || vmi->status != 201) return false;
  }
  return true;
}

void BM_StartToReady(benchmark::State& state) {
  Env* env = TheEnv();
  if (!env->error.empty()) {
    state.SkipWithError(env->error.c_str());
    return;
  }
  const int claims = static_cast<int>(state.range(0));
  const std::string tag = absl::StrCat("ready-", claims);
  if (!Fill(*env, claims, tag) || !FillVms(*env, claims, tag)) {
    state.SkipWithError("could not create the objects");
    return;
  }
  testing::TempDir dir;
  PdcConfig c;
  c.extender.listen = "127.0.0.1:0";
  c.extender.store = StoreKind::kKubernetes;
  c.extender.kubernetes.mode = KubernetesMode::kKubeconfig;
  c.extender.kubernetes.kubeconfig = WriteKubeconfig(dir, env->api->url());
  c.extender.kubernetes.ns = "pdc-system";
  c.log_level = "error";
  double rss_mb = 0;
  for (auto _ : state) {
    const size_t before = ResidentBytes();
    auto app = ExtenderApp::Start(c, {.version = "bench"});
    if (!app.ok()) {
      state.SkipWithError(std::string(app.status().message()).c_str());
      return;
    }
    HttpClientOptions o;
    o.base_url = absl::StrCat("http://127.0.0.1:", (*app)->port());
    o.timeout = absl::Seconds(30);
    auto pdc = std::move(HttpClient::Create(o)).value();
    bool ready = false;
    for (int i = 0; i < 60000 && !ready; ++i) {
      auto r = pdc->Get("/readyz");
      ready = r.ok() && r->status == 200;
      if (!ready) absl::SleepFor(absl::Milliseconds(2));
    }
    state.PauseTiming();
    rss_mb = static_cast<double>(ResidentBytes() - before) / 1e6;
    state.counters["claims"] = static_cast<double>((*app)->allocator()->ListClaims("").size());
    (*app)->Stop();
    state.ResumeTiming();
    if (!ready) {
      state.SkipWithError("not ready within 2 minutes");
      return;
    }
  }
  state.counters["rss_MB"] = rss_mb;
}
// 10,000 claims on 5,000 nodes (two each), 10,000 VMs and VMIs, in a
// namespace of their own: BM_Recover's 11,000 claims come on top.
BENCHMARK(BM_StartToReady)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(3);

// A whole bind as kube-scheduler sends it to pdc-extender (ExtenderApp,
// store: kubernetes, over its HTTP port): the VM's claim status recorded,
// the pod annotated, the Binding created. Each iteration is a new
// virt-launcher pod of one VM (a restart: the claim stays Bound, its
// reservation moves to the new pod), filtered first as kube-scheduler does
// (not timed). Counters p50_us and p99_us. Arg: etcd members under the
// apiserver (1, or 3 as a highly available control plane has).
void BM_Bind(benchmark::State& state) {
  Env* env = TheEnv(static_cast<int>(state.range(0)));
  if (!env->error.empty()) {
    state.SkipWithError(env->error.c_str());
    return;
  }
  const std::string ns = absl::StrCat("bench-bind-", state.range(0));
  auto post = [&](const std::string& path, const std::string& body) {
    auto r = env->client->Post(path, body);
    return r.ok() ? r->body : std::string();
  };
  auto uid_of = [](const std::string& json) {
    rapidjson::Document d;
    d.Parse(json.data(), json.size());
    const auto* m = d.IsObject() ? api::json::Find(d, "metadata") : nullptr;
    const auto* u = m != nullptr ? api::json::Find(*m, "uid") : nullptr;
    return u != nullptr && u->IsString() ? std::string(api::json::StringOf(*u)) : std::string();
  };
  const std::string vm_uid = uid_of(post(
      absl::StrCat("/apis/kubevirt.io/v1/namespaces/", ns, "/virtualmachines"),
      R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"vm"},"spec":{}})"));
  const std::string vmi_uid = uid_of(post(
      absl::StrCat("/apis/kubevirt.io/v1/namespaces/", ns, "/virtualmachineinstances"),
      absl::StrCat(R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":"vm","ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","name":"vm","uid":")",
                   vm_uid, R"(","controller":true}]},"spec":{}})")));
  testing::TempDir dir;
  const std::string kubeconfig = WriteKubeconfig(dir, env->api->url());
  if (vm_uid.empty() || vmi_uid.empty() || kubeconfig.empty()) {
    state.SkipWithError("setup failed");
    return;
  }
  PdcConfig c;
  c.extender.listen = "127.0.0.1:0";
  c.extender.store = StoreKind::kKubernetes;
  c.extender.kubernetes.mode = KubernetesMode::kKubeconfig;
  c.extender.kubernetes.kubeconfig = kubeconfig;
  c.extender.kubernetes.ns = ns;
  c.extender.allocator.serialize_handoffs = false;  // No pdc-node confirms here.
  c.log_level = "error";
  auto app = ExtenderApp::Start(c, {.version = "bench"});
  if (!app.ok()) {
    state.SkipWithError(std::string(app.status().message()).c_str());
    return;
  }
  HttpClientOptions o;
  o.base_url = absl::StrCat("http://127.0.0.1:", (*app)->port());
  o.timeout = absl::Seconds(30);
  auto pdc = std::move(HttpClient::Create(o)).value();
  for (int i = 0; i < 500; ++i) {
    auto r = pdc->Get("/readyz");
    if (r.ok() && r->status == 200) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  auto reported = pdc->Put("/v1/nodes/node-a/inventory",
           R"({"node":"node-a","devices":[{"address":"0000:3b:00.0","vendor":"1b36","device":"0010","class":"010802","iommuGroup":12,"numaNode":0,"serial":"SN0","driver":"nvme","healthy":true}]})");
  if (!reported.ok() || reported->status != 200) {
    state.SkipWithError("inventory refused");
    return;
  }
  std::vector<double> us;
  int n = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string name = absl::StrCat("virt-launcher-vm-", n++);
    const std::string pod = post(
        absl::StrCat("/api/v1/namespaces/", ns, "/pods"),
        absl::StrCat(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", name,
                     R"(","ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","name":"vm","uid":")",
                     vmi_uid,
                     R"(","controller":true}]},"spec":{"schedulerName":"pdc-scheduler","containers":[{"name":"compute","image":"x","resources":{"limits":{"devices.kubevirt.io/nvme":"1"},"requests":{"devices.kubevirt.io/nvme":"1"}}}]}})"));
    const std::string pod_uid = uid_of(pod);
    auto f = pdc->Post("/scheduler/filter",
                       absl::StrCat(R"({"Pod":)", pod, R"(,"NodeNames":["node-a"]})"));
    state.ResumeTiming();
    const absl::Time t0 = absl::Now();
    auto b = pdc->Post("/scheduler/bind",
                       absl::StrCat(R"({"PodName":")", name, R"(","PodNamespace":")", ns,
                                    R"(","PodUID":")", pod_uid, R"(","Node":"node-a"})"));
    us.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
    if (!f.ok() || !b.ok() || b->body != R"({"Error":""})") {
      state.SkipWithError(b.ok() ? b->body.c_str() : "bind failed");
      break;
    }
  }
  (*app)->Stop();
  std::sort(us.begin(), us.end());
  if (!us.empty()) {
    state.counters["p50_us"] = us[us.size() / 2];
    state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  }
}
BENCHMARK(BM_Bind)->Arg(1)->Arg(3)->Unit(benchmark::kMicrosecond)->Iterations(300);

}  // namespace
}  // namespace pdc::extender

BENCHMARK_MAIN();
