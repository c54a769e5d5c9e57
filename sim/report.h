// What a run produces for people: a table for the terminal, CSV and JSON
// files for tools, SVG charts (same-device rate over time, device
// utilisation). All text is built from ordered data with fixed number
// formats and no wall-clock time, so the same seed gives the same bytes.
// Thread-safety: pure functions, except WriteReport which writes files.
#ifndef PDC_SIM_REPORT_H_
#define PDC_SIM_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sim/metrics.h"

namespace pdc::sim {

std::string FormatTable(const RunSummary& run);
std::string SummaryCsv(const RunSummary& run);
std::string SummaryJson(const RunSummary& run);
std::string SeriesCsv(const RunSummary& run);
std::string ReasonsCsv(const RunSummary& run);
std::string SameDeviceChart(const RunSummary& run);
std::string UtilizationChart(const RunSummary& run);
// Node reboots (scenarios with events.node_reboots): per reboot and policy,
// the time from the hosts being Ready to each of their VMs running again.
std::string BootStormTable(const RunSummary& run);
std::string BootStormCsv(const RunSummary& run);
// VMs of reboot `storm` running again over the time since the hosts were
// Ready, one line per policy.
std::string BootStormChart(const RunSummary& run, size_t storm);

// Writes summary.csv, summary.json, timeseries.csv, reasons.csv,
// same_device.svg and utilization.svg into `dir` (created if missing), and
// with node reboots boot_storm.csv and boot_storm_<reboot name>.svg;
// `written` gets the file names in that order.
absl::Status WriteReport(const RunSummary& run, const std::string& dir,
                         std::vector<std::string>* written);

// Fixed colours per policy, so charts read the same in every run.
std::string PolicyColor(const std::string& policy);

}  // namespace pdc::sim

#endif  // PDC_SIM_REPORT_H_
