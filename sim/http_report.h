// The HTTP mode's own report: did pdc over HTTP decide exactly what the
// in-process pdc decided (same placements, in the same order, so the same
// same-device rate and the same per-VM node/device sequence), per-verb
// wall-clock latency, throughput, and the answers that were malformed.
// The latency files are wall-clock measurements and so, unlike the other
// report files, differ from run to run.
// Thread-safety: pure functions, except WriteHttpReport which writes files.
#ifndef PDC_SIM_HTTP_REPORT_H_
#define PDC_SIM_HTTP_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sim/http_stats.h"
#include "sim/metrics.h"

namespace pdc::sim {

struct HttpComparison {
  bool identical = false;
  std::string text;  // One or more lines for the terminal.
};
// Compares the "pdc" and "pdc-http" runs of `run` (both recorded with
// RunOptions::trace).
HttpComparison CompareHttpWithInProcess(const RunSummary& run);

// verb,requests,p50_ms,p90_ms,p99_ms,max_ms,mean_ms,malformed
std::string VerbCsv(const std::vector<VerbSummary>& rows);
std::string VerbJsonArray(const std::vector<VerbSummary>& rows, std::string_view indent);

// http_latency.csv and http_latency.json into `dir`.
absl::Status WriteHttpReport(const std::vector<VerbSummary>& rows, double wall_seconds,
                             uint64_t placements, const std::string& dir,
                             std::vector<std::string>* written);

}  // namespace pdc::sim

#endif  // PDC_SIM_HTTP_REPORT_H_
