// xoshiro256** (Blackman & Vigna), seeded through SplitMix64: the one PRNG
// behind every seeded, reproducible choice in hqekv (sampling, TPE). Own code
// instead of <random> distributions because those are implementation-defined:
// the same seed must give the same results with every standard library.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/splitmix64.h"

namespace hqekv {

class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (auto& s : s_) s = SplitMix64Next(seed);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform double in [0, 1) from the top 53 bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Standard normal (Box-Muller, one value per call).
  double Normal() {
    double u1 = Uniform();
    while (u1 <= 0.0) u1 = Uniform();
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t s_[4];
};

}  // namespace hqekv
