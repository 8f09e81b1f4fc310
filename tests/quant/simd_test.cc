// The Highway kernels against the scalar reference, on every compiled SIMD
// target this CPU supports: codes and metadata bit-identical, reconstruction,
// DotChunk and AxpyChunk within float tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "quant_test_util.h"

namespace hqekv::quant {
namespace {
using testing::Decode;
using testing::Encode;
using testing::Gaussian;
using testing::MaxAbs;

// Runs fn once per SIMD target available here, with dispatch forced to it.
template <class Fn>
void ForEachTargetOrSkip(Fn fn) {
  if (testing::RunOnEachTarget(fn) == 0) {
    GTEST_SKIP() << "no x86 SIMD target on this CPU; the reference is used";
  }
}

// Inputs that stress the kernels: Gaussian, tiny and huge scales, constant
// and zero groups, non-finite values.
std::vector<std::vector<float>> Inputs(int T, int D, uint32_t seed) {
  std::vector<std::vector<float>> xs;
  xs.push_back(Gaussian(T, D, seed));
  xs.push_back(Gaussian(T, D, seed + 1, 1e-4f));
  xs.push_back(Gaussian(T, D, seed + 2, 5000.0f));
  xs.push_back(std::vector<float>(static_cast<size_t>(T) * D, 0.0f));
  xs.push_back(std::vector<float>(static_cast<size_t>(T) * D, -3.14159f));
  std::vector<float> mixed = Gaussian(T, D, seed + 3);
  for (int t = 0; t < T; t += 2)
    std::fill(mixed.begin() + t * D, mixed.begin() + t * D + D / 2, 0.25f);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {
      std::numeric_limits<float>::quiet_NaN(), inf, -inf, 1e30f, -1e30f, 70000.0f};
  for (size_t i = 0; i < mixed.size(); i += 13) mixed[i] = specials[(i / 13) % 6];
  xs.push_back(mixed);
  return xs;
}

void CompareOne(const Format& f, const std::vector<float>& x, int T, int D) {
  const testing::Encoded r = Encode(f, x, T, D, /*reference=*/true);
  const testing::Encoded s = Encode(f, x, T, D, /*reference=*/false);
  ASSERT_EQ(r.codes, s.codes) << FormatName(f) << " T=" << T << " D=" << D;
  ASSERT_EQ(r.meta, s.meta) << FormatName(f) << " T=" << T << " D=" << D;
  const std::vector<float> yr = Decode(f, r, T, D, true);
  const std::vector<float> ys = Decode(f, s, T, D, false);
  const float scale = MaxAbs(yr);
  for (size_t i = 0; i < yr.size(); ++i) {
    if (f.kind == Kind::kF32 && !std::isfinite(x[i])) continue;  // kF32 keeps them (documented)
    ASSERT_TRUE(std::isfinite(ys[i])) << FormatName(f) << " i=" << i;
    ASSERT_NEAR(ys[i], yr[i], 1e-6f * scale + 1e-30f) << FormatName(f) << " T=" << T << " D=" << D;
  }
  // Dot and Axpy against the reference (dequantize, then a float loop).
  const std::vector<float> q = Gaussian(1, D, 99);
  const std::vector<float> w = Gaussian(1, T, 98);
  std::vector<float> sr(T), ss(T), ar(D, 0.5f), as(D, 0.5f);
  ref::DotChunk(f, r.codes.data(), r.meta.data(), T, D, q.data(), sr.data());
  DotChunk(f, s.codes.data(), s.meta.data(), T, D, q.data(), ss.data());
  ref::AxpyChunk(f, r.codes.data(), r.meta.data(), T, D, w.data(), ar.data());
  AxpyChunk(f, s.codes.data(), s.meta.data(), T, D, w.data(), as.data());
  if (f.kind == Kind::kF32 &&
      std::any_of(x.begin(), x.end(), [](float v) { return !std::isfinite(v); })) {
    return;
  }
  // Sums of D (or T) products: tolerance relative to the sum of magnitudes.
  const float tol_dot = 1e-5f * scale * MaxAbs(q) * static_cast<float>(D) + 1e-30f;
  const float tol_axpy = 1e-5f * scale * MaxAbs(w) * static_cast<float>(T) + 1e-6f;
  for (int t = 0; t < T; ++t) ASSERT_NEAR(ss[t], sr[t], tol_dot) << FormatName(f) << " t=" << t;
  for (int d = 0; d < D; ++d) ASSERT_NEAR(as[d], ar[d], tol_axpy) << FormatName(f) << " d=" << d;
}

TEST(QuantSimd, BitIdenticalCodesAndCloseValuesOnEveryTarget) {
  std::vector<Format> formats = testing::AllFormats();
  formats.push_back(Uniform(4, Grouping::kPerToken));  // default g = 32
  formats.push_back(Uniform(2, Grouping::kPerToken));
  formats.push_back(Normal(1, Grouping::kPerToken));
  formats.push_back(Normal(2, Grouping::kPerToken));
  formats.push_back(*ParseFormat("u4:chan:had"));
  formats.push_back(*ParseFormat("n2:tok:g=16:had"));
  ForEachTargetOrSkip([&](int64_t) {
    uint32_t seed = 11;
    for (const Format& f : formats) {
      for (int T : {1, 7, 32}) {
        for (int D : {8, 64, 128}) {
          if (!Validate(f, T, D).ok()) continue;  // g=32 with D=8
          for (const auto& x : Inputs(T, D, seed += 5)) CompareOne(f, x, T, D);
        }
      }
    }
  });
}

// Odd shapes and group sizes: each either takes a fast path or falls back,
// and either way matches the reference.
TEST(QuantSimd, OddShapesMatchTheReference) {
  ForEachTargetOrSkip([&](int64_t) {
    uint32_t seed = 500;
    for (int T : {2, 3, 33, 64}) {
      for (int D : {16, 24, 48, 96, 160}) {
        for (const char* spec :
             {"u4:tok:g=8", "u2:tok:g=16", "u1:tok:g=24", "u8:tok:g=48", "n2:tok:g=8",
              "n1:tok:g=16", "u4:chan", "n2:chan", "int8", "f16", "fp8e5m2"}) {
          const Format f = *ParseFormat(spec);
          if (!Validate(f, T, D).ok()) continue;
          CompareOne(f, Gaussian(T, D, ++seed), T, D);
        }
      }
    }
  });
}

// The fast paths really run (a fallback to the reference would make the
// comparison above vacuous) for the formats the store uses on 32 x 128 chunks.
TEST(QuantSimd, FastPathsCoverTheStoreFormats) {
  ForEachTargetOrSkip([&](int64_t target) {
    const int T = 32, D = 128;
    const std::vector<float> x = Gaussian(T, D, 5);
    std::vector<const char*> names = {"u4:tok",  "u2:tok",     "u1:tok",  "u8:tok",  "n1:tok",
                                      "n2:tok",  "u4:chan",    "u2:chan", "u1:chan", "n1:chan",
                                      "n2:chan", "int8",       "fp8e4m3", "fp8e5m2", "u3:tok",
                                      "u3:chan", "u3:tok:g=64"};
    if (target != HWY_SSE4) names.push_back("f16");  // fp16 conversion needs F16C
    for (const char* name : names) {
      const Format f = *ParseFormat(name);
      std::vector<uint8_t> codes(CodeBytes(f, T, D)), meta(MetaBytes(f, T, D) + 1);
      std::vector<float> y(x.size()), s(T), acc(D);
      EXPECT_TRUE(simd::Quantize(f, x.data(), T, D, codes.data(), meta.data())) << name;
      EXPECT_TRUE(simd::DequantizeStored(f, codes.data(), meta.data(), T, D, y.data())) << name;
      EXPECT_TRUE(simd::Dot(f, codes.data(), meta.data(), T, D, x.data(), s.data())) << name;
      EXPECT_TRUE(simd::Axpy(f, codes.data(), meta.data(), T, D, x.data(), acc.data())) << name;
    }
  });
}

TEST(QuantSimd, HadamardRowsBitIdenticalToTheReference) {
  ForEachTargetOrSkip([&](int64_t) {
    for (int D : {8, 16, 64, 128, 256}) {
      std::vector<float> x = Gaussian(7, D, 31), y = x;
      ASSERT_TRUE(simd::HadamardRows(x.data(), 7, D)) << D;
      for (int t = 0; t < 7; ++t) HadamardRotate(y.data() + t * D, D);
      EXPECT_EQ(x, y) << "D=" << D;
    }
    std::vector<float> z(3 * 4);
    EXPECT_FALSE(simd::HadamardRows(z.data(), 3, 2));  // D below the lane count: caller's fallback
  });
}

// Every fp8 byte (also the NaN/inf codes we never emit) decodes like the
// reference table on every target.
TEST(QuantSimd, EveryFp8CodeDecodesLikeTheReference) {
  ForEachTargetOrSkip([&](int64_t) {
    std::vector<uint8_t> codes(256), meta(2);
    for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
    StoreF16(F32ToF16(0.75f), meta.data());
    for (const Format& f : {Fp8E4M3(), Fp8E5M2()}) {
      std::vector<float> a(256), b(256);
      ref::DequantizeChunk(f, codes.data(), meta.data(), 2, 128, a.data());
      DequantizeChunk(f, codes.data(), meta.data(), 2, 128, b.data());
      EXPECT_EQ(a, b) << FormatName(f);
      for (float v : b) EXPECT_TRUE(std::isfinite(v));
    }
  });
}

// DotChunk/AxpyChunk equal "dequantize, then dot" through the public API, and
// with Hadamard they work in the rotated domain as format.h says.
TEST(QuantSimd, DotAndAxpyMatchDequantizeThenDot) {
  const int T = 32, D = 128;
  for (const char* name : {"u4:chan", "u2:chan", "n1:chan", "u4:tok", "n2:tok", "int8", "f16",
                           "fp8e4m3", "u4:chan:had", "u2:tok:had"}) {
    const Format f = *ParseFormat(name);
    const std::vector<float> x = Gaussian(T, D, 21);
    const testing::Encoded e = Encode(f, x, T, D, false);
    const std::vector<float> y = Decode(f, e, T, D, false);  // rotation undone
    std::vector<float> q = Gaussian(1, D, 22), w = Gaussian(1, T, 23);
    std::vector<float> scores(T), acc(D, 0.0f);
    std::vector<float> qr = q;
    if (f.hadamard) HadamardRotate(qr.data(), D);
    DotChunk(f, e.codes.data(), e.meta.data(), T, D, qr.data(), scores.data());
    AxpyChunk(f, e.codes.data(), e.meta.data(), T, D, w.data(), acc.data());
    if (f.hadamard) HadamardRotate(acc.data(), D);
    for (int t = 0; t < T; ++t) {
      double want = 0;
      for (int d = 0; d < D; ++d) want += static_cast<double>(q[d]) * y[t * D + d];
      EXPECT_NEAR(scores[t], want, 1e-3) << name << " t=" << t;
    }
    for (int d = 0; d < D; ++d) {
      double want = 0;
      for (int t = 0; t < T; ++t) want += static_cast<double>(w[t]) * y[t * D + d];
      EXPECT_NEAR(acc[d], want, 1e-3) << name << " d=" << d;
    }
  }
}

}  // namespace
}  // namespace hqekv::quant
