// Seeded pseudo-random numbers for the simulator. Our own generator
// (SplitMix64) and our own sampling, because std::*_distribution results are
// implementation-defined: the same seed must give byte-identical output on
// every build. Streams are derived from (seed, purpose, index) so that, e.g.,
// one VM's stop/start times never depend on what a policy decided.
// Thread-safety: value type, not synchronised; one Rng per user.
#ifndef PDC_SIM_RNG_H_
#define PDC_SIM_RNG_H_

#include <cmath>
#include <cstdint>

namespace pdc::sim {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}

  // An independent stream for (seed, purpose, index).
  static Rng Stream(uint64_t seed, uint64_t purpose, uint64_t index) {
    Rng mix(seed ^ (purpose * 0x9e3779b97f4a7c15ULL));
    uint64_t a = mix.Next();
    Rng mix2(a ^ (index * 0xbf58476d1ce4e5b9ULL) ^ 0x94d049bb133111ebULL);
    return Rng(mix2.Next());
  }

  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1), 53 bits.
  double Uniform01() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Uniform in [0, n). REQUIRES: n > 0. Lemire's multiply-shift; the tiny
  // bias for huge n does not matter here and keeps it branch-free.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>(
        (static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

  // Exponentially distributed with the given mean.
  double Exponential(double mean) {
    return -mean * std::log1p(-Uniform01());
  }

 private:
  uint64_t state_;
};

// Purposes of the streams (stable numbers: changing one changes outputs).
enum StreamPurpose : uint64_t {
  kStreamVm = 1,
  kStreamNodeFailures = 2,
  kStreamDeviceFailures = 3,
  kStreamMassRestart = 4,
  kStreamPolicy = 5,
  kStreamStartPath = 6,
};

}  // namespace pdc::sim

#endif  // PDC_SIM_RNG_H_
