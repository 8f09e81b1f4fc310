// Int16-weight value accumulation (attn/multi_query.h,
// AxpyChunkMultiInt16Weights) against its scalar oracle
// (ref::AxpyChunkMultiInt16Weights: the same integer math) on every x86
// target this CPU runs, AVX-512 VNNI included; and the oracle against the
// fp32-weight reference (ref::AxpyChunkMulti) within the rounding of the
// int16 weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "quant/internal.h"
#include "attn/multi_query.h"
#include "../quant/quant_test_util.h"

namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace {

using testing::Encode;
using testing::Encoded;
using testing::Gaussian;
using testing::kKernelMustRun;

std::vector<Format> Int16WeightFormats(int group) {
  std::vector<Format> fs;
  for (int b : {1, 2, 4, 8}) fs.push_back(Uniform(b, Grouping::kPerToken, group));
  fs.push_back(Normal(1, Grouping::kPerToken, group));
  Format had = Uniform(2, Grouping::kPerToken, group);
  had.hadamard = true;
  fs.push_back(had);
  return fs;
}

// Per-group multiplier a and offset b, [T·gpt] (normal-1 folded as the
// kernels fold it).
void AffineOf(const Format& f, const std::vector<uint8_t>& meta, size_t groups,
              std::vector<float>* a, std::vector<float>* b) {
  a->resize(groups);
  b->resize(groups);
  for (size_t i = 0; i < groups; ++i) {
    (*a)[i] = F16ToF32(LoadF16(meta.data() + 2 * i));
    (*b)[i] = F16ToF32(LoadF16(meta.data() + 2 * (groups + i)));
    if (f.kind == Kind::kNormal) {
      (*b)[i] = std::fma(-kNormalCentres1[1], (*a)[i], (*b)[i]);
      (*a)[i] = 2.0f * kNormalCentres1[1] * (*a)[i];
    }
  }
}

// Softmax-like weights in [0, 1] with a few exact zeros (masked slots).
std::vector<float> Weights(int rows, int cols, uint32_t seed) {
  std::vector<float> w = Gaussian(rows, cols, seed);
  for (size_t i = 0; i < w.size(); ++i) w[i] = i % 7 == 3 ? 0.0f : std::exp(-std::abs(w[i]));
  return w;
}

TEST(MultiQueryInt16Weights, MatchesOracleOnEveryTarget) {
  int simd_ran = 0, cases = 0;
  const int targets = test::OnEachTarget(
      [&](int64_t target) {
        for (int T : {16, 32, 64}) {
          for (int D : {32, 64, 96, 128}) {
            for (int group : {16, 32, 64}) {
              if (D % group != 0) continue;
              for (const Format& f : Int16WeightFormats(group)) {
                SCOPED_TRACE(FormatName(f) + " T=" + std::to_string(T) + " D=" + std::to_string(D) +
                             " group=" + std::to_string(group));
                const uint32_t seed = static_cast<uint32_t>(7 * D + f.bits + T + group);
                const Encoded e = Encode(f, Gaussian(T, D, seed), T, D, /*reference=*/false);
                const size_t groups = static_cast<size_t>(T) * (D / group);
                std::vector<float> a, b;
                AffineOf(f, e.meta, groups, &a, &b);
                for (int m : {1, 2, 3, 4, 5, 8}) {
                  SCOPED_TRACE("m=" + std::to_string(m));
                  const size_t ws = T + 3, as = D + 5;
                  const std::vector<float> w = Weights(m, static_cast<int>(ws), seed + m);
                  const std::vector<float> acc0 = Gaussian(m, static_cast<int>(as), seed + 99);
                  std::vector<float> want = acc0, got = acc0;
                  ASSERT_TRUE(ref::AxpyChunkMultiInt16Weights(f, e.codes.data(), e.meta.data(), T,
                                                              D, w.data(), ws, m, want.data(), as));
                  ++cases;
                  if (!AxpyChunkMultiInt16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(),
                                                  ws, m, got.data(), as)) {
                    // Declined: nothing written. Only AVX3_DL has the kernel.
                    EXPECT_TRUE(!kKernelMustRun || target != HWY_AVX3_DL);
                    ASSERT_EQ(got, acc0);
                    continue;
                  }
                  ++simd_ran;
                  const int gpt = D / group;
                  const int code_max = f.bits == 8 ? 255 : (1 << f.bits) - 1;
                  for (int h = 0; h < m; ++h) {
                    for (size_t d = 0; d < as; ++d) {
                      const float wv = want[h * as + d], gv = got[h * as + d];
                      if (d >= static_cast<size_t>(D)) {
                        ASSERT_EQ(gv, acc0[h * as + d]) << "wrote past the row, h=" << h;
                        continue;
                      }
                      // Only the fp32 sum of w·b runs in another order.
                      const int g = static_cast<int>(d) / group;
                      double wb = 0.0, wa = 0.0;
                      for (int t = 0; t < T; ++t) {
                        wb += std::abs(w[h * ws + t] * b[static_cast<size_t>(t) * gpt + g]);
                        wa += std::abs(w[h * ws + t] * a[static_cast<size_t>(t) * gpt + g]);
                      }
                      const double tol = 1e-6 * (wb + wa * code_max + std::abs(acc0[h * as + d]));
                      ASSERT_NEAR(gv, wv, tol) << "h=" << h << " d=" << d;
                    }
                  }
                }
              }
            }
          }
        }
      },
      test::kSimdTestTargetsWithVnni);
  if (targets == 0) GTEST_SKIP() << "no x86 SIMD target";
  if (kKernelMustRun && (hwy::SupportedTargets() & HWY_AVX3_DL)) {
    EXPECT_GT(simd_ran, 0) << "the VNNI kernel never ran on an AVX3_DL CPU";
  }
  EXPECT_GT(cases, 0);
}

// With the offset plane zero (uniform formats) each output gains exactly
// float(sum_t ui[t]·code[t][d]) · su, so the kernel's integer sums must give
// the oracle's bits; also the largest sums (every code at its maximum, every
// ui 32767, T = 256).
TEST(MultiQueryInt16Weights, IntegerSumIsExactOnEveryTarget) {
  int simd_ran = 0;
  const int targets = test::OnEachTarget(
      [&](int64_t target) {
        for (int T : {16, 32, 64, 256}) {
          for (int D : {32, 64, 96, 128, 256}) {
            for (int group : {16, 32}) {
              for (int bits : {1, 2, 4, 8}) {
                const Format f = Uniform(bits, Grouping::kPerToken, group);
                SCOPED_TRACE(FormatName(f) + " T=" + std::to_string(T) + " D=" + std::to_string(D) +
                             " group=" + std::to_string(group));
                const uint32_t seed = static_cast<uint32_t>(5 * D + bits + T + group);
                Encoded e = Encode(f, Gaussian(T, D, seed), T, D, /*reference=*/false);
                const bool extreme = T == 256;
                const size_t groups = static_cast<size_t>(T) * (D / group);
                if (extreme) std::fill(e.codes.begin(), e.codes.end() - 1, uint8_t{0xFF});
                for (size_t i = 0; i < groups; ++i) {  // b = 0 (a = 1 for the extreme case)
                  if (extreme) StoreF16(F32ToF16(1.0f), e.meta.data() + 2 * i);
                  StoreF16(F32ToF16(0.0f), e.meta.data() + 2 * (groups + i));
                }
                for (int m : {1, 3, 4, 5, 8}) {
                  SCOPED_TRACE("m=" + std::to_string(m));
                  const size_t as = D + 3;
                  std::vector<float> w = Weights(m, T, seed + m);
                  if (extreme) std::fill(w.begin(), w.end(), 1.0f);
                  const std::vector<float> acc0 = Gaussian(m, static_cast<int>(as), seed + 7);
                  std::vector<float> want = acc0, got = acc0;
                  ASSERT_TRUE(ref::AxpyChunkMultiInt16Weights(f, e.codes.data(), e.meta.data(), T,
                                                              D, w.data(), T, m, want.data(), as));
                  if (!AxpyChunkMultiInt16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(),
                                                  T, m, got.data(), as)) {
                    EXPECT_TRUE(!kKernelMustRun || target != HWY_AVX3_DL);
                    continue;
                  }
                  ++simd_ran;
                  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "i=" << i;
                  if (extreme) {
                    const float sum = static_cast<float>(32767.0 * ((1 << bits) - 1) * T);
                    ASSERT_EQ(want[0], acc0[0] + sum * (1.0f / 32767.0f));
                  }
                }
              }
            }
          }
        }
      },
      test::kSimdTestTargetsWithVnni);
  if (targets == 0) GTEST_SKIP() << "no x86 SIMD target";
  if (kKernelMustRun && (hwy::SupportedTargets() & HWY_AVX3_DL)) {
    EXPECT_GT(simd_ran, 0) << "the VNNI kernel never ran on an AVX3_DL CPU";
  }
}

// The oracle's integer math against the fp32-weight reference: each output
// moves by at most su/2 · sum_t code[t][d] per row and group (su = max_t
// |w·a| / 32767), plus fp32 rounding of the reference's sum.
TEST(MultiQueryInt16Weights, OracleIsWithinTheWeightRoundingOfTheFp32Reference) {
  constexpr int T = 32;
  for (int D : {32, 128}) {
    for (const Format& f : Int16WeightFormats(32)) {
      SCOPED_TRACE(FormatName(f) + " D=" + std::to_string(D));
      const Encoded e = Encode(f, Gaussian(T, D, 11u + D), T, D, /*reference=*/true);
      const int gpt = D / 32;
      std::vector<float> a, b;
      AffineOf(f, e.meta, static_cast<size_t>(T) * gpt, &a, &b);
      std::vector<float> xhat(static_cast<size_t>(T) * D);
      quant::ref::DequantizeStored(f, e.codes.data(), e.meta.data(), T, D, xhat.data());
      const int m = 4;
      const std::vector<float> w = Weights(m, T, 5u + D);
      std::vector<float> fp(m * D, 0.0f), i16(m * D, 0.0f);
      ref::AxpyChunkMulti(f, e.codes.data(), e.meta.data(), T, D, w.data(), T, m, fp.data(), D);
      ASSERT_TRUE(ref::AxpyChunkMultiInt16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(),
                                                  T, m, i16.data(), D));
      const int code_max = f.bits == 8 ? 255 : (1 << f.bits) - 1;
      double worst = 0.0;
      for (int h = 0; h < m; ++h) {
        for (int d = 0; d < D; ++d) {
          const int g = d / 32;
          float umax = 0.0f;
          double wx = 0.0;
          for (int t = 0; t < T; ++t) {
            umax = std::max(umax, std::abs(w[h * T + t] * a[static_cast<size_t>(t) * gpt + g]));
            wx += std::abs(w[h * T + t] * xhat[static_cast<size_t>(t) * D + d]);
          }
          const double bound = umax / 32767.0 / 2.0 * code_max * T + 1e-5 * wx + 1e-6;
          const double err = std::abs(fp[h * D + d] - i16[h * D + d]);
          ASSERT_LE(err, bound) << "h=" << h << " d=" << d;
          worst = std::max(worst, err / bound);
        }
      }
      EXPECT_GT(worst, 0.0) << "int16 weights changed nothing: the test would not see a bug";
    }
  }
}

TEST(MultiQueryInt16Weights, DeclinesOtherFormatsShapesAndNonFiniteWeights) {
  EXPECT_FALSE(Int16WeightsApply(Uniform(2, Grouping::kPerChannel), 32, 128));
  EXPECT_FALSE(Int16WeightsApply(Normal(2, Grouping::kPerToken, 32), 32, 128));
  EXPECT_FALSE(Int16WeightsApply(Uniform3(Grouping::kPerToken, 32), 32, 128));
  EXPECT_FALSE(Int16WeightsApply(Int8PerToken(), 32, 128));
  EXPECT_FALSE(Int16WeightsApply(Uniform(2, Grouping::kPerToken, 8), 32, 128));
  EXPECT_FALSE(Int16WeightsApply(Uniform(2, Grouping::kPerToken, 32), 24, 128));
  EXPECT_FALSE(Int16WeightsApply(Uniform(2, Grouping::kPerToken, 32), 512, 128));
  EXPECT_TRUE(Int16WeightsApply(Uniform(2, Grouping::kPerToken, 32), 32, 128));
  EXPECT_TRUE(Int16WeightsApply(Normal(1, Grouping::kPerToken, 32), 32, 128));
  EXPECT_TRUE(Int16WeightsApply(Uniform(8, Grouping::kPerToken, 128), 256, 128));
  const Format f = Uniform(2, Grouping::kPerToken, 32);
  const int T = 32, D = 64;
  const Encoded e = Encode(f, Gaussian(T, D, 3u), T, D, /*reference=*/false);
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    std::vector<float> w = Weights(1, T, 4u);
    w[17] = bad;
    std::vector<float> acc(D, -7.0f);
    test::OnEachTarget(
        [&] {
          EXPECT_FALSE(AxpyChunkMultiInt16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(),
                                                  T, 1, acc.data(), D));
        },
        test::kSimdTestTargetsWithVnni);
    EXPECT_FALSE(ref::AxpyChunkMultiInt16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(),
                                                 T, 1, acc.data(), D));
    for (float v : acc) EXPECT_EQ(v, -7.0f);
  }
  // Zero weights: every accumulator gets exactly +0.
  std::vector<float> zero(T, 0.0f), acc(D, 1.5f);
  ASSERT_TRUE(ref::AxpyChunkMultiInt16Weights(f, e.codes.data(), e.meta.data(), T, D, zero.data(),
                                              T, 1, acc.data(), D));
  for (float v : acc) EXPECT_EQ(v, 1.5f);
}

}  // namespace
}  // namespace hqekv::attn
