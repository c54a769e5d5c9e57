#include "sim/report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "sim/scenario.h"

namespace pdc::sim {
namespace {

std::string Pct(double v) { return absl::StrFormat("%.1f%%", v * 100); }
std::string Ms(SimTime t) { return absl::StrFormat("%.1f", t / 1000.0); }
std::string Latency(SimTime t) {
  if (t < kSecond) return absl::StrFormat("%.0fms", t / 1000.0);
  if (t < kMinute) return absl::StrFormat("%.1fs", t / 1e6);
  return FormatDuration(t);
}

std::string JsonString(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20) {
      o += absl::StrFormat("\\u%04x", c);
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

std::string Fixed(double v) { return absl::StrFormat("%.6f", v); }

}  // namespace

std::string PolicyColor(const std::string& policy) {
  if (policy == "device-plugin") return "#d62728";
  if (policy == "dra") return "#ff7f0e";
  if (policy == "pdc") return "#2ca02c";
  if (policy == "pdc-dra") return "#9467bd";
  return "#1f77b4";
}

std::string FormatTable(const RunSummary& run) {
  std::string o = absl::StrFormat(
      "pdc-sim  scenario %s  seed %d  simulated %s  events %d  nodes %d  devices %d  VMs %d\n\n",
      run.scenario, run.seed, FormatDuration(run.simulated), run.exogenous_events,
      run.nodes, run.devices, run.vms);
  if (!run.scheduler_note.empty()) {
    o.insert(o.size() - 1, absl::StrCat("kube-scheduler model: ", run.scheduler_note, "\n"));
  }
  absl::StrAppend(&o, absl::StrFormat(
                          "%-14s %9s %8s %8s %8s %8s %8s %8s %8s %7s %7s %6s %11s\n",
                          "policy", "restarts", "same-dev", "same-node", "waited",
                          "unplaced", "lat-p50", "lat-p99", "lat-max", "util",
                          "held", "frag", "lost/recov"));
  for (const PolicyMetrics& m : run.policies) {
    absl::StrAppend(
        &o, absl::StrFormat(
                "%-14s %9d %8s %9s %8d %8d %8s %8s %8s %7s %7s %6s %11s\n", m.policy,
                m.restarts, Pct(m.SameDeviceRate()), Pct(m.SameNodeRate()),
                m.placed_after_wait, m.unplaced, Latency(m.LatencyPercentile(50)),
                Latency(m.LatencyPercentile(99)), Latency(m.LatencyPercentile(100)),
                Pct(m.utilization_avg), Pct(m.held_idle_avg), Pct(m.fragmentation_avg),
                absl::StrCat(m.claims_lost, "/", m.claims_recovered)));
  }
  bool any = false;
  for (const PolicyMetrics& m : run.policies) {
    if (m.unplaced_reasons.empty() && m.pending_at_end == 0) continue;
    if (!any) absl::StrAppend(&o, "\nstarts given up (VM stopped or deleted while pending), by last reason:\n");
    any = true;
    for (const auto& [reason, n] : m.unplaced_reasons) {
      absl::StrAppend(&o, absl::StrFormat("  %-14s %7d  %s\n", m.policy, n, reason));
    }
    if (m.pending_at_end) {
      absl::StrAppend(&o, absl::StrFormat("  %-14s %7d  still pending at the end\n",
                                          m.policy, m.pending_at_end));
    }
  }
  for (const PolicyMetrics& m : run.policies) {
    if (m.counters.empty()) continue;
    std::vector<std::string> parts;
    for (const auto& [k, v] : m.counters) parts.push_back(absl::StrCat(k, " ", v));
    absl::StrAppend(&o, "\n", m.policy, ": ", absl::StrJoin(parts, ", "), "\n");
  }
  absl::StrAppend(&o, BootStormTable(run));
  absl::StrAppend(&o,
                  "\nrestarts: placements of a VM placed before; same-dev/same-node: share "
                  "of them on the\nidentical devices / node; waited: placed after >= 1 "
                  "failed attempt; latency: simulated,\nfrom start request to bind; util: "
                  "devices used by running VMs; held: kept for stopped\nVMs; frag: free "
                  "devices the largest VM shape cannot use; lost/recov: VM-device associations\nbroken "
                  "by node failures / restored when the node came back (time averages).\n");
  return o;
}

std::string SummaryCsv(const RunSummary& run) {
  std::string o =
      "policy,start_requests,first_starts,restarts,same_device,same_device_rate,"
      "same_node,same_node_rate,placed_after_wait,attempts,failed_attempts,unplaced,"
      "pending_at_end,latency_p50_ms,latency_p90_ms,latency_p99_ms,latency_max_ms,"
      "utilization_avg,held_idle_avg,fragmentation_avg,vms_killed_node_failure,"
      "vms_killed_device_failure,claims_lost,claims_recovered\n";
  for (const PolicyMetrics& m : run.policies) {
    absl::StrAppend(
        &o, absl::StrJoin(
                {m.policy, absl::StrCat(m.start_requests), absl::StrCat(m.first_starts),
                 absl::StrCat(m.restarts), absl::StrCat(m.same_device),
                 Fixed(m.SameDeviceRate()), absl::StrCat(m.same_node),
                 Fixed(m.SameNodeRate()), absl::StrCat(m.placed_after_wait),
                 absl::StrCat(m.attempts), absl::StrCat(m.failed_attempts),
                 absl::StrCat(m.unplaced), absl::StrCat(m.pending_at_end),
                 Ms(m.LatencyPercentile(50)), Ms(m.LatencyPercentile(90)),
                 Ms(m.LatencyPercentile(99)), Ms(m.LatencyPercentile(100)),
                 Fixed(m.utilization_avg), Fixed(m.held_idle_avg),
                 Fixed(m.fragmentation_avg), absl::StrCat(m.vms_killed_node_failure),
                 absl::StrCat(m.vms_killed_device_failure), absl::StrCat(m.claims_lost),
                 absl::StrCat(m.claims_recovered)},
                ","),
        "\n");
  }
  return o;
}

std::string SummaryJson(const RunSummary& run) {
  std::string o = absl::StrCat(
      "{\n  \"scenario\": ", JsonString(run.scenario), ",\n  \"seed\": ", run.seed,
      ",\n  \"simulated_seconds\": ", run.simulated / kSecond,
      ",\n  \"events\": ", run.exogenous_events, ",\n  \"nodes\": ", run.nodes,
      ",\n  \"devices\": ", run.devices, ",\n  \"vms\": ", run.vms,
      ",\n  \"scheduler\": ", JsonString(run.scheduler_note),
      ",\n  \"policies\": [");
  for (size_t i = 0; i < run.policies.size(); ++i) {
    const PolicyMetrics& m = run.policies[i];
    auto reasons = [](const std::map<std::string, uint64_t>& r) {
      std::string s = "{";
      bool first = true;
      for (const auto& [k, v] : r) {
        absl::StrAppend(&s, first ? "" : ", ", JsonString(k), ": ", v);
        first = false;
      }
      return s + "}";
    };
    absl::StrAppend(
        &o, i ? ",\n" : "\n", "    {\"policy\": ", JsonString(m.policy),
        ", \"start_requests\": ", m.start_requests, ", \"first_starts\": ", m.first_starts,
        ", \"restarts\": ", m.restarts, ", \"same_device\": ", m.same_device,
        ", \"same_device_rate\": ", Fixed(m.SameDeviceRate()),
        ", \"same_node\": ", m.same_node, ", \"same_node_rate\": ", Fixed(m.SameNodeRate()),
        ",\n     \"placed_after_wait\": ", m.placed_after_wait, ", \"attempts\": ", m.attempts,
        ", \"failed_attempts\": ", m.failed_attempts, ", \"unplaced\": ", m.unplaced,
        ", \"pending_at_end\": ", m.pending_at_end,
        ",\n     \"unplaced_reasons\": ", reasons(m.unplaced_reasons),
        ",\n     \"failed_attempt_reasons\": ", reasons(m.failed_attempt_reasons),
        ",\n     \"latency_ms\": {\"p50\": ", Ms(m.LatencyPercentile(50)),
        ", \"p90\": ", Ms(m.LatencyPercentile(90)), ", \"p99\": ", Ms(m.LatencyPercentile(99)),
        ", \"max\": ", Ms(m.LatencyPercentile(100)), "}",
        ",\n     \"utilization_avg\": ", Fixed(m.utilization_avg),
        ", \"held_idle_avg\": ", Fixed(m.held_idle_avg),
        ", \"fragmentation_avg\": ", Fixed(m.fragmentation_avg),
        ",\n     \"vms_killed_node_failure\": ", m.vms_killed_node_failure,
        ", \"vms_killed_device_failure\": ", m.vms_killed_device_failure,
        ", \"claims_lost\": ", m.claims_lost, ", \"claims_recovered\": ", m.claims_recovered);
    if (!m.counters.empty()) absl::StrAppend(&o, ",\n     \"counters\": ", reasons(m.counters));
    absl::StrAppend(&o, "}");
  }
  absl::StrAppend(&o, "\n  ]\n}\n");
  return o;
}

std::string BootStormTable(const RunSummary& run) {
  if (run.policies.empty() || run.policies[0].storms.empty()) return "";
  std::string o = absl::StrFormat(
      "\nnode reboots: from the hosts Ready again to each of their VMs running again\n"
      "%-12s %-14s %5s %5s %8s %8s %8s %9s %7s %7s\n",
      "reboot", "policy", "hosts", "VMs", "p50", "p99", "max", "same-dev", "retries",
      "refused");
  for (size_t i = 0; i < run.policies[0].storms.size(); ++i) {
    for (const PolicyMetrics& m : run.policies) {
      const StormMetrics& sm = m.storms[i];
      const uint64_t back = sm.recovery.size();
      absl::StrAppend(
          &o, absl::StrFormat(
                  "%-12s %-14s %5d %5d %8s %8s %8s %9s %7d %7d%s\n", sm.name, m.policy,
                  sm.nodes, sm.vms, Latency(sm.Percentile(50)), Latency(sm.Percentile(99)),
                  Latency(sm.Percentile(100)),
                  Pct(back ? static_cast<double>(sm.same_device) / back : 0.0),
                  sm.failed_attempts, sm.admission_failures,
                  back < sm.vms ? absl::StrCat("  (", sm.vms - back, " not running at the end)")
                                : ""));
    }
  }
  absl::StrAppend(&o,
                  "retries: failed scheduling attempts of these VMs (pdc: the hand-off gate, "
                  "handoff_pending);\nrefused: pods kubelet refused at admission (pdc-node's "
                  "Allocate: device not on vfio-pci in time).\n");
  return o;
}

std::string BootStormCsv(const RunSummary& run) {
  std::string o =
      "reboot,policy,hosts,vms,recovered,p50_ms,p99_ms,max_ms,same_device,same_device_rate,"
      "failed_attempts,admission_failures\n";
  if (run.policies.empty()) return o;
  for (size_t i = 0; i < run.policies[0].storms.size(); ++i) {
    for (const PolicyMetrics& m : run.policies) {
      const StormMetrics& sm = m.storms[i];
      const uint64_t back = sm.recovery.size();
      absl::StrAppend(
          &o, absl::StrJoin(
                  {sm.name, m.policy, absl::StrCat(sm.nodes), absl::StrCat(sm.vms),
                   absl::StrCat(back), Ms(sm.Percentile(50)), Ms(sm.Percentile(99)),
                   Ms(sm.Percentile(100)), absl::StrCat(sm.same_device),
                   Fixed(back ? static_cast<double>(sm.same_device) / back : 0.0),
                   absl::StrCat(sm.failed_attempts), absl::StrCat(sm.admission_failures)},
                  ","),
          "\n");
    }
  }
  return o;
}

std::string SeriesCsv(const RunSummary& run) {
  std::string o =
      "policy,time_s,restarts,same_device,same_device_rate,utilization,held_idle,"
      "fragmentation,pending,lost_claims\n";
  for (const PolicyMetrics& m : run.policies) {
    for (const SeriesPoint& p : m.series) {
      absl::StrAppend(&o, m.policy, ",", p.time / kSecond, ",", p.restarts, ",",
                      p.same_device, ",",
                      p.restarts ? Fixed(static_cast<double>(p.same_device) / p.restarts)
                                 : "",
                      ",", Fixed(p.utilization), ",", Fixed(p.held_idle), ",",
                      Fixed(p.fragmentation), ",", p.pending, ",", p.lost_claims, "\n");
    }
  }
  return o;
}

std::string ReasonsCsv(const RunSummary& run) {
  std::string o = "policy,kind,reason,count\n";
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const PolicyMetrics& m : run.policies) {
    for (const auto& [reason, n] : m.unplaced_reasons) {
      absl::StrAppend(&o, m.policy, ",unplaced,", quote(reason), ",", n, "\n");
    }
    for (const auto& [reason, n] : m.failed_attempt_reasons) {
      absl::StrAppend(&o, m.policy, ",failed_attempt,", quote(reason), ",", n, "\n");
    }
  }
  return o;
}

absl::Status WriteReport(const RunSummary& run, const std::string& dir,
                         std::vector<std::string>* written) {
  RETURN_IF_ERROR(MakeDirectories(dir));
  const std::pair<const char*, std::string> files[] = {
      {"summary.csv", SummaryCsv(run)},       {"summary.json", SummaryJson(run)},
      {"timeseries.csv", SeriesCsv(run)},     {"reasons.csv", ReasonsCsv(run)},
      {"same_device.svg", SameDeviceChart(run)}, {"utilization.svg", UtilizationChart(run)}};
  for (const auto& [name, text] : files) {
    const std::string path = absl::StrCat(dir, "/", name);
    RETURN_IF_ERROR(WriteFileAtomically(path, text));
    if (written) written->push_back(name);
  }
  if (run.policies.empty() || run.policies[0].storms.empty()) return absl::OkStatus();
  std::vector<std::pair<std::string, std::string>> storm_files = {
      {"boot_storm.csv", BootStormCsv(run)}};
  for (size_t i = 0; i < run.policies[0].storms.size(); ++i) {
    storm_files.emplace_back(absl::StrCat("boot_storm_", run.policies[0].storms[i].name, ".svg"),
                             BootStormChart(run, i));
  }
  for (const auto& [name, text] : storm_files) {
    RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(dir, "/", name), text));
    if (written) written->push_back(name);
  }
  return absl::OkStatus();
}

}  // namespace pdc::sim
