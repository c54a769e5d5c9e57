// Per-policy results of one simulation run: counters, the distribution of
// simulated placement latency, time-weighted cluster figures and a time
// series for the charts. Everything a report prints comes from here, in a
// fixed order (std::map, vectors), never from a hash map.
// Thread-safety: value types, not synchronised.
#ifndef PDC_SIM_METRICS_H_
#define PDC_SIM_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/scenario.h"

namespace pdc::sim {

// One point of the time series, covering (previous sample, time].
struct SeriesPoint {
  SimTime time = 0;
  uint64_t restarts = 0;     // in the window
  uint64_t same_device = 0;  // in the window
  double utilization = 0;    // devices used by running VMs / healthy devices
  double held_idle = 0;      // devices kept for stopped VMs / healthy devices
  double fragmentation = 0;  // free devices the largest VM shape can't use / free
  uint64_t pending = 0;      // VMs waiting to be placed
  uint64_t lost_claims = 0;
};

// One node reboot (Scenario::node_reboots) as a policy lived it: the VMs
// running on the hosts when they went down, and for each the time from the
// hosts being Ready again to the VM running again.
struct StormMetrics {
  std::string name;
  uint64_t nodes = 0;
  uint64_t vms = 0;
  std::vector<SimTime> recovery;  // Sorted once the run ends.
  uint64_t same_device = 0;       // Of the recovered, on their devices of before.
  uint64_t failed_attempts = 0;   // Scheduling attempts of these VMs that failed.
  uint64_t admission_failures = 0;

  // Nearest rank over the recovered VMs; 0 when none.
  SimTime Percentile(double p) const;
};

struct PolicyMetrics {
  std::string policy;

  uint64_t start_requests = 0;  // every time a VM wants to (re)start
  uint64_t first_starts = 0;    // placements of VMs never placed before
  uint64_t restarts = 0;        // placements of VMs placed before
  uint64_t same_device = 0;     // restarts that got exactly the same devices
  uint64_t same_node = 0;       // restarts on the same node
  uint64_t placed_after_wait = 0;  // placed, but not at the first attempt
  uint64_t attempts = 0;           // scheduling attempts (incl. retries)
  uint64_t failed_attempts = 0;
  uint64_t unplaced = 0;  // start requests given up (VM stopped or deleted)
  uint64_t pending_at_end = 0;  // still waiting when the run ended
  std::map<std::string, uint64_t> unplaced_reasons;
  std::map<std::string, uint64_t> failed_attempt_reasons;

  uint64_t vms_killed_node_failure = 0;
  uint64_t vms_killed_device_failure = 0;
  // VM-device associations broken by node failures: claims turned Lost (pdc)
  // or running VMs' allocations dropped with their pods (others).
  uint64_t claims_lost = 0;
  uint64_t claims_recovered = 0;  // Lost claims back to Bound (pdc)

  std::vector<SimTime> latencies;  // simulated, one per placement
  // With RunOptions::trace: "<time us> <vm> <node> <device addresses>" per
  // placement, in simulated order.
  std::vector<std::string> trace;
  double wall_seconds = 0;  // Not in any report file (those are deterministic).
  std::vector<StormMetrics> storms;  // In Scenario::node_reboots order.
  uint64_t admission_failures = 0;   // Start-path model: pods kubelet refused.
  std::map<std::string, uint64_t> counters;  // Policy::Counters() at the end.

  // Time averages over the samples.
  double utilization_avg = 0;
  double held_idle_avg = 0;
  double fragmentation_avg = 0;
  std::vector<SeriesPoint> series;

  double SameDeviceRate() const {
    return restarts ? static_cast<double>(same_device) / restarts : 0.0;
  }
  double SameNodeRate() const {
    return restarts ? static_cast<double>(same_node) / restarts : 0.0;
  }
  // Nearest-rank percentile of `latencies`; REQUIRES: sorted. 0 when empty.
  SimTime LatencyPercentile(double p) const;
};

struct RunSummary {
  std::string scenario;
  uint64_t seed = 0;
  SimTime simulated = 0;         // the end of simulated time
  uint64_t exogenous_events = 0; // workload and failure events (same for all)
  uint64_t nodes = 0, devices = 0, vms = 0;
  // How kube-scheduler was modelled, for the reader of the table.
  std::string scheduler_note;
  std::vector<PolicyMetrics> policies;  // in the order requested
};

}  // namespace pdc::sim

#endif  // PDC_SIM_METRICS_H_
