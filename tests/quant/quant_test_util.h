// Shared helpers of the quant tests: seeded data, and running one format
// through either the dispatched API or the scalar reference.
#pragma once

#include <gtest/gtest.h>
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "quant/format.h"
#include "quant/format_traits.h"
#include "quant/internal.h"
#include "../simd_targets.h"

namespace hqekv::quant::testing {

// Whether the int16 VNNI kernels (multi_query_q16.cc, multi_query_rows_q16.cc)
// must run on an AVX3_DL CPU. The release build must; in the sanitizer build
// (Debug, ASan + UBSan) Highway dispatched their entries to its scalar target
// even with AVX3_DL forced (seen with gdb; cause not investigated), so there
// only SIMD == oracle is checked where it runs.
#ifdef HQEKV_SANITIZED
inline constexpr bool kKernelMustRun = false;
#else
inline constexpr bool kKernelMustRun = true;
#endif

// T x D standard-normal values scaled by `scale`, plus a few outliers of 8x.
inline std::vector<float> Gaussian(int T, int D, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(T) * D);
  for (auto& v : x) v = scale * n(rng);
  for (size_t i = 0; i < x.size(); i += 37) x[i] *= 8.0f;
  return x;
}

struct Encoded {
  std::vector<uint8_t> codes, meta;
};

inline Encoded Encode(const Format& f, const std::vector<float>& x, int T, int D, bool reference) {
  Encoded e;
  // One guard byte after each plane catches writes past the declared sizes.
  e.codes.assign(CodeBytes(f, T, D) + 1, 0xA5);
  e.meta.assign(MetaBytes(f, T, D) + 1, 0xA5);
  if (reference) {
    ref::QuantizeChunk(f, x.data(), T, D, e.codes.data(), e.meta.data());
  } else {
    QuantizeChunk(f, x.data(), T, D, e.codes.data(), e.meta.data());
  }
  return e;
}

inline std::vector<float> Decode(const Format& f, const Encoded& e, int T, int D, bool reference) {
  std::vector<float> y(static_cast<size_t>(T) * D);
  if (reference) {
    ref::DequantizeChunk(f, e.codes.data(), e.meta.data(), T, D, y.data());
  } else {
    DequantizeChunk(f, e.codes.data(), e.meta.data(), T, D, y.data());
  }
  return y;
}

// Every format the store and policies use, in both groupings where they apply.
inline std::vector<Format> AllFormats() {
  std::vector<Format> fs = {F16(), F32(), Fp8E4M3(), Fp8E5M2(), Int8PerToken()};
  for (int b : {1, 2, 4, 8}) {
    fs.push_back(Uniform(b, Grouping::kPerToken, 8));
    fs.push_back(Uniform(b, Grouping::kPerChannel));
  }
  fs.push_back(Uniform3(Grouping::kPerToken, 8));
  fs.push_back(Uniform3(Grouping::kPerChannel));
  for (int b : {1, 2, 4}) {
    fs.push_back(Normal(b, Grouping::kPerToken, 8));
    fs.push_back(Normal(b, Grouping::kPerChannel));
  }
  fs.push_back(*ParseFormat("iq4_nl"));  // D a multiple of 32: the tests skip D = 8
  return fs;
}

// Whether the generic tests run f on a chunk with D channels (the llama.cpp
// block kinds need D a multiple of their 32-value block).
inline bool TakesD(const Format& f, int D) {
  const int b = Traits(f.kind).d_block;
  return b == 0 || D % b == 0;
}

// The error bounds of the kinds with one symmetric fp16 scale s per run of
// consecutive values (int8, fp8, iq4_nl): the generic tests' only per-kind
// numbers, kept beside the list above so a new kind adds its case here.
struct SymmetricBounds {
  // Round trip (tests/quant/roundtrip_test.cc): |x - x^| <= x_rel |x| + s_rel s.
  float x_rel = 0.0f, s_rel = 0.0f;
  // A constant input c (tests/quant/degenerate_test.cc) comes back within
  // const_rel |c| + const_abs beyond fp16 rounding.
  float const_rel = 0.0f, const_abs = 0.0f;
  // Values sharing one scale; the scale of value k is the fp16 at meta + 2 (k / run).
  size_t run = 0;
};
inline SymmetricBounds SymmetricBoundsOf(const Format& f, int T, int D) {
  const size_t chunk = static_cast<size_t>(T) * static_cast<size_t>(D);
  switch (f.kind) {
    case Kind::kInt8:  // s / 2; the scale amax / 127 is rounded up, so nothing saturates
      return {.s_rel = 0.5f, .const_rel = 1.01f / 254.0f, .run = static_cast<size_t>(D)};
    case Kind::kFp8E4M3:  // 3 mantissa bits; the subnormal step is s * 2^-9
      return {.x_rel = 0x1p-4f, .s_rel = 0x1p-10f, .const_rel = 0x1p-4f, .run = chunk};
    case Kind::kFp8E5M2:  // 2 mantissa bits; the subnormal step is s * 2^-16
      return {.x_rel = 0x1p-3f, .s_rel = 0x1p-17f, .const_rel = 0x1p-3f, .run = chunk};
    case Kind::kIq4Nl:
      // Half the widest gap of the grid (113 - 89 = 24) times |d|, plus the
      // refit's move of the ends (|d| is refitted from max / -127): max
      // |x - x^| / |d| = 16.05 over 20,000 Gaussian blocks (a third with an 8x
      // outlier, a fifth offset), computed in Python. A constant reconstructs
      // as -127 * fp16(-c / 127): fp16 rounding of a scale that can be
      // subnormal (step 2^-24, times 127 / 2).
      return {.s_rel = 20.0f, .const_abs = 127.0f * 0x1p-25f, .run = 32};
    default:
      return {};
  }
}

inline float MaxAbs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Runs fn(target) once per x86 SIMD target this CPU supports, dispatch
// forced to it (tests/simd_targets.h); returns how many ran.
template <class Fn>
int RunOnEachTarget(Fn fn) {
  return hqekv::test::OnEachTarget(fn);
}

inline float Group16(const uint8_t* meta, int plane, int groups, int g) {
  return F16ToF32(LoadF16(meta + 2 * (plane * groups + g)));
}

}  // namespace hqekv::quant::testing
