// Inventory updates (a node driver's report, also its heartbeat): the whole
// ReplaceInventory, and the part of it that follows claimed and Released
// drives by serial (device identity, allocator/device_identity.h), on one
// node with `devices` NVMe drives, half of them claimed and two Released.
//
//   build/bench/inventory_bench --benchmark_counters_tabular=true
#include <memory>
#include <string>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/claim_entry.h"
#include "allocator/device_identity.h"
#include "allocator/memory_store.h"
#include "allocator/name_pool.h"
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

// `devices` drives; with `shift` every drive sits `shift` buses further (a
// card added in front of them renumbers them all).
NodeInventory Drives(int devices, int shift) {
  NodeInventory inv;
  inv.node = "worker-0";
  for (int d = 0; d < devices; ++d) {
    Device dev;
    dev.address = PciAddress(0, static_cast<uint8_t>(0x10 + d + shift), 0, 0);
    dev.vendor_id = 0x1b36;
    dev.device_id = 0x0010;
    dev.class_code = 0x010802;
    dev.iommu_group = d;
    dev.numa_node = static_cast<int16_t>(d * 2 / devices);
    dev.serial = "S" + std::to_string(1000 + d) + "XYZW";
    dev.driver = "vfio-pci";
    inv.devices.push_back(std::move(dev));
  }
  return inv;
}

// A node with half its drives bound to one-drive claims and two Released.
struct Node {
  MemoryStore store;
  std::unique_ptr<Allocator> allocator;

  explicit Node(int devices) {
    allocator = *Allocator::Open(Options(), &store, RealClock());
    (void)allocator->ReplaceInventory(Drives(devices, 0));
    for (int i = 0; i < devices / 2; ++i) {
      SchedulingRequest r;
      r.ns = "default";
      r.vm = "vm" + std::to_string(i);
      r.pod_name = "virt-launcher-" + r.vm;
      r.pod_uid = "uid-" + std::to_string(i);
      r.resources = {{kNvme, 1}};
      (void)allocator->Bind(r, "worker-0");
    }
    (void)allocator->DeleteClaim({"default", "vm0-nvme"}, true);
    (void)allocator->DeleteClaim({"default", "vm1-nvme"}, true);
  }
};

// A report that changes nothing: what every heartbeat costs.
void BM_Heartbeat(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  Node node(devices);
  const NodeInventory inv = Drives(devices, 0);
  for (auto _ : state) {
    benchmark::DoNotOptimize(node.allocator->ReplaceInventory(inv));
  }
}
BENCHMARK(BM_Heartbeat)->Arg(8)->Arg(24)->Arg(64);

// Every report renumbers every drive: all claims and marks move (one record
// each time, in memory).
void BM_Renumbered(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  Node node(devices);
  const NodeInventory inv[2] = {Drives(devices, 0), Drives(devices, 1)};
  int i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(node.allocator->ReplaceInventory(inv[++i % 2]));
  }
}
BENCHMARK(BM_Renumbered)->Arg(8)->Arg(24)->Arg(64);

// The identity step alone (what ReplaceInventory adds for it, under the
// allocator's lock): index the report's serials, refuse duplicates, follow
// every claim and Released mark. Second argument 0: nothing moved (a
// heartbeat); 1: every drive moved.
void BM_FollowDevices(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  Node node(devices);
  // The claims as ClusterState keeps them.
  NamePool names;
  std::vector<ClaimEntry> claims;
  for (Claim& c : node.allocator->ListClaims("")) claims.emplace_back(std::move(c), names);
  std::vector<const ClaimEntry*> pointers;
  for (const ClaimEntry& c : claims) pointers.push_back(&c);
  const std::vector<ReleasedDevice> released = node.allocator->GetNode("worker-0")->released;
  // No duplicates: RefuseDuplicateSerials leaves it unchanged.
  NodeInventory inv = Drives(devices, static_cast<int>(state.range(1)));
  for (auto _ : state) {
    const SerialIndex index(inv);
    RefuseDuplicateSerials(index, inv);
    IdentityUpdate u = FollowDevices(inv, index, pointers, released, {});
    benchmark::DoNotOptimize(u);
  }
  state.counters["claims"] = static_cast<double>(claims.size());
}
BENCHMARK(BM_FollowDevices)->ArgsProduct({{8, 24, 64}, {0, 1}});

}  // namespace
}  // namespace pdc

BENCHMARK_MAIN();
