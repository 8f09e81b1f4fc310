// SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014; the constants of Vigna's reference version): the
// one home of the generator that seeds xoshiro256** (core/xoshiro.h), draws the
// evaluation tasks (eval/run/rng.h), and of its output function used as a
// stateless hash (synthetic weights, seeded chunk ranking). Every result is a
// fixed function of its input on every platform and standard library.
#pragma once

#include <cstdint>

namespace hqekv {

// The state increment: 2^64 / golden ratio, odd.
inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

// The value SplitMix64 returns from state x: x + gamma through two
// xorshift-multiply rounds and a final xorshift. A well-mixed 64-bit hash of
// x (every input bit flips each output bit with probability ~1/2), used as a
// counter-based generator: SplitMix64Hash(seed ^ f(i)) for element i.
constexpr uint64_t SplitMix64Hash(uint64_t x) {
  uint64_t z = x + kSplitMix64Gamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One step of the generator: returns the next value and advances `state` by
// gamma (the sequence of states is state0 + k * gamma).
constexpr uint64_t SplitMix64Next(uint64_t& state) {
  const uint64_t out = SplitMix64Hash(state);
  state += kSplitMix64Gamma;
  return out;
}

}  // namespace hqekv
