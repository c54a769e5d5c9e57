// pdc-sim throughput on sim/scenarios/rack-5000.yaml (5000 nodes x 8 NVMe,
// 40k VMs): wall time per policy for a fixed number of workload/failure
// events. Arg 0: policy (0 device-plugin, 1 dra, 2 pdc); arg 1: events.
// The full 1M-event figure comes from a timed `pdc-sim run` (bench/README.md).
#include <string>

#include "benchmark/benchmark.h"
#include "sim/policy.h"
#include "sim/scenario.h"
#include "sim/simulation.h"

namespace {

// CMake compiles with absolute paths, so the scenario is found next to this
// file whatever the working directory.
std::string ScenarioPath() {
  std::string here = __FILE__;
  const size_t cut = here.rfind("bench/");
  return (cut == std::string::npos ? std::string() : here.substr(0, cut)) +
         "sim/scenarios/rack-5000.yaml";
}

void BM_Rack5000(benchmark::State& state) {
  const std::string policy = pdc::sim::AllPolicyNames()[state.range(0)];
  absl::StatusOr<pdc::sim::Scenario> scenario =
      pdc::sim::LoadScenarioFile(ScenarioPath());
  if (!scenario.ok()) {
    state.SkipWithError(std::string(scenario.status().message()).c_str());
    return;
  }
  scenario->max_events = static_cast<uint64_t>(state.range(1));
  pdc::sim::RunOptions options;
  options.policies = {policy};
  uint64_t events = 0;
  for (auto _ : state) {
    absl::StatusOr<pdc::sim::RunSummary> run = pdc::sim::RunScenario(*scenario, options);
    if (!run.ok()) {
      state.SkipWithError(std::string(run.status().message()).c_str());
      return;
    }
    events += run->exogenous_events;
    benchmark::DoNotOptimize(run->policies[0].same_device);
  }
  state.SetLabel(policy);
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Rack5000)
    ->ArgsProduct({{0, 1, 2}, {200000}})
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace
BENCHMARK_MAIN();
