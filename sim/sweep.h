// `pdc-sim sweep`: a kube-scheduler-shaped load generator for pdc-extender
// and how its latency grows with the cluster. For each node count it
//  1. reports an inventory for every node (8 NVMe each), as pdc-node does;
//  2. first starts: one VM pod after the other runs filter then prioritize
//     (kube-scheduler's scheduling cycle is sequential), the chosen node is
//     handed to a pool of binder threads, each with its own connection
//     (binding cycles run concurrently), which bind and then do pdc-node's
//     hand-off (GET allocations, POST handoffs); the scheduling thread does
//     not wait for binds, so filters see binds in flight, as they do in a
//     cluster. A bind refused by the extender sends the pod back to the
//     queue (at most 10 attempts);
//  3. restarts: every VM stops (claims released) and starts again with a new
//     pod, which pdc must place on its own devices (sticky path; below
//     --percentage 100 the pod is offered its claims' node alone, the node
//     affinity of docs/design.md §5.7, since a window of nodes rarely
//     holds it);
// and reports p50/p90/p99/max per verb and phase, and pods per second.
// Every answer is checked as in the HTTP run mode.
// Thread-safety: RunSweepStep is reentrant.
#ifndef PDC_SIM_SWEEP_H_
#define PDC_SIM_SWEEP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "sim/http_stats.h"

namespace pdc::sim {

struct SweepOptions {
  std::string url;            // A running extender, or:
  std::string spawn_binary;   // pdc-extender to start per step.
  int pods = 400;             // VMs per step (<= 8 per node).
  int binders = 4;            // Concurrent bind connections.
  // percentageOfNodesToScore: 0 = kube-scheduler's adaptive default, with
  // restarts pinned to their claims' node as the admission webhook does
  // (what deploy/ ships); 100 = the configuration without the webhook.
  int percentage = 0;
  bool node_list = false;     // NodeList instead of NodeNames.
  Clock* clock = RealClock();  // For the wall times and latencies reported.
};

struct SweepPhase {
  std::string name;  // "first-start" | "restart"
  double wall_seconds = 0;
  int pods_placed = 0;
  int bind_refused = 0;   // Answers with an Error (gate, race); retried.
  int unplaced = 0;       // Gave up after 5 attempts.
  std::vector<VerbSummary> verbs;
};

struct SweepStep {
  int nodes = 0;
  int offered = 0;  // Nodes per filter call.
  int pods = 0;
  double inventory_seconds = 0;
  std::vector<SweepPhase> phases;
  uint64_t requests = 0;
  uint64_t malformed = 0;
  std::vector<std::string> malformed_examples;
};

// One node count against `url` (node names carry `prefix` so that several
// steps can share one extender).
absl::StatusOr<SweepStep> RunSweepStep(const SweepOptions& options, const std::string& url,
                                       int nodes, const std::string& prefix);

std::string FormatSweepTable(const std::vector<SweepStep>& steps);
std::string SweepCsv(const std::vector<SweepStep>& steps);
std::string SweepJson(const std::vector<SweepStep>& steps);

// `pdc-sim sweep ARGS`: returns the exit code.
int SweepMain(const std::vector<std::string>& args);

}  // namespace pdc::sim

#endif  // PDC_SIM_SWEEP_H_
