// Deterministic pseudo-random numbers for task generation. SplitMix64
// (core/splitmix64.h) is
// used instead of <random> distributions because the standard leaves the
// distribution algorithms implementation-defined: the same seed must give the
// same prompts with every compiler and standard library.
#pragma once

#include <cstdint>

#include "core/splitmix64.h"

namespace hqekv::eval {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed ^ kSplitMix64Gamma) {}

  uint64_t Next() { return SplitMix64Next(state_); }
  // Uniform integer in [0, n) (n > 0); the modulo bias is < n / 2^64.
  uint64_t Below(uint64_t n) { return Next() % n; }
  // Uniform integer in [lo, hi].
  int64_t Range(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Below(static_cast<uint64_t>(hi - lo + 1)));
  }
  // Uniform double in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// Mixes a base seed with a task tag and an index so that every (task,
// instance) gets an independent stream.
inline uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b = 0) {
  Rng r(seed * 0x100000001B3ull ^ a * 0xD6E8FEB86659FD93ull ^ b * 0xA0761D6478BD642Full);
  r.Next();
  return r.Next();
}

}  // namespace hqekv::eval
