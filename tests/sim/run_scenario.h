// Runs a scenario in a test: parse, run with the given policies (all when
// empty), and report a failure at either step as a test failure.
// Thread-safety: test-only.
#ifndef PDC_TESTS_SIM_RUN_SCENARIO_H_
#define PDC_TESTS_SIM_RUN_SCENARIO_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "sim/scenario.h"
#include "sim/simulation.h"

namespace pdc::testing {

// The run's summary; an empty one (and a test failure) when the scenario
// does not parse or does not run.
inline sim::RunSummary MustRun(const std::string& yaml, std::vector<std::string> policies = {}) {
  absl::StatusOr<sim::Scenario> s = sim::ParseScenario(yaml, "test");
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  sim::RunOptions options;
  options.policies = std::move(policies);
  absl::StatusOr<sim::RunSummary> run = sim::RunScenario(*s, options);
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? *run : sim::RunSummary{};
}

}  // namespace pdc::testing

#endif  // PDC_TESTS_SIM_RUN_SCENARIO_H_
