#include "driver/node_metrics.h"

#include <utility>
#include <vector>

namespace pdc::driver {

NodeMetrics::NodeMetrics(MetricsRegistry* r)
    : binds(r->AddCounterFamily("pdc_node_binds_total",
                                "Bind requests for devices to vfio-pci, by outcome.", {"outcome"})),
      restores(r->AddCounterFamily("pdc_node_restores_total",
                                   "Devices handed back to their host driver, by outcome.",
                                   {"outcome"})),
      failures(r->AddCounterFamily("pdc_node_bind_failures_total",
                                   "Failed or refused binds and restores, by reason.",
                                   {"operation", "reason"})),
      bind_seconds(r->AddHistogram("pdc_node_bind_duration_seconds",
                                   "Time to move devices to vfio-pci (sysfs writes and checks).",
                                   DefaultLatencyBuckets())),
      restore_seconds(r->AddHistogram("pdc_node_restore_duration_seconds",
                                      "Time to hand a device back to its host driver.",
                                      DefaultLatencyBuckets())),
      discovery_seconds(r->AddHistogram("pdc_node_discovery_duration_seconds",
                                        "Time to walk sysfs for managed devices.",
                                        DefaultLatencyBuckets())),
      erases(r->AddCounterFamily(
          "pdc_node_erases_total",
          "Devices handed back after a delete: NVMe erased, erase failed (retried), or a class "
          "pdc cannot erase handed back unerased.",
          {"outcome"})),
      erase_seconds(r->AddHistogram("pdc_node_erase_duration_seconds",
                                    "Time to hand an NVMe controller back and erase it.",
                                    DefaultLatencyBuckets())),
      erases_pending(r->AddGauge("pdc_node_erases_pending",
                                 "NVMe erases journaled and not finished (devices unhealthy).")),
      firmware_changes(r->AddCounterFamily(
          "pdc_node_firmware_changes_total",
          "Devices whose firmware changed while claimed, found at their erase: held unerased "
          "(per refused attempt) or erased and reported.",
          {"action"})),
      host_used(r->AddGauge("pdc_node_devices_host_used",
                            "Managed devices not offered because the host uses them or the "
                            "host-use check could not run (devices unhealthy).")),
      extender_errors(r->AddCounterFamily("pdc_node_extender_errors_total",
                                          "Failed calls to pdc-extender, by operation.",
                                          {"operation"})),
      reports(r->AddCounter("pdc_node_inventory_reports_total",
                            "Inventory reports (heartbeats) accepted by pdc-extender.")),
      passes(r->AddCounter("pdc_node_reconcile_passes_total", "Reconcile passes run.")),
      last_report(r->AddGauge("pdc_node_last_report_timestamp_seconds",
                              "Unix time of the last accepted inventory report.")),
      allocations_version(r->AddGauge("pdc_node_allocations_version",
                                      "Version of the last allocations received.")),
      handoffs(r->AddCounterFamily(
          "pdc_node_handoffs_total",
          "kubelet Allocate calls answered with a VM's claimed devices, or refused, by outcome.",
          {"outcome"})),
      handoff_confirmations(r->AddCounterFamily(
          "pdc_node_handoff_confirmations_total",
          "Hand-off confirmations sent to pdc-extender, by outcome (failed ones are retried).",
          {"outcome"})),
      handoffs_recovered(r->AddCounterFamily(
          "pdc_node_handoffs_recovered_total",
          "Hand-offs answered before a pdc-node restart and confirmed after it, by where they "
          "were found (journal, pod_resources).",
          {"source"})),
      handoff_journal_errors(r->AddCounter(
          "pdc_node_handoff_journal_errors_total",
          "Hand-off journal writes and removals that failed.")),
      plugin_registrations(r->AddCounter("pdc_node_device_plugin_registrations_total",
                                         "Successful device plugin registrations with kubelet.")) {
  // Every outcome exported from the start (at 0), so dashboards and rates
  // have a series before the first device moves.
  for (const char* outcome : {"restored", "already_restored"}) restores->WithLabels({outcome});
  for (const char* outcome : {"bound", "already_bound"}) binds->WithLabels({outcome});
  r->AddCallbackFamily("pdc_node_devices", "Managed devices on this node by current driver.",
                       MetricType::kGauge, {"driver"}, [this] {
                         absl::MutexLock lock(&mu_);
                         std::vector<LabeledValue> out;
                         for (const auto& [driver, n] : by_driver_) {
                           out.push_back({{driver.empty() ? "none" : driver},
                                          static_cast<double>(n)});
                         }
                         return out;
                       });
}

void NodeMetrics::SetDevicesByDriver(std::map<std::string, int> counts) {
  absl::MutexLock lock(&mu_);
  by_driver_ = std::move(counts);
}

}  // namespace pdc::driver
