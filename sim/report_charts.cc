// The two charts of a run: same-device rate per policy over simulated time
// (cumulative share of restarts that got exactly their previous devices),
// and device utilisation (solid) with devices held for stopped VMs (dashed).
#include <algorithm>

#include "absl/strings/str_format.h"
#include "sim/report.h"
#include "sim/svg_chart.h"

namespace pdc::sim {
namespace {

// Hours on the x axis up to four days, days beyond.
std::pair<double, std::string> TimeUnit(SimTime end) {
  if (end > 4 * 24 * kHour) return {24.0 * kHour, "simulated time (days)"};
  if (end > 4 * kHour) return {static_cast<double>(kHour), "simulated time (hours)"};
  return {static_cast<double>(kMinute), "simulated time (minutes)"};
}

}  // namespace

std::string SameDeviceChart(const RunSummary& run) {
  const auto [unit, label] = TimeUnit(run.simulated);
  ChartSpec spec;
  spec.title = "VM restarts that got their previous device back";
  spec.subtitle = absl::StrFormat("scenario %s, seed %d; share of all restarts so far (per-window rates: timeseries.csv)",
                                  run.scenario, run.seed);
  spec.x_label = label;
  spec.y_label = "same-device restarts";
  spec.x_max = run.simulated / unit;
  for (const PolicyMetrics& m : run.policies) {
    ChartSeries s{m.policy, PolicyColor(m.policy), false, {}};
    uint64_t restarts = 0, same = 0;
    for (const SeriesPoint& p : m.series) {
      restarts += p.restarts;
      same += p.same_device;
      if (restarts == 0) continue;
      s.points.emplace_back(p.time / unit, static_cast<double>(same) / restarts);
    }
    spec.series.push_back(std::move(s));
  }
  return RenderLineChart(spec);
}

std::string UtilizationChart(const RunSummary& run) {
  const auto [unit, label] = TimeUnit(run.simulated);
  ChartSpec spec;
  spec.title = "Device utilisation";
  spec.subtitle = absl::StrFormat(
      "scenario %s, seed %d; solid: used by running VMs, dashed: held for stopped VMs",
      run.scenario, run.seed);
  spec.x_label = label;
  spec.y_label = "share of healthy devices";
  spec.x_max = run.simulated / unit;
  for (const PolicyMetrics& m : run.policies) {
    ChartSeries used{m.policy + " used", PolicyColor(m.policy), false, {}};
    ChartSeries held{m.policy + " held", PolicyColor(m.policy), true, {}};
    bool any_held = false;
    for (const SeriesPoint& p : m.series) {
      used.points.emplace_back(p.time / unit, p.utilization);
      held.points.emplace_back(p.time / unit, p.held_idle);
      any_held |= p.held_idle > 0;
    }
    spec.series.push_back(std::move(used));
    if (any_held) spec.series.push_back(std::move(held));
  }
  return RenderLineChart(spec);
}

std::string BootStormChart(const RunSummary& run, size_t storm) {
  ChartSpec spec;
  uint64_t vms = 0, hosts = 0;
  SimTime longest = 0;
  for (const PolicyMetrics& m : run.policies) {
    const StormMetrics& sm = m.storms[storm];
    vms = std::max(vms, sm.vms);
    hosts = sm.nodes;
    if (!sm.recovery.empty()) longest = std::max(longest, sm.recovery.back());
  }
  const std::string name = run.policies.empty() ? "" : run.policies[0].storms[storm].name;
  spec.title = absl::StrFormat("VMs running again after the reboot (%s)", name);
  spec.subtitle = absl::StrFormat(
      "scenario %s, seed %d; %d hosts, %d VMs; time since the hosts were Ready", run.scenario,
      run.seed, hosts, vms);
  spec.x_label = "seconds since the hosts were Ready";
  spec.y_label = "VMs running";
  spec.x_max = std::max(1.0, longest * 1.05 / kSecond);
  spec.y_max = std::max<double>(1, vms);
  spec.y_percent = false;
  for (const PolicyMetrics& m : run.policies) {
    const StormMetrics& sm = m.storms[storm];
    // A step per VM: the count rises at each VM's time.
    ChartSeries s{m.policy, PolicyColor(m.policy), false, {{0, 0}}};
    for (size_t k = 0; k < sm.recovery.size(); ++k) {
      const double x = static_cast<double>(sm.recovery[k]) / kSecond;
      s.points.emplace_back(x, static_cast<double>(k));
      s.points.emplace_back(x, static_cast<double>(k + 1));
    }
    s.points.emplace_back(spec.x_max, static_cast<double>(sm.recovery.size()));
    spec.series.push_back(std::move(s));
  }
  return RenderLineChart(spec);
}

}  // namespace pdc::sim
