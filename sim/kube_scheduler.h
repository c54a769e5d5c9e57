// A model of kube-scheduler's node choice (v1.31 defaults), shared by every
// policy so that they differ only in what pdc-sim compares:
//  - Filter: NodeResourcesFit (CPU, memory, the extended device resource) on
//    Ready nodes, scanning from a rotating start index and stopping once
//    numFeasibleNodesToFind nodes passed (percentageOfNodesToScore; 0 means
//    the adaptive default 50 - nodes/125 %, at least 5 %, at least 100
//    nodes), exactly as schedule_one.go does.
//  - Score: NodeResourcesFit LeastAllocated over cpu and memory (weight 1)
//    plus NodeResourcesBalancedAllocation (weight 1); plugins whose score is
//    the same on every node for these pods (taints, affinity, image
//    locality) are left out since they cannot change the choice.
//  - selectHost: the highest total; ties broken uniformly at random (the
//    real one uses reservoir sampling), here with the run's seeded Rng.
// Thread-safety: not synchronised; one per policy run.
#ifndef PDC_SIM_KUBE_SCHEDULER_H_
#define PDC_SIM_KUBE_SCHEDULER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cluster_state.h"
#include "sim/rng.h"

namespace pdc::sim {

class KubeSchedulerModel {
 public:
  KubeSchedulerModel(const ClusterState* state, int percentage_of_nodes_to_score,
                     Rng* rng)
      : state_(state), percentage_(percentage_of_nodes_to_score), rng_(rng) {}

  // numFeasibleNodesToFind of kube-scheduler for `all_nodes` nodes.
  static int NumFeasibleNodesToFind(int percentage, int all_nodes);

  // Feasible nodes for `shape` into `out` (cleared). `scanned` gets how many
  // nodes were looked at; when none fits, `why` says what stopped them.
  void FindFeasible(const VmShape& shape, std::vector<int>* out, int* scanned,
                    std::string* why);

  // The same for a pod with required node affinity to `node`.
  void FeasiblePinned(int node, const VmShape& shape, std::vector<int>* out,
                      std::string* why) const;

  // Sum of the default scoring plugins (0..200) for placing `shape` there.
  int64_t Score(int node, const VmShape& shape);

  // Index into `nodes` of the chosen host: highest score, random tie-break.
  // REQUIRES: !nodes.empty(), scores.size() == nodes.size().
  size_t SelectHost(const std::vector<int64_t>& scores);

 private:
  int64_t ComputeScore(int node, const VmShape& shape) const;

  struct CacheEntry {
    uint32_t version = ~0u;
    int cpu = -1, memory = -1;
    int64_t score = 0;
  };
  const ClusterState* state_;
  std::vector<CacheEntry> cache_;
  int percentage_;
  Rng* rng_;
  size_t next_start_ = 0;
};

}  // namespace pdc::sim

#endif  // PDC_SIM_KUBE_SCHEDULER_H_
