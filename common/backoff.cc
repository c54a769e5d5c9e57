#include "common/backoff.h"

#include <algorithm>
#include <random>

namespace pdc {

absl::Duration NextBackoff(absl::Duration current, absl::Duration initial, absl::Duration max) {
  if (current <= absl::ZeroDuration()) return std::min(initial, max);
  return std::min(current * 2, max);
}

absl::Duration Jittered(absl::Duration d, double factor) {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  std::uniform_real_distribution<double> u(0.0, factor);
  return d + d * u(gen);
}

}  // namespace pdc
