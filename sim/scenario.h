// A simulation scenario: the synthetic cluster, the VM workload, the events
// over simulated time and the scheduler model's knobs, loaded from YAML
// (sim/scenarios/*.yaml) and validated. Every validation error names the
// offending field by its path, e.g. `workload.vms[2].devices.count: must be
// >= 1`. Times are simulated microseconds (int64).
// Thread-safety: value types; the loader is a pure function.
#ifndef PDC_SIM_SCENARIO_H_
#define PDC_SIM_SCENARIO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/rng.h"

namespace pdc::sim {

using SimTime = int64_t;  // Microseconds since the start of the run.
inline constexpr SimTime kSecond = 1'000'000;
inline constexpr SimTime kMinute = 60 * kSecond;
inline constexpr SimTime kHour = 60 * kMinute;

// A random duration: `5m` (fixed), or {dist: exponential, mean: 4h},
// {dist: uniform, min: 1m, max: 2m}, {dist: fixed, value: 30s}.
struct Distribution {
  enum class Kind { kFixed, kExponential, kUniform };
  Kind kind = Kind::kFixed;
  SimTime a = 0;  // fixed value, exponential mean, uniform min
  SimTime b = 0;  // uniform max

  SimTime Sample(Rng& rng) const;
  double Mean() const;
};

struct DeviceClassSpec {
  std::string resource;  // e.g. devices.kubevirt.io/nvme
  std::vector<std::pair<uint16_t, uint16_t>> pci_ids;  // vendor, device
};

struct NodeDevicesSpec {
  int class_index = 0;  // Into Scenario::device_classes.
  uint16_t vendor = 0, device = 0;
  int count = 0;
  int iommu_group_size = 1;  // Consecutive devices sharing one group.
};

struct NodeGroupSpec {
  std::string prefix;  // Node names: prefix + zero-padded index.
  int count = 0;
  int cpu = 64;
  int memory_gib = 256;
  int numa_nodes = 1;
  std::vector<NodeDevicesSpec> devices;
};

struct VmGroupSpec {
  std::string prefix;
  int count = 0;
  int cpu = 4;
  int memory_gib = 16;
  int class_index = 0;
  int device_count = 1;
  bool explicit_claims = false;  // pdc: a PersistentDeviceClaim per VM.
  SimTime start_at_max = 0;      // First start uniform in [0, start_at_max].
  std::optional<Distribution> run;   // Running time before a stop; none: runs.
  Distribution stop;                 // Stopped time before the next start.
  std::optional<Distribution> lifetime;  // Deleted (and replaced) after.
};

struct NodeFailureSpec {
  std::string node;
  SimTime at = 0;
  SimTime repair_after = 0;
};

struct FailureProcessSpec {
  std::optional<Distribution> every;  // Cluster-wide interval between failures.
  Distribution repair;
};

struct SchedulerSpec {
  // kube-scheduler's percentageOfNodesToScore; 0 = its adaptive default.
  int percentage_of_nodes_to_score = 0;
  // The same knob for the pdc run. The defaults model what deploy/ ships:
  // kube-scheduler's adaptive default, and pods whose claims are all Bound
  // get required node affinity to the claims' node (pdc-extender's
  // admission webhook adds it), so kube-scheduler offers the extender that
  // node only. 100 with no node affinity is the configuration without the
  // webhook (docs/design.md §5.7).
  int pdc_percentage_of_nodes_to_score = 0;
  bool pdc_node_affinity = true;
  int extender_weight = 5;
  bool pdc_spread = false;  // pdc scoring policy: bin-pack (default) or spread.
  // Simulated cost of one scheduling attempt.
  SimTime cycle = 2000;         // framework overhead
  SimTime per_node_ns = 500;    // per node filtered+scored, in nanoseconds
  SimTime extender_call = 1000; // one extender HTTP round trip
  SimTime bind = 15000;         // binding API call + kubelet admission
};

// The start path of a VM's pod after kube-scheduler placed it, in simulated
// time (sim/start_path.h). Absent from a scenario: a placed VM runs at once
// and only the scheduling attempt's cost counts (the latency model above).
// Every figure is either a measurement in the repository or an assumption;
// the scenario file says which, per line.
struct StartPathSpec {
  bool enabled = false;
  SimTime kubelet_watch = 50'000;     // bind -> kubelet's pod watch delivers it
  SimTime admission = 10'000;         // kubelet admission of one pod (serial per node)
  SimTime allocate = 2'000;           // device plugin Allocate round trip
  SimTime handoff_confirm = 1'000;    // pdc-node's POST handoffs
  SimTime allocate_vfio_wait = 10 * kSecond;  // pdc-node's Allocate waits this long
  Distribution vfio_bind{Distribution::Kind::kUniform, 270'000, 370'000};
  SimTime prepare = 5'000;            // DRA prepare besides the bind (claim read, CDI)
  SimTime claim_write = 2'000;        // DRA PreBind: claim status write
  Distribution qemu_start{Distribution::Kind::kUniform, 3 * kSecond, 6 * kSecond};
  SimTime pod_recreate = 10 * kSecond;  // a pod failed admission -> the VM's next pod
  SimTime max_backoff = 10 * kSecond;   // kube-scheduler's podMaxBackoffSeconds
};

// Hosts rebooting together (one host, a rack): down at `at`, Ready again
// `down` later, shorter than the 300 s unreachable toleration, so their
// VMs' pods are not evicted but fail with the host; KubeVirt starts each VM
// again with a new pod once the node is Ready.
struct NodeRebootSpec {
  std::string name;                // For the report: host-48, rack-48.
  std::vector<std::string> nodes;  // Explicit node names, or
  std::string group;               // every node of the node group with this prefix.
  SimTime at = 0;
  SimTime down = 3 * kMinute;
};

// pdc's DRA mode: which resourceclaim-controller behaviour the cluster has.
// 1.34 and 1.35: a claim with a non-pod consumer in reservedFor is no longer
// synced (the keeper prunes pod entries itself); 1.36 and later: the
// controller keeps the entry and prunes pods.
struct DraSpec {
  int kubernetes_minor = 36;
  SimTime keeper_delay = 100'000;  // pod reserved -> the keeper's write lands
};

struct Scenario {
  std::string name;
  std::string description;
  uint64_t seed = 1;
  SimTime duration = 24 * kHour;
  uint64_t max_events = 0;  // 0: no limit; else stop after this many.
  SimTime sample_every = kHour;
  std::string ns = "default";

  std::vector<DeviceClassSpec> device_classes;
  std::vector<NodeGroupSpec> node_groups;
  std::vector<VmGroupSpec> vm_groups;

  std::vector<NodeFailureSpec> node_failure_list;
  FailureProcessSpec node_failures;
  FailureProcessSpec device_failures;
  // Every VM stops at once and each starts again after its own delay
  // (a maintenance window, `virtctl restart` of a set, a node reboot).
  std::optional<Distribution> mass_restart_every;
  Distribution mass_restart_down;

  std::vector<NodeRebootSpec> node_reboots;

  SchedulerSpec scheduler;
  StartPathSpec start_path;
  DraSpec dra;
};

// Parses and validates. `source` names the input in messages.
absl::StatusOr<Scenario> ParseScenario(std::string_view yaml_text,
                                       std::string_view source);
absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path);

// "90s" / "5m" / "8h" / "2d" / "250ms" / "0" -> microseconds.
absl::StatusOr<SimTime> ParseDuration(std::string_view text);
// Short human form of a duration for reports: "1h30m", "250ms".
std::string FormatDuration(SimTime t);

}  // namespace pdc::sim

#endif  // PDC_SIM_SCENARIO_H_
