#include "sim/metrics.h"

#include <cmath>

namespace pdc::sim {
namespace {

// Nearest rank; REQUIRES: sorted. 0 when empty.
SimTime NearestRank(const std::vector<SimTime>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  if (rank == 0) rank = 1;
  if (rank > sorted.size()) rank = sorted.size();
  return sorted[rank - 1];
}

}  // namespace

SimTime PolicyMetrics::LatencyPercentile(double p) const { return NearestRank(latencies, p); }

SimTime StormMetrics::Percentile(double p) const { return NearestRank(recovery, p); }

}  // namespace pdc::sim
