// The discrete-event engine: runs one scenario under each requested policy,
// one policy at a time, each on a fresh cluster and event queue. Workload and
// failure events are drawn from random streams that depend only on the
// scenario's seed (one stream per VM, one per failure process), never on what
// a policy decided, so every policy sees the same VM stops, starts, deletions
// and failures at the same simulated times.
// Thread-safety: RunScenario is reentrant; it shares no state between calls.
#ifndef PDC_SIM_SIMULATION_H_
#define PDC_SIM_SIMULATION_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/metrics.h"
#include "sim/scenario.h"

namespace pdc::sim {

struct HttpModeOptions;
class HttpStats;

struct RunOptions {
  std::vector<std::string> policies;  // empty: all, in AllPolicyNames() order
  // Policies run at the same time, each in its own thread (they share
  // nothing); results keep the order of `policies`. 0: one per core.
  int jobs = 1;
  // Record every placement (PolicyMetrics::trace) to compare runs.
  bool trace = false;
  // For the pdc-http policy.
  const HttpModeOptions* http = nullptr;
  HttpStats* http_stats = nullptr;
  // Called now and then with the policy being run and its progress (0..1).
  std::function<void(std::string_view policy, double done)> progress;
};

absl::StatusOr<RunSummary> RunScenario(const Scenario& scenario,
                                       const RunOptions& options);

}  // namespace pdc::sim

#endif  // PDC_SIM_SIMULATION_H_
