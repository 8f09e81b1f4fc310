// Int16-query scores (attn/multi_query.h, DotChunkMultiInt16Query) against
// their scalar oracle (ref::DotChunkMultiInt16Query: the same integer math) on
// every x86 target this CPU runs, AVX-512 VNNI included; and the oracle
// against the fp32-query reference (ref::DotChunkMulti) within the rounding
// of the int16 query.
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

constexpr int kT = 32;

std::vector<Format> Int16QueryFormats() {
  std::vector<Format> fs;
  for (int b : {1, 2, 4}) fs.push_back(Uniform(b, Grouping::kPerChannel));
  fs.push_back(Uniform3(Grouping::kPerChannel));
  fs.push_back(Normal(1, Grouping::kPerChannel));
  Format had = Uniform(2, Grouping::kPerChannel);
  had.hadamard = true;
  fs.push_back(had);
  return fs;
}

int CodeMax(const Format& f) { return f.kind == Kind::kUniform3 ? 7 : (1 << f.bits) - 1; }

// Per-channel multiplier a and offset b of a chunk's metadata (normal-1
// folded as the kernels fold it).
void AffineOf(const Format& f, const std::vector<uint8_t>& meta, int D, std::vector<float>* a,
              std::vector<float>* b) {
  a->resize(D);
  b->resize(D);
  for (int d = 0; d < D; ++d) {
    (*a)[d] = F16ToF32(LoadF16(meta.data() + 2 * d));
    (*b)[d] = F16ToF32(LoadF16(meta.data() + 2 * (D + d)));
    if (f.kind == Kind::kNormal) {
      (*b)[d] = std::fma(-kNormalCentres1[1], (*a)[d], (*b)[d]);
      (*a)[d] = 2.0f * kNormalCentres1[1] * (*a)[d];
    }
  }
}

TEST(MultiQueryInt16Query, MatchesOracleOnEveryTarget) {
  int simd_ran = 0, cases = 0;
  const int targets = test::OnEachTarget(
      [&](int64_t target) {
        for (int D : {8, 16, 64, 96, 128}) {
          for (const Format& f : Int16QueryFormats()) {
            SCOPED_TRACE(FormatName(f) + " D=" + std::to_string(D));
            const uint32_t seed = static_cast<uint32_t>(7 * D + f.bits);
            const Encoded e = Encode(f, Gaussian(kT, D, seed), kT, D, /*reference=*/false);
            std::vector<float> a, b;
            AffineOf(f, e.meta, D, &a, &b);
            for (int m : {1, 2, 3, 4, 5, 8}) {
              SCOPED_TRACE("m=" + std::to_string(m));
              const size_t qs = D + 3, ss = kT + 5;
              const std::vector<float> q = Gaussian(m, static_cast<int>(qs), seed + m, 0.3f);
              std::vector<float> want(m * ss, -7.0f), got(m * ss, -7.0f);
              ASSERT_TRUE(ref::DotChunkMultiInt16Query(f, e.codes.data(), e.meta.data(), kT, D,
                                                       q.data(), qs, m, want.data(), ss));
              ++cases;
              if (!DotChunkMultiInt16Query(f, e.codes.data(), e.meta.data(), kT, D, q.data(), qs, m,
                                           got.data(), ss)) {
                // Declined: nothing written. Only AVX3_DL has the kernel.
                EXPECT_TRUE(!kKernelMustRun || target != HWY_AVX3_DL || D % 16 != 0);
                for (float v : got) ASSERT_EQ(v, -7.0f);
                continue;
              }
              ++simd_ran;
              for (int h = 0; h < m; ++h) {
                double qb = 0.0, qa = 0.0;
                for (int d = 0; d < D; ++d) {
                  qb += std::abs(q[h * qs + d] * b[d]);
                  qa += std::abs(q[h * qs + d] * a[d]);
                }
                // Only the fp32 sum of q·b runs in another order.
                const double tol = 1e-6 * (qb + qa * CodeMax(f)) + 1e-30;
                for (size_t t = 0; t < ss; ++t) {
                  const float w = want[h * ss + t], g = got[h * ss + t];
                  if (t >= static_cast<size_t>(kT)) {
                    ASSERT_EQ(g, -7.0f) << "wrote past the row, h=" << h;
                  } else {
                    ASSERT_NEAR(g, w, tol) << "h=" << h << " t=" << t;
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

// With the offset plane zero (uniform formats) every score is
// float(sum_d qi[d]·code[d][t]) · sq exactly, so the kernel's integer dot
// (bytes of the int16 query: 256·high + low, on AVX3_DL) must give the
// oracle's bits; also the largest sum (every code at its maximum, every qi
// 32767, D = 4096: 32767 · 15 · 4096 < 2^31) and queries whose qi take the
// byte-split edge values (-1, -256, -32767, 255, 256).
TEST(MultiQueryInt16Query, IntegerDotIsExactOnEveryTarget) {
  int simd_ran = 0;
  const int targets = test::OnEachTarget(
      [&](int64_t target) {
        for (int D : {16, 32, 48, 128, 4096}) {
          for (const Format& f : Int16QueryFormats()) {
            if (f.kind == Kind::kNormal) continue;  // its fold gives a nonzero offset
            SCOPED_TRACE(FormatName(f) + " D=" + std::to_string(D));
            const uint32_t seed = static_cast<uint32_t>(3 * D + f.bits);
            Encoded e = Encode(f, Gaussian(kT, D, seed), kT, D, /*reference=*/false);
            const bool extreme = D == 4096;
            if (extreme) std::fill(e.codes.begin(), e.codes.end() - 1, uint8_t{0xFF});
            for (int d = 0; d < D; ++d) {  // b = 0 (and a = 1 for the extreme case)
              if (extreme) StoreF16(F32ToF16(1.0f), e.meta.data() + 2 * d);
              StoreF16(F32ToF16(0.0f), e.meta.data() + 2 * (D + d));
            }
            for (int m : {1, 3, 4, 5, 8}) {
              SCOPED_TRACE("m=" + std::to_string(m));
              const size_t ss = kT + 3;
              std::vector<float> q = Gaussian(m, D, seed + m, 0.3f);
              std::vector<float> a;
              if (extreme) {
                std::fill(q.begin(), q.end(), 1.0f);
              } else {
                // Row 0: qi = 32767 · q / max|q| hits -1, -256, 255, 256 and
                // -32767 (the scale is per channel, so divide by a).
                std::vector<float> b;
                AffineOf(f, e.meta, D, &a, &b);
                const float edge[] = {-32767.0f, -1.0f, -256.0f, 255.0f, 256.0f, -255.0f, 1.0f};
                for (int d = 0; d < D; ++d) {
                  if (a[d] != 0.0f) q[d] = edge[d % 7] / 32767.0f / a[d];
                }
              }
              std::vector<float> want(m * ss, -7.0f), got(m * ss, -7.0f);
              ASSERT_TRUE(ref::DotChunkMultiInt16Query(f, e.codes.data(), e.meta.data(), kT, D,
                                                       q.data(), D, m, want.data(), ss));
              if (!DotChunkMultiInt16Query(f, e.codes.data(), e.meta.data(), kT, D, q.data(), D, m,
                                           got.data(), ss)) {
                EXPECT_TRUE(!kKernelMustRun || target != HWY_AVX3_DL);
                continue;
              }
              ++simd_ran;
              for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "i=" << i;
              if (extreme) {
                const int cmax = CodeMax(f);
                ASSERT_EQ(want[0], static_cast<float>(32767.0 * cmax * D) * (1.0f / 32767.0f));
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

// The oracle's integer math against the fp32-query reference: each score
// moves by at most sq/2 · sum_d code[d][t] (sq = max|q·a| / 32767), plus fp32
// rounding of the reference's sum.
TEST(MultiQueryInt16Query, OracleIsWithinTheQueryRoundingOfTheFp32Reference) {
  for (int D : {16, 128}) {
    for (const Format& f : Int16QueryFormats()) {
      SCOPED_TRACE(FormatName(f) + " D=" + std::to_string(D));
      const Encoded e = Encode(f, Gaussian(kT, D, 11u + D), kT, D, /*reference=*/true);
      std::vector<float> a, b;
      AffineOf(f, e.meta, D, &a, &b);
      std::vector<float> xhat(static_cast<size_t>(kT) * D);
      quant::ref::DequantizeStored(f, e.codes.data(), e.meta.data(), kT, D, xhat.data());
      const int m = 4;
      const std::vector<float> q = Gaussian(m, D, 5u + D, 0.3f);
      std::vector<float> fp(m * kT), i8(m * kT);
      ref::DotChunkMulti(f, e.codes.data(), e.meta.data(), kT, D, q.data(), D, m, fp.data(), kT);
      ASSERT_TRUE(ref::DotChunkMultiInt16Query(f, e.codes.data(), e.meta.data(), kT, D, q.data(), D,
                                               m, i8.data(), kT));
      double worst = 0.0;
      for (int h = 0; h < m; ++h) {
        float amax = 0.0f;
        double qx = 0.0;
        for (int d = 0; d < D; ++d) amax = std::max(amax, std::abs(q[h * D + d] * a[d]));
        for (int t = 0; t < kT; ++t) {
          qx = 0.0;
          for (int d = 0; d < D; ++d) qx += std::abs(q[h * D + d] * xhat[t * D + d]);
          const double bound = amax / 32767.0 / 2.0 * CodeMax(f) * D + 1e-5 * qx + 1e-6;
          const double err = std::abs(fp[h * kT + t] - i8[h * kT + t]);
          ASSERT_LE(err, bound) << "h=" << h << " t=" << t;
          worst = std::max(worst, err / bound);
        }
      }
      EXPECT_GT(worst, 0.0) << "int16 query changed nothing: the test would not see a bug";
    }
  }
}

TEST(MultiQueryInt16Query, DeclinesOtherFormatsShapesAndNonFiniteQueries) {
  EXPECT_FALSE(Int16QueryApplies(Uniform(2, Grouping::kPerToken, 32), kT, 128));
  EXPECT_FALSE(Int16QueryApplies(Uniform(8, Grouping::kPerChannel), kT, 128));
  EXPECT_FALSE(Int16QueryApplies(Normal(2, Grouping::kPerChannel), kT, 128));
  EXPECT_FALSE(Int16QueryApplies(Int8PerToken(), kT, 128));
  EXPECT_FALSE(Int16QueryApplies(Uniform(2, Grouping::kPerChannel), 16, 128));
  EXPECT_TRUE(Int16QueryApplies(Uniform(2, Grouping::kPerChannel), kT, 128));
  EXPECT_TRUE(Int16QueryApplies(Uniform3(Grouping::kPerChannel), kT, 128));
  const Format f = Uniform(2, Grouping::kPerChannel);
  const int D = 64;
  const Encoded e = Encode(f, Gaussian(kT, D, 3u), kT, D, /*reference=*/false);
  for (float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    std::vector<float> q = Gaussian(1, D, 4u);
    q[17] = bad;
    std::vector<float> s(kT, -7.0f);
    test::OnEachTarget(
        [&] {
          EXPECT_FALSE(DotChunkMultiInt16Query(f, e.codes.data(), e.meta.data(), kT, D, q.data(), D,
                                               1, s.data(), kT));
        },
        test::kSimdTestTargetsWithVnni);
    EXPECT_FALSE(ref::DotChunkMultiInt16Query(f, e.codes.data(), e.meta.data(), kT, D, q.data(), D,
                                              1, s.data(), kT));
    for (float v : s) EXPECT_EQ(v, -7.0f);
  }
  // A zero query: every score is the offset, exactly 0.
  std::vector<float> zero(D, 0.0f), s(kT, -7.0f);
  ASSERT_TRUE(ref::DotChunkMultiInt16Query(f, e.codes.data(), e.meta.data(), kT, D, zero.data(), D,
                                           1, s.data(), kT));
  for (float v : s) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace hqekv::attn
