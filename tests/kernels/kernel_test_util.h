// Helpers shared by the model's kernel tests (one home, so that the test
// files also compile together as one unity translation unit).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/kernels.h"
#include "../simd_targets.h"

namespace hqekv::kernels::test_util {

// Every x86 target this CPU has, AVX-512 VNNI included (the model's int8,
// panel and bf16 kernels compile it). Returns how many targets ran.
template <class Fn>
int OnEachVnniTarget(Fn fn) {
  return hqekv::test::OnEachTarget(fn, hqekv::test::kSimdTestTargetsWithVnni);
}

// Stores v as fp16 at p (unaligned; ggml blocks keep their scales there).
inline void PutHalf(uint8_t* p, float v) {
  const f16_t h = F32ToF16(v);
  std::memcpy(p, &h, 2);
}

// size values drawn from N(0, 1).
inline std::vector<float> NormalValues(int64_t size, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(size);
  for (float& v : x) v = nd(rng);
  return x;
}

// n rows of k random values (normal, sd 1) stored as type t (F32, F16 or
// BF16: the high half of the fp32 bits, truncated).
inline std::vector<uint8_t> RandomFloatRows(TensorType t, int64_t n, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint8_t> buf(n * RowBytes(t, k));
  for (int64_t i = 0; i < n * k; ++i) {
    const float v = nd(rng);
    if (t == TensorType::kF32) {
      std::memcpy(buf.data() + 4 * i, &v, 4);
    } else if (t == TensorType::kF16) {
      PutHalf(buf.data() + 2 * i, v);
    } else {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      const uint16_t b = static_cast<uint16_t>(bits >> 16);
      std::memcpy(buf.data() + 2 * i, &b, 2);
    }
  }
  return buf;
}

}  // namespace hqekv::kernels::test_util
