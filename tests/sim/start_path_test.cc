// The start-path model (start_path.h) and boot storms, checked against what
// can be worked out by hand: the device-plugin gate lets one pod of a node
// through per hand-off, so N VMs of a rebooted host need at least N hand-off
// times; DRA prepares claims side by side, so the last VM of a host runs
// within the slowest prepare plus the serial parts; pdc-dra keeps every
// device; the output files do not depend on anything but the seed.
#include "sim/start_path.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/report.h"
#include "tests/sim/run_scenario.h"
#include "sim/simulation.h"

namespace pdc::sim {
namespace {

using pdc::testing::MustRun;

// One host of DRIVES drives, one VM per drive, the host rebooting once.
// QEMU start and the vfio-pci bind are fixed so that bounds are exact.
std::string OneHostReboot(int drives, const std::string& extra = "") {
  return absl::StrReplaceAll(R"(
name: storm
seed: 7
duration: 2h
sample_every: 30m
cluster:
  device_classes:
    - {resource: devices.kubevirt.io/nvme, pci_ids: ["1b36:0010"]}
  node_groups:
    - {prefix: h-, count: 1, cpu: 512, memory_gib: 4096,
       devices: [{resource: devices.kubevirt.io/nvme, pci_id: "1b36:0010", count: DRIVES}]}
workload:
  vms:
    - {prefix: vm-, count: DRIVES, cpu: 1, memory_gib: 1, start_at: 5m,
       devices: {resource: devices.kubevirt.io/nvme, count: 1}}
events:
  node_reboots: [{name: host, nodes: [h-00], at: 1h, down: 3m}]
start_path:
  vfio_bind: 300ms
  qemu_start: 4s
EXTRA
)",
                             {{"DRIVES", absl::StrCat(drives)}, {"EXTRA", extra}});
}

const StormMetrics& Storm(const RunSummary& run, const std::string& policy) {
  for (const PolicyMetrics& m : run.policies) {
    if (m.policy == policy && !m.storms.empty()) return m.storms[0];
  }
  ADD_FAILURE() << "no storm for " << policy;
  static const StormMetrics kNone;
  return kNone;
}

class GateTest : public ::testing::TestWithParam<int> {};

TEST_P(GateTest, DevicePluginGateTakesAtLeastNHandoffs) {
  const int n = GetParam();
  const RunSummary run = MustRun(OneHostReboot(n), {"pdc"});
  const StormMetrics& sm = Storm(run, "pdc");
  ASSERT_EQ(sm.vms, static_cast<uint64_t>(n));
  ASSERT_EQ(sm.recovery.size(), static_cast<size_t>(n));
  // The gate holds the node from one pod's bind to its confirmed hand-off:
  // at least bind + watch + admission + Allocate + confirm (defaults:
  // 15 + 50 + 10 + 2 + 1 ms), the next pod's bind coming after. The last VM
  // then still starts QEMU (4 s).
  const StartPathSpec sp;
  const SchedulerSpec sch;
  const SimTime handoff =
      sch.bind + sp.kubelet_watch + sp.admission + sp.allocate + sp.handoff_confirm;
  EXPECT_GE(sm.recovery.back(), n * handoff + 4 * kSecond);
  // pdc-node binds the claimed drives one at a time after the boot, so the
  // last one is on vfio-pci n x 300 ms after the host is Ready.
  EXPECT_GE(sm.recovery.back(), n * 300'000 + 4 * kSecond);
  EXPECT_EQ(sm.same_device, static_cast<uint64_t>(n));
  // Pods after the first meet the gate (handoff_pending) at least once.
  EXPECT_GE(sm.failed_attempts, static_cast<uint64_t>(n - 1));
}

TEST_P(GateTest, DraIsBoundedByTheSlowestPrepare) {
  const int n = GetParam();
  const RunSummary run = MustRun(OneHostReboot(n), {"dra", "pdc-dra"});
  const StartPathSpec sp;
  const SchedulerSpec sch;
  // Serial parts: n scheduling cycles (at most 2 ms + 1 node scanned each)
  // and n admissions; the rest overlaps: bind + claim write + watch, one
  // prepare with its vfio-pci bind (300 ms), QEMU (4 s).
  const SimTime cycle = sch.cycle + sch.per_node_ns / 1000 + 1;
  const SimTime bound = n * cycle + sch.bind + sp.claim_write + sp.kubelet_watch +
                        n * sp.admission + sp.prepare + 300'000 + 4 * kSecond;
  for (const char* policy : {"dra", "pdc-dra"}) {
    const StormMetrics& sm = Storm(run, policy);
    ASSERT_EQ(sm.recovery.size(), static_cast<size_t>(n)) << policy;
    EXPECT_LE(sm.recovery.back(), bound) << policy;
    // Nobody runs before its own prepare and QEMU.
    EXPECT_GE(sm.recovery.front(), 300'000 + 4 * kSecond) << policy;
    EXPECT_EQ(sm.failed_attempts, 0u) << policy;
  }
  EXPECT_EQ(Storm(run, "pdc-dra").same_device, static_cast<uint64_t>(n));
}

INSTANTIATE_TEST_SUITE_P(Drives, GateTest, ::testing::Values(1, 4, 8, 48));

TEST(StartPathTest, PdcNodeAllocateFailsWhenTheBindIsLate) {
  // 48 drives at 300 ms each: the 34th is on vfio-pci 10.2 s after the boot,
  // past Allocate's 10 s wait. With a 1 s wait, pods whose drive comes later
  // are refused and come back with a new pod; every VM still runs.
  const RunSummary run =
      MustRun(OneHostReboot(48, "").append("  allocate_vfio_wait: 1s\n"), {"pdc"});
  const StormMetrics& sm = Storm(run, "pdc");
  EXPECT_EQ(sm.recovery.size(), 48u);
  EXPECT_GT(sm.admission_failures, 0u);
  EXPECT_EQ(sm.same_device, 48u);
}

TEST(StartPathTest, ModelSerialisesAdmissionAndOverlapsPrepares) {
  Scenario s;
  s.device_classes.push_back({"devices.kubevirt.io/nvme", {{0x1b36, 0x0010}}});
  NodeGroupSpec g;
  g.prefix = "h-";
  g.count = 1;
  g.devices.push_back({0, 0x1b36, 0x0010, 4, 1});
  s.node_groups.push_back(g);
  const Cluster c = Cluster::Build(s);
  StartPathSpec sp;
  sp.vfio_bind = Distribution{Distribution::Kind::kFixed, 300'000, 0};
  sp.qemu_start = Distribution{Distribution::Kind::kFixed, 4 * kSecond, 0};

  // DRA: two pods arrive together; admission one after the other, the
  // prepares overlap (the second ends one admission after the first).
  StartPathModel dra(sp, c, {HandoffKind::kDra, VfioBinding::kPrepare, false}, 1);
  dra.NodeReady(0, 0, {});
  const PodTimeline a = dra.Start(0, 1000, {0});
  const PodTimeline b = dra.Start(0, 1000, {1});
  EXPECT_EQ(a.admitted, 1000 + sp.admission);
  EXPECT_EQ(b.admitted, a.admitted + sp.admission);
  EXPECT_EQ(a.handoff, a.admitted + sp.prepare + 300'000);
  EXPECT_EQ(b.handoff - a.handoff, sp.admission);
  EXPECT_EQ(b.running, b.handoff + 4 * kSecond);
  // A device already on vfio-pci is not bound again.
  dra.NodeReady(0, 10 * kSecond, {});
  EXPECT_EQ(dra.VfioReadyAt(0), -1);

  // pdc-node: claimed drives bound one at a time from the boot; Allocate
  // inside admission waits for the pod's drive and holds the kubelet.
  StartPathModel pdc(sp, c, {HandoffKind::kDevicePlugin, VfioBinding::kNodeAgent, true}, 1);
  pdc.NodeReady(0, 0, {0, 1, 2, 3});
  EXPECT_EQ(pdc.VfioReadyAt(3), 4 * 300'000);
  const PodTimeline last = pdc.Start(0, 0, {3});
  EXPECT_EQ(last.admitted, 4 * 300'000 + sp.allocate);
  EXPECT_EQ(last.handoff, last.admitted + sp.handoff_confirm);
  const PodTimeline next = pdc.Start(0, 0, {0});  // Its drive was ready long ago.
  EXPECT_EQ(next.admitted, last.admitted + sp.admission + sp.allocate);

  // KubeVirt's device plugin: drives on vfio-pci from the boot.
  StartPathModel plugin(sp, c, {HandoffKind::kDevicePlugin, VfioBinding::kAtBoot, false}, 1);
  plugin.NodeReady(0, 5 * kSecond, {});
  const PodTimeline p = plugin.Start(0, 5 * kSecond, {2});
  EXPECT_EQ(p.admitted, 5 * kSecond + sp.admission + sp.allocate);
  EXPECT_FALSE(p.failed);
}

TEST(StartPathTest, PdcDraKeepsDevicesUnderBothControllerBehaviours) {
  // kubevirt#11815's reproduction: the keeper keeps each VM's allocation.
  const std::string base = R"(
name: k
seed: 11815
duration: 1d
sample_every: 2h
cluster:
  device_classes:
    - {resource: devices.kubevirt.io/nvme, pci_ids: ["1b36:0010"]}
  node_groups:
    - {prefix: node, count: 1,
       devices: [{resource: devices.kubevirt.io/nvme, pci_id: "1b36:0010", count: 2}]}
workload:
  vms:
    - {prefix: vm-, count: 2, cpu: 1, memory_gib: 1,
       devices: {resource: devices.kubevirt.io/nvme, count: 1}}
events:
  mass_restarts: {every: 10m, down: {dist: uniform, min: 5s, max: 60s}}
)";
  for (const char* version : {"1.34", "1.35", "1.36"}) {
    const RunSummary run =
        MustRun(base + absl::StrCat("dra: {kubernetes: \"", version, "\"}\n"), {"pdc-dra"});
    ASSERT_EQ(run.policies.size(), 1u);
    const PolicyMetrics& m = run.policies[0];
    EXPECT_GT(m.restarts, 200u) << version;
    EXPECT_EQ(m.same_device, m.restarts) << version;
    EXPECT_EQ(m.counters.at("allocations"), 2u) << version;
    EXPECT_EQ(m.counters.at("keeper_vm_entries_added"), 2u) << version;
    const bool legacy = std::string(version) != "1.36";
    // Who prunes the stopped pods' entries: the keeper on 1.34/1.35 (the
    // controller refuses the claim), the controller from 1.36.
    EXPECT_EQ(m.counters.count("keeper_pod_entries_pruned") > 0, legacy) << version;
    EXPECT_EQ(m.counters.count("controller_syncs_refused") > 0, legacy) << version;
    EXPECT_EQ(m.counters.count("controller_pod_entries_pruned") > 0, !legacy) << version;
    // Stale entries never pile up: the VM and at most the old and new pod.
    EXPECT_LE(m.counters.at("max_reserved_for"), 3u) << version;
  }
  // A keeper slower than the VMs' runs never writes: every stop loses the
  // allocation, as with stock DRA (first-fit: about half the restarts).
  const RunSummary slow = MustRun(base + "dra: {keeper_delay: 1h}\n", {"pdc-dra"});
  const PolicyMetrics& m = slow.policies[0];
  EXPECT_EQ(m.counters.count("keeper_vm_entries_added"), 0u);
  EXPECT_GT(m.counters.at("allocations_lost_before_keeper"), 200u);
  EXPECT_LT(m.SameDeviceRate(), 0.75);
}

TEST(StartPathTest, BootStormOutputIsDeterministic) {
  const std::string yaml = OneHostReboot(16);
  absl::StatusOr<Scenario> s = ParseScenario(yaml, "test");
  ASSERT_TRUE(s.ok()) << s.status();
  RunOptions one;
  one.jobs = 1;
  RunOptions many;
  many.jobs = 4;
  absl::StatusOr<RunSummary> a = RunScenario(*s, one);
  absl::StatusOr<RunSummary> b = RunScenario(*s, many);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->policies.size(), 4u);
  EXPECT_EQ(BootStormCsv(*a), BootStormCsv(*b));
  EXPECT_EQ(BootStormChart(*a, 0), BootStormChart(*b, 0));
  EXPECT_EQ(FormatTable(*a), FormatTable(*b));
  EXPECT_THAT(BootStormChart(*a, 0), ::testing::HasSubstr("pdc-dra"));
  // Every policy's line ends at all 16 VMs running.
  for (const PolicyMetrics& m : a->policies) {
    EXPECT_EQ(m.storms[0].recovery.size(), 16u) << m.policy;
  }
}

TEST(StartPathTest, StartPathIsInProcessOnly) {
  absl::StatusOr<Scenario> s = ParseScenario(OneHostReboot(2), "test");
  ASSERT_TRUE(s.ok());
  RunOptions options;
  options.policies = {"pdc", "pdc-http"};
  EXPECT_EQ(RunScenario(*s, options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pdc::sim
