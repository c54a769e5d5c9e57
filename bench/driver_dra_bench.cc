// pdc-node handing devices to VMs: as a DRA driver against as a device
// plugin, on the fake kernel (tests/driver/fake_sysfs.h: sysfs, /dev and
// /proc in a temporary directory; "binding to vfio-pci" is the fake's
// driver_override/unbind/drivers_probe writes and the links it makes, so a
// real kernel's probe time is not in these figures).
//
// BM_DraPrepare/N: N claims of one node, one NVMe function each, prepared
// at once as kubelet does (one NodePrepareResources per pod, pods in
// parallel), over real gRPC on a unix socket to pdc-node's DRA service: read
// the claim (an in-memory ClaimSource: no apiserver round trip), the
// host-use check and bind to vfio-pci, the KEP-5304 metadata file, the CDI
// spec, the checkpoint (fsync). Wall time for all N; counters: each
// claim's own latency (mean, max).
// BM_DevicePluginHandoff/N: the same N VMs through the device plugin path:
// for each in turn the extender's hand-off gate admits the VM's pod (a
// second one is refused while one waits), pdc-node learns the allocation,
// kubelet's Allocate over gRPC, and pdc-node's confirmation to the extender
// that opens the gate for the next (the hand-off journaled, fsynced, first,
// as pdc-node runs it). The devices are on vfio-pci already
// (the reconciler binds a claimed device before its VM starts). In a cluster
// each refused pod also waits for kube-scheduler's retry (backoff from 1 s),
// which is not in these figures: they are the lower bound of that path.
// BM_SlicePublish64: SliceBuilder + KubeSlicePublisher for 64 devices
// written to the kube-apiserver double on a real etcd (its ResourceSlice
// validation included): a first publication (create) and a change (a new
// generation, update with the resourceVersion read).
//   build/bench/driver_dra_bench
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "driver/bind_journal.h"
#include "driver/deviceplugin/device_plugin_manager.h"
#include "driver/deviceplugin/handoff_journal.h"
#include "driver/discovery.h"
#include "driver/dra/claim_preparer.h"
#include "driver/dra/dra_driver.h"
#include "driver/dra/dra_service.h"
#include "driver/dra/prepared_checkpoint.h"
#include "driver/dra/slice_builder.h"
#include "driver/vfio_binder.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"
#include "tests/driver/fake_handoff_extender.h"
#include "tests/driver/fake_kubelet.h"
#include "tests/driver/test_util.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/kube_apiserver_double.h"

namespace pdc::driver {
namespace {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;

constexpr char kBenchDriver[] = "nvme.pdc.kubevirt.io";
constexpr char kBenchNode[] = "node-a";
constexpr int kInventory = 48;  // NVMe functions on the node.

std::string BenchAddress(int i) { return absl::StrFormat("0000:%02x:00.0", 0x10 + i); }
std::string BenchDeviceName(int i) { return absl::StrCat("nvme-", i); }
std::string BenchUid(int i) { return absl::StrFormat("5c1e2f0a-1111-4222-8333-%012d", i); }

class BenchClaims : public dra::ClaimSource {
 public:
  absl::StatusOr<dra::ResourceClaimView> Get(std::string_view ns,
                                             std::string_view name) override {
    auto it = claims.find(std::string(name));
    if (it == claims.end()) return absl::NotFoundError(std::string(name));
    return it->second;
  }
  std::map<std::string, dra::ResourceClaimView> claims;  // Read-only once set up.
};

class BenchDirectory : public dra::DeviceDirectory {
 public:
  absl::StatusOr<PciAddress> Find(std::string_view name) const override {
    auto it = devices.find(std::string(name));
    if (it == devices.end()) return absl::NotFoundError(std::string(name));
    return it->second;
  }
  std::map<std::string, PciAddress> devices;
};

// One node as pdc-node's DRA driver sees it: 48 NVMe functions on nvme, a
// claim allocated to each, the DRA service serving.
struct DraNode {
  explicit DraNode(int claims) {
    for (int i = 0; i < kInventory; ++i) {
      host.kernel.AddDevice({.address = BenchAddress(i), .group = 20 + i, .numa = i % 2,
                             .driver = "nvme", .serial = absl::StrCat("S", i)});
      directory.devices[BenchDeviceName(i)] = *PciAddress::Parse(BenchAddress(i));
    }
    for (int i = 0; i < claims; ++i) {
      dra::ResourceClaimView v;
      v.ns = "vms";
      v.name = absl::StrCat("vm", i, "-disk");
      v.uid = BenchUid(i);
      v.allocated = true;
      v.devices = {{"disk", kBenchDriver, kBenchNode, BenchDeviceName(i)}};
      source.claims[v.name] = v;
    }
    journal = std::move(*BindJournal::Open(host.tmp.Join("vfio-journal")));
    BinderOptions o;
    o.classes = {testing::NvmeClass()};
    o.clock = &clock;
    binder = std::make_unique<VfioBinder>(&host.kernel, &host.dev, &host.proc, journal.get(), o);
    checkpoint = std::move(*dra::PreparedCheckpoint::Open(host.tmp.Join("dra-prepared")));
    holders = std::move(*dra::PreparedCheckpoint::Open(host.tmp.Join("dra-holders")));
    dra::PreparerOptions po{kBenchDriver, kBenchNode, "devices.kubevirt.io/nvme",
                            host.tmp.Join("cdi"), host.tmp.Join("metadata")};
    std::filesystem::create_directories(po.cdi_dir);
    preparer = std::make_unique<dra::ClaimPreparer>(
        po, &source, &directory, binder.get(),
        HostView{&host.kernel, &host.dev, &host.proc, "self/mountinfo"}, checkpoint.get(),
        holders.get());
    server = std::make_unique<dra::DraServer>(preparer.get(), host.tmp.Join("plugins/dra.sock"));
    if (absl::Status s = server->Start(); !s.ok()) error = s.ToString();
    channel = grpc::CreateChannel("unix:" + server->socket_path(),
                                  grpc::InsecureChannelCredentials());
  }
  ~DraNode() { server->Stop(); }

  testing::FakeHost host;
  pdc::testing::FakeClock clock;
  BenchClaims source;
  BenchDirectory directory;
  std::unique_ptr<BindJournal> journal;
  std::unique_ptr<VfioBinder> binder;
  std::unique_ptr<dra::PreparedCheckpoint> checkpoint;
  std::unique_ptr<dra::PreparedCheckpoint> holders;  // Which claim's data each device holds.
  std::unique_ptr<dra::ClaimPreparer> preparer;
  std::unique_ptr<dra::DraServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::string error;
};

void BM_DraPrepare(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  double latency_sum = 0, latency_max = 0;
  int64_t claims = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto node = std::make_unique<DraNode>(n);
    if (!node->error.empty()) {
      state.SkipWithError(node->error.c_str());
      return;
    }
    // kubelet keeps one connection per plugin.
    if (!node->channel->WaitForConnected(std::chrono::system_clock::now() +
                                         std::chrono::seconds(10))) {
      state.SkipWithError("no connection to the DRA service");
      return;
    }
    std::vector<double> latency(n);
    std::atomic<int> failed{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pods;
    for (int i = 0; i < n; ++i) {
      pods.emplace_back([&, i] {
        auto stub = drapb::DRAPlugin::NewStub(node->channel);
        drapb::NodePrepareResourcesRequest req;
        drapb::Claim* c = req.add_claims();
        c->set_namespace_("vms");
        c->set_name(absl::StrCat("vm", i, "-disk"));
        c->set_uid(BenchUid(i));
        while (!go.load()) std::this_thread::yield();
        const auto start = std::chrono::steady_clock::now();
        grpc::ClientContext ctx;
        drapb::NodePrepareResourcesResponse resp;
        grpc::Status s = stub->NodePrepareResources(&ctx, req, &resp);
        latency[i] = std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - start)
                         .count();
        auto it = resp.claims().find(BenchUid(i));
        if (!s.ok() || it == resp.claims().end() || !it->second.error().empty()) ++failed;
      });
    }
    state.ResumeTiming();
    go = true;
    for (std::thread& t : pods) t.join();
    state.PauseTiming();
    if (failed > 0) {
      state.SkipWithError("a claim was not prepared");
      return;
    }
    for (double l : latency) {
      latency_sum += l;
      latency_max = std::max(latency_max, l);
    }
    claims += n;
    node.reset();
    state.ResumeTiming();
  }
  state.counters["claim_ms_mean"] = latency_sum / static_cast<double>(claims);
  state.counters["claim_ms_max"] = latency_max;
  state.SetItemsProcessed(claims);
}
// Each iteration builds a node of its own (paused): a few suffice.
BENCHMARK(BM_DraPrepare)
    ->Arg(1)
    ->Arg(8)
    ->Arg(48)
    ->Iterations(20)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// One claim prepared in process (ClaimPreparer::Prepare, no gRPC): what of
// BM_DraPrepare/1 is pdc-node's own work.
void BM_DraPrepareInProcess(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    auto node = std::make_unique<DraNode>(1);
    state.ResumeTiming();
    auto answer = node->preparer->Prepare("vms", "vm0-disk", BenchUid(0));
    state.PauseTiming();
    if (!answer.ok()) {
      state.SkipWithError(answer.status().ToString().c_str());
      return;
    }
    node.reset();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_DraPrepareInProcess)->Iterations(20)->UseRealTime()->Unit(benchmark::kMillisecond);

// One node as the device plugin path sees it: the same 48 functions, on
// vfio-pci, a claim bound to each in the extender.
struct PluginNode {
  explicit PluginNode(int vms) : extender(testing::kNvme) {
    for (int i = 0; i < kInventory; ++i) {
      host.kernel.AddDevice({.address = BenchAddress(i), .group = 20 + i, .numa = i % 2,
                             .driver = "vfio-pci", .serial = absl::StrCat("S", i)});
    }
    for (int i = 0; i < vms; ++i) {
      extender.AddClaim(absl::StrCat("default/vm", i, "-nvme"),
                        *PciAddress::Parse(BenchAddress(i)));
    }
    kubelet = std::make_unique<testing::FakeKubelet>(plugin_dir.path());
    if (absl::Status s = kubelet->Start(); !s.ok()) {
      error = s.ToString();
      return;
    }
    // As pdc-node runs it: each hand-off journaled (fsynced) before it is
    // confirmed.
    auto opened = deviceplugin::HandoffJournal::Open(host.tmp.Join("handoff-journal"));
    if (!opened.ok()) {
      error = opened.status().ToString();
      return;
    }
    handoffs = std::move(opened->journal);
    deviceplugin::DevicePluginManagerOptions o;
    o.confirmer.journal = handoffs.get();
    o.node = kBenchNode;
    o.plugin_dir = plugin_dir.path();
    o.classes = {testing::NvmeClass()};
    o.confirmer.backoff_initial = absl::Milliseconds(1);
    o.confirmer.backoff_max = absl::Milliseconds(5);
    manager = std::make_unique<deviceplugin::DevicePluginManager>(&host.kernel, &extender,
                                                                  &clock, o);
    auto r = Discover(host.kernel, kBenchNode, DiscoveryOptions{{testing::NvmeClass()}, {}});
    if (!r.ok()) {
      error = r.status().ToString();
      return;
    }
    manager->OnInventory(r->inventory);
    manager->OnAllocations(extender.Answer());
    if (absl::Status s = manager->Start(); !s.ok()) {
      error = s.ToString();
      return;
    }
    if (!kubelet->WaitForRegistrations(1) ||
        !kubelet->WaitForDevices(testing::kNvme,
                                 [](const auto& d) { return d.size() == kInventory; })) {
      error = "the device plugin did not register its devices";
    }
  }
  ~PluginNode() {
    if (manager) manager->Stop();
    if (kubelet) kubelet->Stop();
  }

  testing::FakeHost host;
  pdc::testing::TempDir plugin_dir;
  pdc::testing::FakeClock clock;
  testing::GatedExtender extender;
  std::unique_ptr<deviceplugin::HandoffJournal> handoffs;
  std::unique_ptr<testing::FakeKubelet> kubelet;
  std::unique_ptr<deviceplugin::DevicePluginManager> manager;
  std::string error;
};

void BM_DevicePluginHandoff(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  int64_t vms = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto node = std::make_unique<PluginNode>(n);
    if (!node->error.empty()) {
      state.SkipWithError(node->error.c_str());
      return;
    }
    state.ResumeTiming();
    for (int i = 0; i < n; ++i) {
      const std::string pod = absl::StrCat("vm", i, "-uid");
      // The gate: vm i is admitted only once vm i-1's hand-off is confirmed.
      if (!node->extender
               .StartPod(absl::StrCat("default/vm", i, "-nvme"), absl::StrCat("vm", i), pod)
               .ok()) {
        state.SkipWithError("the gate refused a VM whose predecessor was confirmed");
        return;
      }
      node->manager->OnAllocations(node->extender.Answer());
      auto admission = node->kubelet->Admit(pod, testing::kNvme, 1, /*reverse=*/false);
      if (!admission.response.ok()) {
        state.SkipWithError(std::string(admission.response.status().message()).c_str());
        return;
      }
      if (!node->extender.WaitForConfirmations(i + 1)) {
        state.SkipWithError("the hand-off was not confirmed");
        return;
      }
    }
    state.PauseTiming();
    vms += n;
    node.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(vms);
}
BENCHMARK(BM_DevicePluginHandoff)
    ->Arg(1)
    ->Arg(8)
    ->Arg(48)
    ->Iterations(20)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The kube-apiserver double on one etcd, made once; `error` when etcd is
// missing.
struct SliceEnv {
  std::unique_ptr<pdc::testing::EtcdProcess> etcd;
  std::unique_ptr<pdc::testing::KubeApiServerDouble> api;
  std::unique_ptr<kube::KubeApi> kube;
  std::string error;
};

SliceEnv* TheSliceEnv() {
  static SliceEnv* env = [] {
    auto* e = new SliceEnv;  // Never destroyed.
    auto etcd = pdc::testing::EtcdProcess::Start();
    if (!etcd.ok()) {
      e->error = std::string(etcd.status().message());
      return e;
    }
    e->etcd = std::move(*etcd);
    auto api = pdc::testing::KubeApiServerDouble::Start(e->etcd->client_ports(), {});
    if (!api.ok()) {
      e->error = std::string(api.status().message());
      return e;
    }
    e->api = std::move(*api);
    kube::KubeClientConfig c;
    c.server = e->api->url();
    auto k = kube::KubeApi::Connect(c);
    if (!k.ok()) {
      e->error = std::string(k.status().message());
      return e;
    }
    e->kube = std::move(*k);
    return e;
  }();
  return env;
}

std::vector<dra::SliceDeviceInput> SliceInputs(int n, int numa_shift) {
  std::vector<dra::SliceDeviceInput> out;
  for (int i = 0; i < n; ++i) {
    dra::SliceDeviceInput in;
    in.device.address = *PciAddress::Parse(BenchAddress(i));
    in.device.vendor_id = 0x144d;
    in.device.device_id = 0xa80a;
    in.device.class_code = 0x010802;
    in.device.iommu_group = 20 + i;
    in.device.numa_node = (i + numa_shift) % 2;
    in.device.serial = absl::StrCat("S64ANS0T5", 10000 + i, "K");
    in.device.driver = "nvme";
    in.model = "SAMSUNG MZQL2960HCJR-00A07";
    in.pcie_root = "pci0000:00";
    in.capacity_bytes = uint64_t{960197124096};
    out.push_back(std::move(in));
  }
  return out;
}

// state.range(0): 0 = first publication (create), 1 = a change (update).
void BM_SlicePublish64(benchmark::State& state) {
  SliceEnv* env = TheSliceEnv();
  if (!env->error.empty()) {
    state.SkipWithError(env->error.c_str());
    return;
  }
  const bool update = state.range(0) == 1;
  int node = 0;
  for (auto _ : state) {
    state.PauseTiming();
    // A node of its own each time: a create finds no slice, an update one.
    const std::string name = absl::StrCat("bench-", update ? "u" : "c", "-", node++);
    dra::KubeSlicePublisher publisher(env->kube.get(), absl::Seconds(10));
    dra::SliceBuilder builder(kBenchDriver, name, 1);
    if (update) {
      if (!publisher.Publish(kBenchDriver, name, builder.Build(SliceInputs(64, 0))).ok()) {
        state.SkipWithError("first publication failed");
        return;
      }
    }
    state.ResumeTiming();
    absl::Status s = publisher.Publish(kBenchDriver, name, builder.Build(SliceInputs(64, 1)));
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
}
BENCHMARK(BM_SlicePublish64)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(50)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pdc::driver

// pdc-node's info logs (one per hand-off) would drown the table.
int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
