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
// The double is not kube-apiserver (no admission, no authentication, no
// conversion, JSON only), so these are floors of what a cluster costs, not
// its figures. Needs etcd: skipped (an error) without it.
#include <malloc.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allocator/allocator.h"
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
  std::unique_ptr<KubeApi> kube;
  std::unique_ptr<HttpClient> client;
  std::string error;
};

Env* TheEnv() {
  static Env* env = [] {
    auto* e = new Env;
    absl::StatusOr<std::unique_ptr<testing::EtcdProcess>> etcd = testing::EtcdProcess::Start();
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
    KubeClientConfig kc;
    kc.server = e->api->url();
    kc.token = "bench";
    e->kube = std::move(KubeApi::Connect(kc)).value();
    HttpClientOptions o;
    o.base_url = e->api->url();
    o.timeout = absl::Seconds(30);
    e->client = std::move(HttpClient::Create(o)).value();
    return e;
  }();
  return env;
}

AllocatorOptions Options() {
  AllocatorOptions o;
  o.device_classes = {DeviceClass{kNvme, {PciSelector{0x1b36, 0x0010, {}}}}};
  return o;
}

// `claims` Bound claims in namespace "bench-<claims>", two per node.
bool Fill(Env& env, int claims) {
  const std::string ns = absl::StrCat("bench-", claims);
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
        absl::StrCat(R"({"status":{"phase":"Bound","node":"node-)", i / 2,
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
    if (!Fill(*env, claims)) {
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

}  // namespace
}  // namespace pdc::extender

BENCHMARK_MAIN();
