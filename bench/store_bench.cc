// Benchmarks of the file store under the real allocator:
//  - BM_DurableBind: binds per second, each acknowledged only after its
//    record is fsynced, with 1, 4 and 16 concurrent binders (group commit
//    shares fsyncs between them). Data directory on /tmp (TMPDIR overrides).
//  - BM_Recover: Allocator::Open on a log of 1M records (no snapshot), and
//    FileStore::Recover alone with a no-op visitor.
// Run: build-X/bench/store_bench --benchmark_counters_tabular=true
#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "allocator/allocator.h"
#include "allocator/file_store.h"
#include "allocator/memory_store.h"
#include "benchmark/benchmark.h"
#include "common/clock.h"

namespace pdc {
namespace {

constexpr char kResource[] = "devices.kubevirt.io/nvme";
constexpr int kDevicesPerNode = 32;

AllocatorOptions Options() {
  AllocatorOptions options;
  options.serialize_handoffs = false;  // No node driver confirms hand-offs here.
  options.device_classes.push_back(
      DeviceClass{kResource, {PciSelector{0x1b36, 0x0010, std::nullopt}}});
  options.checkpoint_every_records = UINT64_MAX;
  return options;
}

NodeInventory Inventory(int node) {
  NodeInventory inv;
  inv.node = absl::StrCat("node-", node);
  for (int i = 0; i < kDevicesPerNode; ++i) {
    Device d;
    d.address = PciAddress(0, static_cast<uint8_t>(0x10 + i), 0, 0);
    d.vendor_id = 0x1b36;
    d.device_id = 0x0010;
    d.class_code = 0x010802;
    d.iommu_group = 100 + i;
    d.numa_node = static_cast<int16_t>(i % 2);
    d.serial = absl::StrCat("SN-", node, "-", i);
    d.driver = "vfio-pci";
    inv.devices.push_back(d);
  }
  return inv;
}

// A VM with one template claim for one NVMe.
SchedulingRequest VmRequest(uint64_t id) {
  SchedulingRequest req;
  req.ns = "bench";
  req.vm = absl::StrCat("vm", id);
  req.pod_name = "virt-launcher-" + req.vm;
  req.pod_uid = absl::StrCat("uid-", id);
  req.resources = {{kResource, 1}};
  return req;
}

std::string MakeTempDir(const char* tag) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl =
      absl::StrCat(base ? base : "/tmp", "/pdc-bench-", tag, "-XXXXXX");
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  return tmpl;
}

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::abort();
  }
}

// --- Durable binds
// -------------------------------------------------------------

struct BindFixture {
  std::string dir;
  std::unique_ptr<FileStore> store;
  std::unique_ptr<Allocator> alloc;
};
BindFixture* bind_fixture = nullptr;

void BM_DurableBind(benchmark::State& state) {
  // Each thread binds on its own nodes, kDevicesPerNode VMs per node, so no
  // bind fails for lack of devices.
  const int nodes_per_thread =
      static_cast<int>(state.max_iterations / kDevicesPerNode) + 1;
  if (state.thread_index() == 0) {
    bind_fixture = new BindFixture;
    bind_fixture->dir = MakeTempDir("bind");
    auto store = FileStore::Open(bind_fixture->dir);
    Check(store.status(), "open store");
    bind_fixture->store = *std::move(store);
    auto alloc =
        Allocator::Open(Options(), bind_fixture->store.get(), RealClock());
    Check(alloc.status(), "open allocator");
    bind_fixture->alloc = *std::move(alloc);
    for (int n = 0; n < nodes_per_thread * state.threads(); ++n) {
      Check(bind_fixture->alloc->ReplaceInventory(Inventory(n)), "inventory");
    }
  }
  uint64_t i = 0;
  const int first_node = state.thread_index() * nodes_per_thread;
  // Wall clock across all threads: the loop starts and ends with a barrier.
  const absl::Time start = absl::Now();
  for (auto _ : state) {
    const uint64_t id = static_cast<uint64_t>(state.thread_index()) << 32 | i;
    const std::string node = absl::StrCat(
        "node-", first_node + static_cast<int>(i / kDevicesPerNode));
    auto outcome = bind_fixture->alloc->Bind(VmRequest(id), node);
    if (!outcome.ok()) {
      state.SkipWithError(outcome.status().ToString().c_str());
      break;
    }
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    const double wall = absl::ToDoubleSeconds(absl::Now() - start);
    state.counters["binds_per_s_wall"] =
        static_cast<double>(state.iterations()) * state.threads() / wall;
    const FileStore::Stats stats = bind_fixture->store->GetStats();
    state.counters["fsyncs"] = static_cast<double>(stats.syncs);
    state.counters["records_per_fsync"] =
        stats.syncs ? static_cast<double>(stats.records) / stats.syncs : 0;
    bind_fixture->alloc.reset();
    bind_fixture->store.reset();
    std::filesystem::remove_all(bind_fixture->dir);
    delete bind_fixture;
    bind_fixture = nullptr;
  }
}
BENCHMARK(BM_DurableBind)->Threads(1)->Iterations(1000)->UseRealTime();
BENCHMARK(BM_DurableBind)->Threads(4)->Iterations(1000)->UseRealTime();
BENCHMARK(BM_DurableBind)->Threads(16)->Iterations(500)->UseRealTime();

// --- Recovery of 1M records
// ----------------------------------------------------

constexpr uint64_t kLogRecords = 1'000'000;
std::string* recovery_dir = nullptr;  // Removed at exit.

// Builds, once, a data directory whose log holds kLogRecords records of a
// realistic mix (inventory, binds of template claims, claim deletions):
// generated by an allocator on a MemoryStore (no fsync per record) and
// copied into a FileStore in large synced batches.
const std::string& RecoveryDir() {
  static const std::string* dir = [] {
    auto* d = new std::string(MakeTempDir("recover"));
    recovery_dir = d;
    std::atexit(+[] { std::filesystem::remove_all(*recovery_dir); });
    MemoryStore memory;
    auto alloc = Allocator::Open(Options(), &memory, RealClock());
    Check(alloc.status(), "open allocator");
    auto file = FileStore::Open(*d);
    Check(file.status(), "open store");
    Check((*file)
              ->Recover([](const Record&) { return absl::OkStatus(); })
              .status(),
          "recover");
    constexpr int kNodes = 64;
    for (int n = 0; n < kNodes; ++n)
      Check((*alloc)->ReplaceInventory(Inventory(n)), "inv");
    uint64_t vm = 0;
    uint64_t copied = 0;  // Revision up to which the FileStore has the log.
    std::vector<ClaimKey> live;
    while ((*alloc)->revision() < kLogRecords) {
      // Fill a node, then empty it again: binds and deletes alternate in runs.
      const std::string node =
          absl::StrCat("node-", vm / kDevicesPerNode % kNodes);
      if (live.size() < kDevicesPerNode) {
        auto b = (*alloc)->Bind(VmRequest(vm++), node);
        Check(b.status(), "bind");
        live.push_back(b->claims[0].key);
      } else {
        for (const ClaimKey& k : live) {
          if ((*alloc)->revision() >= kLogRecords) break;
          Check((*alloc)->DeleteClaim(k, /*force=*/true), "delete");
        }
        live.clear();
      }
      const uint64_t revision = (*alloc)->revision();
      if (revision - copied >= 20'000 || revision >= kLogRecords) {
        Store::Ticket last = 0;
        for (const Record& r : memory.LogForTest()) {
          auto t = (*file)->Append(r);
          Check(t.status(), "append");
          last = *t;
        }
        Check((*file)->Sync(last), "sync");
        Check((*alloc)->Checkpoint(), "memory checkpoint");  // Drops its log.
        copied = revision;
      }
    }
    return d;
  }();
  return *dir;
}

void BM_RecoverAllocator(benchmark::State& state) {
  const std::string& dir = RecoveryDir();
  RecoveryReport report;
  for (auto _ : state) {
    auto store = FileStore::Open(dir);
    Check(store.status(), "open store");
    auto alloc = Allocator::Open(Options(), store->get(), RealClock(), &report);
    Check(alloc.status(), "recover");
    benchmark::DoNotOptimize(alloc);
  }
  state.counters["records"] = static_cast<double>(report.records_replayed);
  state.counters["records_per_s"] = benchmark::Counter(
      static_cast<double>(report.records_replayed) * state.iterations(),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RecoverAllocator)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

void BM_RecoverStoreOnly(benchmark::State& state) {
  const std::string& dir = RecoveryDir();
  uint64_t records = 0;
  for (auto _ : state) {
    auto store = FileStore::Open(dir);
    Check(store.status(), "open store");
    auto report =
        (*store)->Recover([](const Record&) { return absl::OkStatus(); });
    Check(report.status(), "recover");
    records = report->records_replayed;
  }
  state.counters["records"] = static_cast<double>(records);
}
BENCHMARK(BM_RecoverStoreOnly)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

}  // namespace
}  // namespace pdc

BENCHMARK_MAIN();
