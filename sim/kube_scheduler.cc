#include "sim/kube_scheduler.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace pdc::sim {

int KubeSchedulerModel::NumFeasibleNodesToFind(int percentage, int all_nodes) {
  constexpr int kMinFeasibleNodesToFind = 100;
  constexpr int kMinFeasibleNodesPercentageToFind = 5;
  if (all_nodes < kMinFeasibleNodesToFind) return all_nodes;
  if (percentage == 0) {
    percentage = 50 - all_nodes / 125;
    if (percentage < kMinFeasibleNodesPercentageToFind) {
      percentage = kMinFeasibleNodesPercentageToFind;
    }
  }
  int n = static_cast<int>(static_cast<int64_t>(all_nodes) * percentage / 100);
  return std::max(n, kMinFeasibleNodesToFind);
}

void KubeSchedulerModel::FindFeasible(const VmShape& shape, std::vector<int>* out,
                                      int* scanned, std::string* why) {
  out->clear();
  const int n = static_cast<int>(state_->node_up.size());
  const int want = NumFeasibleNodesToFind(percentage_, n);
  const int start = static_cast<int>(next_start_);
  // Walk the nodes from `start`, wrapping once, like kube-scheduler's
  // parallel filter; nodes without a free device are skipped in bulk (they
  // fail NodeResourcesFit) but still count as processed.
  int processed = n;
  for (int pass = 0; pass < 2 && processed == n; ++pass) {
    const int from = pass == 0 ? start : 0;
    const int to = pass == 0 ? n : start;
    for (int node = state_->NextWithFree(shape.class_index, from);
         node >= 0 && node < to;
         node = state_->NextWithFree(shape.class_index, node + 1)) {
      if (!state_->Fits(node, shape)) continue;
      out->push_back(node);
      if (static_cast<int>(out->size()) == want) {
        processed = (node - start + n) % n + 1;
        break;
      }
    }
  }
  next_start_ = (next_start_ + processed) % n;
  *scanned = processed;
  if (!out->empty() || why == nullptr) return;
  // Nothing fits: say why, the way kube-scheduler's FitError does, most
  // frequent reason first. Rare, so a plain scan is fine.
  int down = 0, no_cpu = 0, no_device = 0;
  for (int node = 0; node < n; ++node) {
    if (!state_->node_up[node]) {
      ++down;
    } else if (state_->Free(node, shape.class_index) < shape.device_count) {
      ++no_device;
    } else {
      ++no_cpu;
    }
  }
  std::vector<std::pair<int, std::string>> r = {
      {no_device, "Insufficient " + state_->cluster->class_names[shape.class_index]},
      {no_cpu, "Insufficient cpu/memory"},
      {down, "node(s) not ready"}};
  std::stable_sort(r.begin(), r.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  *why = r[0].second;
}

void KubeSchedulerModel::FeasiblePinned(int node, const VmShape& shape,
                                        std::vector<int>* out, std::string* why) const {
  out->clear();
  if (state_->Fits(node, shape)) {
    out->push_back(node);
  } else if (why != nullptr) {
    *why = !state_->node_up[node] ? "pinned node not ready"
           : state_->Free(node, shape.class_index) < shape.device_count
               ? "pinned node: Insufficient " +
                     state_->cluster->class_names[shape.class_index]
               : "pinned node: Insufficient cpu/memory";
  }
}

int64_t KubeSchedulerModel::Score(int node, const VmShape& shape) {
  // Cached per (node version, shape): a node's score only changes when a pod
  // lands on it or leaves it.
  if (cache_.size() != state_->node_up.size()) cache_.assign(state_->node_up.size(), {});
  CacheEntry& e = cache_[node];
  if (e.version == state_->version[node] && e.cpu == shape.cpu &&
      e.memory == shape.memory_gib) {
    return e.score;
  }
  e = CacheEntry{state_->version[node], shape.cpu, shape.memory_gib,
                 ComputeScore(node, shape)};
  return e.score;
}

int64_t KubeSchedulerModel::ComputeScore(int node, const VmShape& shape) const {
  const SimNode& n = state_->cluster->nodes[node];
  const int64_t cpu_req = state_->cpu_used[node] + shape.cpu;
  const int64_t mem_req = state_->mem_used[node] + shape.memory_gib;
  // LeastAllocated: (allocatable - requested) * 100 / allocatable, averaged.
  const int64_t cpu_score = (n.cpu - cpu_req) * 100 / n.cpu;
  const int64_t mem_score = (n.memory_gib - mem_req) * 100 / n.memory_gib;
  const int64_t least = (cpu_score + mem_score) / 2;
  // BalancedAllocation: (1 - std of the two fractions) * 100.
  const double cpu_f = static_cast<double>(cpu_req) / n.cpu;
  const double mem_f = static_cast<double>(mem_req) / n.memory_gib;
  const int64_t balanced =
      static_cast<int64_t>((1.0 - std::abs(cpu_f - mem_f) / 2.0) * 100.0);
  return least + balanced;
}

size_t KubeSchedulerModel::SelectHost(const std::vector<int64_t>& scores) {
  // Uniform among the top scores, as selectHost's reservoir sampling is;
  // counting first needs one random draw instead of one per tie.
  int64_t best = scores[0];
  uint64_t ties = 0;
  for (int64_t s : scores) {
    if (s > best) {
      best = s;
      ties = 1;
    } else if (s == best) {
      ++ties;
    }
  }
  uint64_t pick = ties > 1 ? rng_->Below(ties) : 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores[i] == best && pick-- == 0) return i;
  }
  return 0;
}

}  // namespace pdc::sim
