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

  SchedulerSpec scheduler;
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
