// The admission webhook's answer time at cluster scale: 5,000 nodes with 8
// NVMe drives each and 40,000 VMs, each holding one Bound template claim
// (every drive taken). Each iteration is one AdmissionReview, as
// kube-apiserver sends it for a virt-launcher pod, through
// AdmissionWebhook::Handle (parse, decide, encode, metrics), in process:
//   BM_WebhookPinned         a restart: the VM's claim is Bound, the pod is
//                            pinned (VMs taken in turn across the cluster)
//   BM_WebhookNothingBound   a first start: the template claim does not
//                            exist yet, no patch
//   BM_WebhookLost           the VM's claim is Lost (its node left): Resolve
//                            refuses, and the webhook reads the VM's claims
//                            one by one to say why (a scan of the namespace)
//   BM_WebhookLoopback       BM_WebhookPinned through the webhook's server on
//                            loopback (plain HTTP, one client connection kept
//                            alive): what kube-apiserver waits for, less TLS
// Counters p50_us, p99_us (and max_us) over the run.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "bench/bench_extender.h"
#include "extender/admission_webhook.h"
#include "net/http_client.h"
#include "tests/testing/admission_reviews.h"

namespace pdc::extender {
namespace {

constexpr int kNodes = 5000;
constexpr int kDrivesPerNode = 8;
constexpr int kVms = kNodes * kDrivesPerNode;  // 40,000 claims.

std::string NodeName(int i) { return absl::StrCat("node-", i); }
std::string VmName(int i) { return absl::StrCat("vm-", i); }

NodeInventory Drives(int node) {
  NodeInventory inv;
  inv.node = NodeName(node);
  for (int d = 0; d < kDrivesPerNode; ++d) {
    Device dev;
    dev.address = PciAddress(0, static_cast<uint8_t>(0x10 + d), 0, 0);
    dev.vendor_id = 0x1b36;
    dev.device_id = 0x0010;
    dev.class_code = 0x010802;
    dev.iommu_group = 10 + d;
    dev.serial = absl::StrCat("SN", node, "-", d);
    inv.devices.push_back(dev);
  }
  return inv;
}

std::string Review(const std::string& vm) {
  testing::LauncherPodSpec s;
  s.vm = vm;
  return testing::AdmissionReviewOf("705ab4f5-6393-11e8-b7cc-42010a800002",
                                    testing::LauncherPodAtCreate(s));
}

// The cluster, built once for every benchmark of the program.
struct Cluster : BenchExtender {
  Cluster() : BenchExtender(RealClock()) {
    for (int n = 0; n < kNodes; ++n) (void)allocator->ReplaceInventory(Drives(n));
    for (int vm = 0; vm < kVms; ++vm) {
      SchedulingRequest r;
      r.ns = "default";
      r.vm = VmName(vm);
      r.pod_name = absl::StrCat("virt-launcher-", r.vm, "-old");
      r.pod_uid = absl::StrCat("uid-", vm);
      r.resources = {{kNvme, 1}};
      (void)allocator->Bind(r, NodeName(vm / kDrivesPerNode));
    }
    webhook = std::make_unique<AdmissionWebhook>(allocator.get(), nullptr, ctx.managed, clock,
                                                 &registry);
  }
  std::unique_ptr<AdmissionWebhook> webhook;
};

Cluster& TheCluster() {
  static Cluster* c = new Cluster();
  return *c;
}

void Report(benchmark::State& state, std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  if (us.empty()) return;
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  state.counters["max_us"] = us.back();
}

// One review per iteration; `want` is the outcome every answer must have.
void RunInProcess(benchmark::State& state, const std::vector<std::string>& reviews,
                  const std::string& want_in_body) {
  Cluster& c = TheCluster();
  std::vector<double> us;
  us.reserve(1 << 16);
  size_t i = 0;
  for (auto _ : state) {
    net::HttpRequest r;
    r.method = "POST";
    r.target = "/mutate";
    r.body = reviews[i++ % reviews.size()];
    const absl::Time t0 = absl::Now();
    net::HttpResponse out = c.webhook->Handle(std::move(r));
    us.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
    if (out.status != 200 || out.body.find(want_in_body) == std::string::npos) {
      state.SkipWithError(out.body.c_str());
      return;
    }
    benchmark::DoNotOptimize(out);
  }
  Report(state, us);
}

void BM_WebhookPinned(benchmark::State& state) {
  std::vector<std::string> reviews;
  for (int vm = 0; vm < kVms; vm += 397) reviews.push_back(Review(VmName(vm)));
  RunInProcess(state, reviews, "\"patchType\":\"JSONPatch\"");
}
BENCHMARK(BM_WebhookPinned)->Unit(benchmark::kMicrosecond);

void BM_WebhookNothingBound(benchmark::State& state) {
  RunInProcess(state, {Review("vm-new")}, "\"allowed\":true}");
}
BENCHMARK(BM_WebhookNothingBound)->Unit(benchmark::kMicrosecond);

void BM_WebhookLost(benchmark::State& state) {
  Cluster& c = TheCluster();
  // The last node leaves: its VMs' claims are Lost. (Restored afterwards, so
  // the order of the benchmarks does not matter.)
  (void)c.allocator->RemoveNode(NodeName(kNodes - 1));
  RunInProcess(state, {Review(VmName(kVms - 1))}, "warnings");
  (void)c.allocator->ReplaceInventory(Drives(kNodes - 1));
}
BENCHMARK(BM_WebhookLost)->Unit(benchmark::kMicrosecond);

void BM_WebhookLoopback(benchmark::State& state) {
  Cluster& c = TheCluster();
  absl::StatusOr<std::unique_ptr<net::HttpServer>> server =
      StartWebhookServer({"127.0.0.1:0", "", ""}, c.webhook.get());
  if (!server.ok()) {
    state.SkipWithError(server.status().ToString().c_str());
    return;
  }
  HttpClientOptions o;
  o.base_url = absl::StrCat("http://127.0.0.1:", (*server)->port());
  absl::StatusOr<std::unique_ptr<HttpClient>> client = HttpClient::Create(o);
  if (!client.ok()) {
    state.SkipWithError(client.status().ToString().c_str());
    return;
  }
  std::vector<std::string> reviews;
  for (int vm = 0; vm < kVms; vm += 397) reviews.push_back(Review(VmName(vm)));
  std::vector<double> us;
  size_t i = 0;
  for (auto _ : state) {
    const absl::Time t0 = absl::Now();
    absl::StatusOr<pdc::HttpResponse> r =
        (*client)->Post("/mutate", reviews[i++ % reviews.size()]);
    us.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
    if (!r.ok() || r->status != 200) {
      state.SkipWithError("webhook call failed");
      return;
    }
  }
  Report(state, us);
}
BENCHMARK(BM_WebhookLoopback)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pdc::extender

BENCHMARK_MAIN();
