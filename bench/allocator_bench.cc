// Allocator core benchmarks: filter cost per candidate node at cluster scale,
// score, in-memory bind, checkpoints and the mutations waiting on them, and
// resident memory per device and per claim.
//
//   build/bench/allocator_bench --benchmark_counters_tabular=true
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/memory_store.h"
#include "benchmark/benchmark.h"
#include "common/clock.h"

namespace pdc {
namespace {

constexpr char kNvme[] = "devices.kubevirt.io/nvme";

AllocatorOptions Options() {
  AllocatorOptions o;
  o.serialize_handoffs = false;  // No node driver confirms hand-offs here.
  o.device_classes = {DeviceClass{kNvme, {PciSelector{0x1b36, 0x0010, std::nullopt}}}};
  o.node_stale_after = absl::Hours(24);
  return o;
}

std::string NodeName(int i) { return "worker-" + std::to_string(i); }

NodeInventory NodeWith(int node, int devices) {
  NodeInventory inv;
  inv.node = NodeName(node);
  for (int d = 0; d < devices; ++d) {
    Device dev;
    dev.address = PciAddress(0, static_cast<uint8_t>(0x10 + d), 0, 0);
    dev.vendor_id = 0x1b36;
    dev.device_id = 0x0010;
    dev.class_code = 0x010802;
    dev.iommu_group = d;
    dev.numa_node = static_cast<int16_t>(d / (devices / 2 > 0 ? devices / 2 : 1));
    dev.serial = "S" + std::to_string(node * 100 + d) + "XYZW";
    dev.driver = "nvme";
    inv.devices.push_back(std::move(dev));
  }
  return inv;
}

SchedulingRequest Pod(const std::string& vm, const std::string& uid) {
  SchedulingRequest r;
  r.ns = "default";
  r.vm = vm;
  r.pod_name = "virt-launcher-" + vm;
  r.pod_uid = uid;
  r.resources = {{kNvme, 1}, {"cpu", 2}};
  return r;
}

struct Cluster {
  MemoryStore store;
  std::unique_ptr<Allocator> allocator;
  std::vector<std::string> names;
  std::vector<std::string_view> views;

  Cluster(int nodes, int devices) {
    allocator = *Allocator::Open(Options(), &store, RealClock());
    for (int n = 0; n < nodes; ++n) {
      (void)allocator->ReplaceInventory(NodeWith(n, devices));
      names.push_back(NodeName(n));
    }
    views.assign(names.begin(), names.end());
  }
};

void BM_FilterFreshAllocation(benchmark::State& state) {
  Cluster c(static_cast<int>(state.range(0)), 8);
  SchedulingRequest pod = Pod("vm-new", "uid-1");
  for (auto _ : state) {
    FilterResult r = c.allocator->Filter(pod, c.views);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["ns_per_node"] = benchmark::Counter(
      static_cast<double>(state.iterations() * state.range(0)),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_FilterFreshAllocation)->Arg(500)->Arg(5000);

void BM_FilterStickyClaim(benchmark::State& state) {
  Cluster c(static_cast<int>(state.range(0)), 8);
  (void)c.allocator->Bind(Pod("vm-1", "uid-1"), c.names[c.names.size() / 2]);
  SchedulingRequest restart = Pod("vm-1", "uid-2");
  for (auto _ : state) {
    FilterResult r = c.allocator->Filter(restart, c.views);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["ns_per_node"] = benchmark::Counter(
      static_cast<double>(state.iterations() * state.range(0)),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_FilterStickyClaim)->Arg(500)->Arg(5000);

void BM_ScoreFreshAllocation(benchmark::State& state) {
  Cluster c(static_cast<int>(state.range(0)), 8);
  SchedulingRequest pod = Pod("vm-new", "uid-1");
  for (auto _ : state) {
    std::vector<int> s = c.allocator->Score(pod, c.views);
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ScoreFreshAllocation)->Arg(5000);

// Bind cost in memory (MemoryStore: no fsync); the durable figure is in
// store_bench.
void BM_BindInMemory(benchmark::State& state) {
  Cluster c(5000, 8);
  int i = 0;
  for (auto _ : state) {
    auto b = c.allocator->Bind(Pod("vm-" + std::to_string(i), "u" + std::to_string(i)),
                               c.names[i % 5000]);
    if (!b.ok()) state.SkipWithError("bind failed");
    ++i;
    if (i == 5000 * 8) break;
  }
}
BENCHMARK(BM_BindInMemory)->Iterations(20000);

// A checkpoint at the scale of rack-5000 (5000 nodes x 8 devices, 40k bound
// claims): the snapshot is encoded under the allocator's lock held shared,
// so this is how long mutations (bind, inventory, release) can wait behind
// one; filter and prioritize do not. One change between checkpoints,
// or Checkpoint() would return at once.
void BM_Checkpoint(benchmark::State& state) {
  Cluster c(5000, 8);
  for (int vm = 0; vm < 40000; ++vm) {
    (void)c.allocator->Bind(Pod("vm-" + std::to_string(vm), "uid-" + std::to_string(vm)),
                            c.names[vm / 8]);
  }
  int i = 0;
  for (auto _ : state) {
    state.PauseTiming();
    (void)c.allocator->Release(ClaimKey{"default", "vm-" + std::to_string(i) + "-nvme"}, "");
    ++i;
    state.ResumeTiming();
    if (!c.allocator->Checkpoint().ok()) state.SkipWithError("checkpoint failed");
  }
}
BENCHMARK(BM_Checkpoint)->Unit(benchmark::kMillisecond);

// What a checkpoint costs the mutations that arrive while it runs, at the
// same scale: a second thread writes `range(0)` checkpoints back to back
// (memory store: no fsync), while this one releases a VM's claim and binds it
// again, one mutation at a time, timing each from call to return. Only
// mutations that overlapped a checkpoint count, each for the last checkpoint
// it overlapped. Counters, in milliseconds: the longest wait per checkpoint,
// its median and maximum over the checkpoints (`longest_p50_ms`,
// `longest_max_ms`), and the median and 99th percentile over all those
// mutations (most of which run while the snapshot is written, outside the
// allocator's lock). `range(1)` 1 is the control: the second thread spins for
// 60 ms at a time without touching the allocator instead, so the figures are
// what the host's scheduling alone costs the same loop (this VM has two
// cores, shared).
void BM_MutationWaitDuringCheckpoint(benchmark::State& state) {
  Cluster c(5000, 8);
  for (int vm = 0; vm < 40000; ++vm) {
    (void)c.allocator->Bind(Pod("vm-" + std::to_string(vm), "uid-" + std::to_string(vm)),
                            c.names[vm / 8]);
  }
  const int64_t checkpoints = state.range(0);
  const bool control = state.range(1) == 1;
  for (auto _ : state) {
    std::atomic<int64_t> started{0};
    std::atomic<int64_t> finished{0};
    std::atomic<bool> failed{false};
    std::thread checkpointer([&] {
      while (finished.load() < checkpoints) {
        started.fetch_add(1);
        if (control) {
          const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(60);
          while (std::chrono::steady_clock::now() < until) {
          }
        } else if (!c.allocator->Checkpoint().ok()) {
          failed.store(true);
        }
        finished.fetch_add(1);
      }
    });
    std::vector<double> waits_ms;
    std::vector<double> longest_ms(checkpoints + 1, 0.0);  // By checkpoint, from 1.
    for (int i = 0; finished.load() < checkpoints; ++i) {
      const int vm = (i / 2) % 40000;
      const int64_t started_before = started.load();
      const int64_t finished_before = finished.load();
      const auto t0 = std::chrono::steady_clock::now();
      absl::Status s =
          i % 2 == 0
              ? c.allocator->Release(ClaimKey{"default", "vm-" + std::to_string(vm) + "-nvme"}, "")
              : c.allocator
                    ->Bind(Pod("vm-" + std::to_string(vm), "again-" + std::to_string(i)),
                           c.names[vm / 8])
                    .status();
      const auto t1 = std::chrono::steady_clock::now();
      if (!s.ok()) failed.store(true);
      const int64_t started_after = started.load();
      if (started_before != finished_before || started_after != started_before) {
        const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
        waits_ms.push_back(ms);
        longest_ms[started_after] = std::max(longest_ms[started_after], ms);
      }
    }
    checkpointer.join();
    if (failed.load() || waits_ms.empty()) {
      state.SkipWithError("a mutation or checkpoint failed, or none overlapped");
      break;
    }
    longest_ms.erase(longest_ms.begin());
    std::sort(longest_ms.begin(), longest_ms.end());
    state.counters["longest_p50_ms"] = longest_ms[longest_ms.size() / 2];
    state.counters["longest_max_ms"] = longest_ms.back();
    std::sort(waits_ms.begin(), waits_ms.end());
    state.counters["mutations"] = static_cast<double>(waits_ms.size());
    state.counters["p50_ms"] = waits_ms[waits_ms.size() / 2];
    state.counters["p99_ms"] = waits_ms[waits_ms.size() * 99 / 100];
  }
}
BENCHMARK(BM_MutationWaitDuringCheckpoint)
    ->Args({20, 0})
    ->Args({20, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Heap bytes in use: arena blocks and blocks malloc maps on their own (large
// arrays, such as a big hash table's, are mapped while glibc's threshold for
// that is low).
size_t HeapInUse() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// Heap bytes the memory store gives back when destroyed (its log).
size_t DestroyStore(MemoryStore& store) {
  const size_t before = HeapInUse();
  store.~MemoryStore();
  new (&store) MemoryStore();
  return before - HeapInUse();
}

// Heap bytes per device (5000 nodes x 8 devices) and per bound claim (40k
// VMs each holding one), measured from malloc's own accounting, block
// headers included.
// The memory store keeps every record too; it is not part of the core, so
// each figure is taken without the records its own phase logged: those of
// the inventories are measured on a twin cluster built the same way.
void BM_MemoryFootprint(benchmark::State& state) {
  for (auto _ : state) {
    size_t inventory_log = 0;
    {
      Cluster twin(5000, 8);
      inventory_log = DestroyStore(twin.store);
    }
    const size_t start = HeapInUse();
    auto c = std::make_unique<Cluster>(5000, 8);
    const size_t with_devices = HeapInUse();
    for (int n = 0; n < 5000; ++n) {
      for (int d = 0; d < 8; ++d) {
        const int vm = n * 8 + d;
        (void)c->allocator->Bind(Pod("vm-" + std::to_string(vm), "uid-" + std::to_string(vm)),
                                 c->names[n]);
      }
    }
    const size_t with_claims = HeapInUse();
    const size_t claims_log = DestroyStore(c->store) - inventory_log;
    state.counters["bytes_per_device_incl_log"] = double(with_devices - start) / 40000.0;
    state.counters["bytes_per_device"] =
        double(with_devices - start - inventory_log) / 40000.0;
    state.counters["bytes_per_claim_incl_log"] = double(with_claims - with_devices) / 40000.0;
    state.counters["bytes_per_claim"] =
        double(with_claims - with_devices - claims_log) / 40000.0;
  }
}
BENCHMARK(BM_MemoryFootprint)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pdc

BENCHMARK_MAIN();
