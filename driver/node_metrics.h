// The metrics of pdc-node, declared in one place (names are asserted in
// tests by their full name). Low-cardinality labels only: outcome, reason,
// driver, operation.
// Thread-safety: thread-safe (atomic metric updates).
#ifndef PDC_DRIVER_NODE_METRICS_H_
#define PDC_DRIVER_NODE_METRICS_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics.h"

namespace pdc::driver {

class NodeMetrics {
 public:
  // Registers everything in `registry`, which must outlive this object.
  explicit NodeMetrics(MetricsRegistry* registry);

  // pdc_node_binds_total{outcome="bound|already_bound"}
  CounterFamily* binds;
  // pdc_node_restores_total{outcome="restored|already_restored"}
  CounterFamily* restores;
  // pdc_node_bind_failures_total{operation="bind|restore",reason=...}
  CounterFamily* failures;
  Histogram* bind_seconds;     // pdc_node_bind_duration_seconds (real binds)
  Histogram* restore_seconds;  // pdc_node_restore_duration_seconds (real restores)
  Histogram* discovery_seconds;  // pdc_node_discovery_duration_seconds
  // pdc_node_erases_total{outcome="erased|failed|not_supported"}: NVMe
  // erases before a device goes back, and hand-backs of classes pdc cannot
  // erase.
  CounterFamily* erases;
  Histogram* erase_seconds;  // pdc_node_erase_duration_seconds (successful erases)
  Gauge* erases_pending;     // pdc_node_erases_pending (journaled, not done)
  // pdc_node_firmware_changes_total{action="held|reported"}: devices whose
  // firmware changed while claimed, found at their erase: held unerased
  // (each refused attempt) or erased and reported (node.firmwareChange).
  CounterFamily* firmware_changes;
  // pdc_node_devices_host_used: managed devices not offered because the
  // host uses them (or that could not be checked), from the last discovery.
  Gauge* host_used;
  // pdc_node_extender_errors_total{operation="inventory|allocations"}
  CounterFamily* extender_errors;
  Counter* reports;          // pdc_node_inventory_reports_total
  Counter* passes;           // pdc_node_reconcile_passes_total
  Gauge* last_report;        // pdc_node_last_report_timestamp_seconds
  Gauge* allocations_version;  // pdc_node_allocations_version
  // The kubelet device plugin:
  // pdc_node_handoffs_total{outcome="handed_off|nothing_pending|
  //   several_pending|count_mismatch|device_not_ready|extender_unreachable"}
  CounterFamily* handoffs;
  // pdc_node_handoff_confirmations_total{outcome="confirmed|gone|failed"}
  CounterFamily* handoff_confirmations;
  // pdc_node_handoffs_recovered_total{source="journal|pod_resources"}:
  // hand-offs answered before a restart and confirmed again after it.
  CounterFamily* handoffs_recovered;
  // pdc_node_handoff_journal_errors_total: hand-off journal writes and
  // removals that failed (a restart may then not confirm that hand-off).
  Counter* handoff_journal_errors;
  Counter* plugin_registrations;  // pdc_node_device_plugin_registrations_total

  // pdc_node_devices{driver}: managed devices by current driver, from the
  // last discovery.
  void SetDevicesByDriver(std::map<std::string, int> counts);

 private:
  absl::Mutex mu_;
  std::map<std::string, int> by_driver_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::driver

#endif  // PDC_DRIVER_NODE_METRICS_H_
