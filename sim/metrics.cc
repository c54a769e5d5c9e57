#include "sim/metrics.h"

#include <cmath>

namespace pdc::sim {

SimTime PolicyMetrics::LatencyPercentile(double p) const {
  if (latencies.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * latencies.size()));
  if (rank == 0) rank = 1;
  if (rank > latencies.size()) rank = latencies.size();
  return latencies[rank - 1];
}

}  // namespace pdc::sim
