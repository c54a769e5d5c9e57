#include "sim/http_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc::sim {
namespace {

const PolicyMetrics* Find(const RunSummary& run, std::string_view name) {
  for (const PolicyMetrics& m : run.policies) {
    if (m.policy == name) return &m;
  }
  return nullptr;
}

std::string Rate(uint64_t n, uint64_t d) {
  return d == 0 ? std::string("-") : absl::StrFormat("%.1f%%", 100.0 * n / d);
}

}  // namespace

HttpComparison CompareHttpWithInProcess(const RunSummary& run) {
  HttpComparison c;
  const PolicyMetrics* in = Find(run, "pdc");
  const PolicyMetrics* http = Find(run, "pdc-http");
  if (in == nullptr || http == nullptr) {
    c.text = "pdc over HTTP vs in-process: not compared (run both pdc and pdc-http)\n";
    return c;
  }
  const bool same_counts = in->restarts == http->restarts &&
                           in->same_device == http->same_device &&
                           in->same_node == http->same_node &&
                           in->first_starts == http->first_starts;
  size_t diff = 0;
  const size_t n = std::min(in->trace.size(), http->trace.size());
  while (diff < n && in->trace[diff] == http->trace[diff]) ++diff;
  const bool same_trace = diff == n && in->trace.size() == http->trace.size();
  c.identical = same_counts && same_trace;
  if (c.identical) {
    c.text = absl::StrFormat(
        "pdc over HTTP == pdc in-process: identical decisions (%d placements, same VM -> "
        "node/device sequence; same-device %s, same-node %s of %d restarts)\n",
        in->trace.size(), Rate(in->same_device, in->restarts),
        Rate(in->same_node, in->restarts), in->restarts);
    return c;
  }
  c.text = absl::StrFormat(
      "pdc over HTTP != pdc in-process: same-device %s vs %s, same-node %s vs %s, "
      "%d vs %d placements\n",
      Rate(http->same_device, http->restarts), Rate(in->same_device, in->restarts),
      Rate(http->same_node, http->restarts), Rate(in->same_node, in->restarts),
      http->trace.size(), in->trace.size());
  if (!same_trace) {
    absl::StrAppend(&c.text, "  first difference at placement ", diff + 1, ":\n    in-process: ",
                    diff < in->trace.size() ? in->trace[diff] : "(none)", "\n    over HTTP:  ",
                    diff < http->trace.size() ? http->trace[diff] : "(none)", "\n");
  }
  return c;
}

std::string VerbCsv(const std::vector<VerbSummary>& rows) {
  std::string o = "verb,requests,p50_ms,p90_ms,p99_ms,max_ms,mean_ms,malformed\n";
  for (const VerbSummary& r : rows) {
    absl::StrAppendFormat(&o, "%s,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%d\n", r.verb, r.count, r.p50_ms,
                          r.p90_ms, r.p99_ms, r.max_ms, r.mean_ms, r.malformed);
  }
  return o;
}

std::string VerbJsonArray(const std::vector<VerbSummary>& rows, std::string_view indent) {
  std::string o = "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const VerbSummary& r = rows[i];
    absl::StrAppendFormat(&o,
                          "%s\n%s  {\"verb\": \"%s\", \"requests\": %d, \"p50_ms\": %.4f, "
                          "\"p90_ms\": %.4f, \"p99_ms\": %.4f, \"max_ms\": %.4f, "
                          "\"mean_ms\": %.4f, \"malformed\": %d}",
                          i ? "," : "", Sv(indent), r.verb, r.count, r.p50_ms, r.p90_ms, r.p99_ms,
                          r.max_ms, r.mean_ms, r.malformed);
  }
  if (!rows.empty()) absl::StrAppend(&o, "\n", Sv(indent));
  o += "]";
  return o;
}

absl::Status WriteHttpReport(const std::vector<VerbSummary>& rows, double wall_seconds,
                             uint64_t placements, const std::string& dir,
                             std::vector<std::string>* written) {
  RETURN_IF_ERROR(MakeDirectories(dir));
  uint64_t requests = 0;
  for (const VerbSummary& r : rows) requests += r.count;
  const std::string json = absl::StrFormat(
      "{\n  \"wall_seconds\": %.3f,\n  \"placements\": %d,\n  \"placements_per_second\": %.1f,\n"
      "  \"requests\": %d,\n  \"requests_per_second\": %.1f,\n  \"verbs\": %s\n}\n",
      wall_seconds, placements, wall_seconds > 0 ? placements / wall_seconds : 0.0, requests,
      wall_seconds > 0 ? requests / wall_seconds : 0.0, VerbJsonArray(rows, "  "));
  const std::pair<const char*, std::string> files[] = {{"http_latency.csv", VerbCsv(rows)},
                                                       {"http_latency.json", json}};
  for (const auto& [name, text] : files) {
    RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(dir, "/", name), text));
    if (written) written->push_back(name);
  }
  return absl::OkStatus();
}

}  // namespace pdc::sim
