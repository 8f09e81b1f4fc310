// Int16-query scores over int8 chunks (attn/multi_query_rows_q16.h,
// DotRowsInt16Query, and DotRowsInt16Prepared with rows prepared once) against their scalar oracle
// (ref::DotRowsInt16Query: the same integer math, bit-identical) on every x86 target this CPU runs,
// AVX-512 VNNI included; the oracle against the fp32-query reference
// (ref::DotChunkMulti) within the rounding of the int16 query; and the
// cases that decline (writing nothing).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "quant/internal.h"
#include "attn/multi_query.h"
#include "attn/multi_query_rows_q16.h"
#include "../quant/quant_test_util.h"

namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace {

using testing::Encode;
using testing::Encoded;
using testing::Gaussian;
using testing::kKernelMustRun;

// An int8 chunk: Gaussian values, or (extreme) random bytes with every code
// value, -128 and 127 included, and random finite fp16 scales.
Encoded Int8Chunk(int T, int D, uint32_t seed, bool extreme) {
  const Format f = Int8PerToken();
  Encoded e = Encode(f, Gaussian(T, D, seed), T, D, /*reference=*/false);
  if (extreme) {
    std::mt19937 rng(seed);
    for (size_t i = 0; i < e.codes.size(); ++i) {
      e.codes[i] = static_cast<uint8_t>(i < 256 ? i : rng() & 255);
    }
    std::uniform_real_distribution<float> u(1e-3f, 4.0f);
    for (int t = 0; t < T; ++t) {
      const uint16_t h = F32ToF16(u(rng));
      std::memcpy(e.meta.data() + 2 * t, &h, 2);
    }
  }
  return e;
}

TEST(MultiQueryRowsInt16Query, MatchesOracleOnEveryTarget) {
  const Format f = Int8PerToken();
  int simd_ran = 0, cases = 0;
  const int targets = test::OnEachTarget(
      [&](int64_t target) {
        for (int D : {32, 64, 128, 512}) {
          for (int T : {1, 3, 4, 7, 32, 64}) {
            for (bool extreme : {false, true}) {
              SCOPED_TRACE("D=" + std::to_string(D) + " T=" + std::to_string(T) +
                           (extreme ? " extreme" : ""));
              const uint32_t seed = static_cast<uint32_t>(13 * D + T);
              const Encoded e = Int8Chunk(T, D, seed, extreme);
              for (int m : {1, 2, 3, 4, 5, 8}) {
                SCOPED_TRACE("m=" + std::to_string(m));
                const size_t qs = D + 3, ss = T + 5;
                std::vector<float> q = Gaussian(m, static_cast<int>(qs), seed + m, 0.3f);
                if (extreme) q[0] = 1e30f;  // one huge entry: the others round to 0
                std::vector<float> want(m * ss, -7.0f), got(m * ss, -7.0f);
                ASSERT_TRUE(ref::DotRowsInt16Query(f, e.codes.data(), e.meta.data(), T, D, q.data(),
                                                   qs, m, want.data(), ss));
                ++cases;
                if (!DotRowsInt16Query(f, e.codes.data(), e.meta.data(), T, D, q.data(), qs, m,
                                       got.data(), ss)) {
                  // Declined: nothing written. Only AVX3_DL has the kernel.
                  EXPECT_TRUE(!kKernelMustRun || target != HWY_AVX3_DL);
                  for (float v : got) ASSERT_EQ(v, -7.0f);
                  continue;
                }
                ++simd_ran;
                // Rows prepared once (as a decode step does per KV head), used
                // for two chunk calls: the same bits as the one-call entry.
                Int16Query prepared;
                ASSERT_TRUE(PrepareInt16Query(q.data(), qs, m, D, &prepared));
                std::vector<float> got_prepared(m * ss, -7.0f);
                for (int call = 0; call < 2; ++call) {
                  ASSERT_TRUE(DotRowsInt16Prepared(f, e.codes.data(), e.meta.data(), T, prepared,
                                                   got_prepared.data(), ss));
                }
                for (int h = 0; h < m; ++h) {
                  for (size_t t = 0; t < ss; ++t) {
                    // Bit-identical (the same integer sums and fp32 products);
                    // -7 past the row.
                    ASSERT_EQ(got[h * ss + t], want[h * ss + t]) << "h=" << h << " t=" << t;
                    ASSERT_EQ(got_prepared[h * ss + t], want[h * ss + t])
                        << "prepared h=" << h << " t=" << t;
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

// The oracle against the fp32-query reference: each score moves by at most
// s[t] · sq/2 · sum_d |c[t][d]| (sq = max|q| / 32767), plus fp32 rounding of
// the reference's sum.
TEST(MultiQueryRowsInt16Query, OracleIsWithinTheQueryRoundingOfTheFp32Reference) {
  const Format f = Int8PerToken();
  for (int D : {32, 128, 512}) {
    for (bool extreme : {false, true}) {
      SCOPED_TRACE("D=" + std::to_string(D) + (extreme ? " extreme" : ""));
      const int T = 32, m = 4;
      const Encoded e = Int8Chunk(T, D, 5u + D, extreme);
      const std::vector<float> q = Gaussian(m, D, 77u + D, 0.3f);
      std::vector<float> got(m * T), fp32(m * T);
      ASSERT_TRUE(ref::DotRowsInt16Query(f, e.codes.data(), e.meta.data(), T, D, q.data(), D, m,
                                         got.data(), T));
      ref::DotChunkMulti(f, e.codes.data(), e.meta.data(), T, D, q.data(), D, m, fp32.data(), T);
      const int8_t* c = reinterpret_cast<const int8_t*>(e.codes.data());
      for (int h = 0; h < m; ++h) {
        float amax = 0.0f;
        for (int d = 0; d < D; ++d) amax = std::max(amax, std::abs(q[h * D + d]));
        const double sq = amax / 32767.0;
        for (int t = 0; t < T; ++t) {
          const double s = F16ToF32(LoadF16(e.meta.data() + 2 * t));
          double csum = 0.0, mag = 0.0;
          for (int d = 0; d < D; ++d) {
            csum += std::abs(c[t * D + d]);
            mag += std::abs(q[h * D + d] * c[t * D + d]);
          }
          const double tol = s * (sq / 2 * csum + 1e-5 * mag) + 1e-30;
          ASSERT_NEAR(got[h * T + t], fp32[h * T + t], tol) << "h=" << h << " t=" << t;
        }
      }
    }
  }
}

// Formats, shapes and queries without the kernel: false, nothing written.
TEST(MultiQueryRowsInt16Query, DeclinesAndWritesNothing) {
  const int T = 32, D = 128, m = 8;
  const Encoded e = Int8Chunk(T, D, 3u, false);
  const std::vector<float> q = Gaussian(m, D, 9u, 0.3f);
  auto untouched = [](const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return x == -7.0f; });
  };
  std::vector<float> s(m * T, -7.0f);
  for (const Format& f : {Fp8E4M3(), Fp8E5M2(), F16(), Uniform(8, Grouping::kPerToken)}) {
    EXPECT_FALSE(Int16QueryRowsApply(f, T, D)) << FormatName(f);
    EXPECT_FALSE(
        DotRowsInt16Query(f, e.codes.data(), e.meta.data(), T, D, q.data(), D, m, s.data(), T));
    EXPECT_FALSE(ref::DotRowsInt16Query(f, e.codes.data(), e.meta.data(), T, D, q.data(), D, m,
                                        s.data(), T));
  }
  const Format f = Int8PerToken();
  EXPECT_TRUE(Int16QueryRowsApply(f, T, D));
  for (int bad_d : {16, 48, 1024}) EXPECT_FALSE(Int16QueryRowsApply(f, T, bad_d)) << bad_d;
  EXPECT_FALSE(Int16QueryRowsApply(f, 65, D));
  EXPECT_FALSE(
      DotRowsInt16Query(f, e.codes.data(), e.meta.data(), T, D, q.data(), D, 0, s.data(), T));
  // Prepared rows: an unprepared query, rows for the wrong format or T, a D
  // that does not apply, m = 0.
  const Int16Query unprepared;
  EXPECT_FALSE(DotRowsInt16Prepared(f, e.codes.data(), e.meta.data(), T, unprepared, s.data(), T));
  test::OnEachTarget(
      [&]() {
        Int16Query p;
        EXPECT_FALSE(PrepareInt16Query(q.data(), D, 0, D, &p));
        EXPECT_FALSE(PrepareInt16Query(q.data(), D, m, 48, &p));
        EXPECT_FALSE(PrepareInt16Query(q.data(), D, m, 1024, &p));
        if (!PrepareInt16Query(q.data(), D, m, D, &p)) {
          EXPECT_EQ(p.m, 0);  // no kernel on this target
          EXPECT_FALSE(DotRowsInt16Prepared(f, e.codes.data(), e.meta.data(), T, p, s.data(), T));
          return;
        }
        EXPECT_FALSE(
            DotRowsInt16Prepared(Fp8E4M3(), e.codes.data(), e.meta.data(), T, p, s.data(), T));
        EXPECT_FALSE(DotRowsInt16Prepared(f, e.codes.data(), e.meta.data(), 65, p, s.data(), T));
      },
      test::kSimdTestTargetsWithVnni);
  // A non-finite entry in the last row (a later block than the first rows'):
  // nothing written, by the kernel or the oracle; in the first block too.
  for (size_t at : {static_cast<size_t>(7 * D + 5), static_cast<size_t>(D + 1)}) {
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      std::vector<float> qb = q;
      qb[at] = bad;
      test::OnEachTarget(
          [&]() {
            EXPECT_FALSE(DotRowsInt16Query(f, e.codes.data(), e.meta.data(), T, D, qb.data(), D, m,
                                           s.data(), T));
            Int16Query p;
            EXPECT_FALSE(PrepareInt16Query(qb.data(), D, m, D, &p));
            EXPECT_EQ(p.m, 0);
          },
          test::kSimdTestTargetsWithVnni);
      EXPECT_FALSE(ref::DotRowsInt16Query(f, e.codes.data(), e.meta.data(), T, D, qb.data(), D, m,
                                          s.data(), T));
    }
  }
  EXPECT_TRUE(untouched(s));
}

// Int16-weight value accumulation over int8 chunks (AxpyRowsInt16Weights)
// against its oracle, bit-identical, on every target; rows past m and
// channels past D untouched.
TEST(MultiQueryRowsInt16Weights, MatchesOracleOnEveryTarget) {
  const Format f = Int8PerToken();
  int simd_ran = 0, cases = 0;
  const int targets = test::OnEachTarget(
      [&](int64_t target) {
        for (int D : {64, 128, 512}) {
          for (int T : {2, 6, 32, 64}) {
            for (bool extreme : {false, true}) {
              SCOPED_TRACE("D=" + std::to_string(D) + " T=" + std::to_string(T) +
                           (extreme ? " extreme" : ""));
              const uint32_t seed = static_cast<uint32_t>(17 * D + T);
              const Encoded e = Int8Chunk(T, D, seed, extreme);
              for (int m : {1, 2, 3, 4, 5, 8, 16}) {
                SCOPED_TRACE("m=" + std::to_string(m));
                const size_t ws = T + 3, as = D + 5;
                std::vector<float> w = Gaussian(m, static_cast<int>(ws), seed + m, 0.05f);
                if (extreme) w[0] = 1e20f;  // one huge weight: the others round to 0
                std::vector<float> want = Gaussian(m, static_cast<int>(as), seed + 99, 0.5f);
                std::vector<float> got = want;
                const std::vector<float> before = want;
                ASSERT_TRUE(ref::AxpyRowsInt16Weights(f, e.codes.data(), e.meta.data(), T, D,
                                                      w.data(), ws, m, want.data(), as));
                ++cases;
                if (!AxpyRowsInt16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(), ws, m,
                                          got.data(), as)) {
                  EXPECT_TRUE(!kKernelMustRun || target != HWY_AVX3_DL);
                  ASSERT_EQ(got, before);
                  continue;
                }
                ++simd_ran;
                for (int h = 0; h < m; ++h) {
                  for (size_t d = 0; d < as; ++d) {
                    ASSERT_EQ(got[h * as + d], want[h * as + d]) << "h=" << h << " d=" << d;
                    if (d >= static_cast<size_t>(D)) {
                      ASSERT_EQ(got[h * as + d], before[h * as + d]);
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

// The oracle against the fp32-weight reference: each output moves by at most
// su/2 · sum_t |c[t][d]| (su = max_t |w·s| / 32767) plus fp32 rounding.
TEST(MultiQueryRowsInt16Weights, OracleIsWithinTheWeightRoundingOfTheFp32Reference) {
  const Format f = Int8PerToken();
  for (int D : {64, 128}) {
    for (bool extreme : {false, true}) {
      SCOPED_TRACE("D=" + std::to_string(D) + (extreme ? " extreme" : ""));
      const int T = 32, m = 4;
      const Encoded e = Int8Chunk(T, D, 21u + D, extreme);
      std::vector<float> w = Gaussian(m, T, 31u + D, 0.05f);
      for (float& x : w) x = std::abs(x);  // softmax weights are >= 0
      std::vector<float> got(m * D, 0.0f), fp32(m * D, 0.0f);
      ASSERT_TRUE(ref::AxpyRowsInt16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(), T, m,
                                            got.data(), D));
      ref::AxpyChunkMulti(f, e.codes.data(), e.meta.data(), T, D, w.data(), T, m, fp32.data(), D);
      const int8_t* c = reinterpret_cast<const int8_t*>(e.codes.data());
      for (int h = 0; h < m; ++h) {
        double umax = 0.0;
        std::vector<double> s(T);
        for (int t = 0; t < T; ++t) {
          s[t] = F16ToF32(LoadF16(e.meta.data() + 2 * t));
          umax = std::max(umax,
                          static_cast<double>(std::abs(w[h * T + t] * static_cast<float>(s[t]))));
        }
        const double su = umax / 32767.0;
        for (int d = 0; d < D; ++d) {
          double csum = 0.0, mag = 0.0;
          for (int t = 0; t < T; ++t) {
            csum += std::abs(c[t * D + d]);
            mag += std::abs(w[h * T + t] * s[t] * c[t * D + d]);
          }
          const double tol = su / 2 * csum + 1e-5 * mag + 1e-30;
          ASSERT_NEAR(got[h * D + d], fp32[h * D + d], tol) << "h=" << h << " d=" << d;
        }
      }
    }
  }
}

TEST(MultiQueryRowsInt16Weights, DeclinesAndWritesNothing) {
  const int T = 32, D = 128, m = 8;
  const Encoded e = Int8Chunk(T, D, 4u, false);
  const std::vector<float> w = Gaussian(m, T, 10u, 0.05f);
  const std::vector<float> before(m * D, -7.0f);
  std::vector<float> acc = before;
  for (const Format& f : {Fp8E4M3(), Fp8E5M2(), F16(), Uniform(8, Grouping::kPerToken)}) {
    EXPECT_FALSE(Int16WeightsRowsApply(f, T, D)) << FormatName(f);
    EXPECT_FALSE(AxpyRowsInt16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(), T, m,
                                      acc.data(), D));
    EXPECT_FALSE(ref::AxpyRowsInt16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(), T, m,
                                           acc.data(), D));
  }
  const Format f = Int8PerToken();
  EXPECT_TRUE(Int16WeightsRowsApply(f, T, D));
  for (int bad_d : {32, 96, 1024}) EXPECT_FALSE(Int16WeightsRowsApply(f, T, bad_d)) << bad_d;
  for (int bad_t : {1, 7, 66}) EXPECT_FALSE(Int16WeightsRowsApply(f, bad_t, D)) << bad_t;
  EXPECT_FALSE(
      AxpyRowsInt16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(), T, 0, acc.data(), D));
  EXPECT_FALSE(
      AxpyRowsInt16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(), T, 17, acc.data(), D));
  // A weight whose product with the token scale is not finite (NaN, inf, or
  // 3e38 times a scale of 4), in the last row or the first: nothing written.
  Encoded big = e;
  for (int t = 0; t < T; ++t) {
    const uint16_t four = F32ToF16(4.0f);
    std::memcpy(big.meta.data() + 2 * t, &four, 2);
  }
  for (size_t at : {static_cast<size_t>(7 * T + 3), static_cast<size_t>(1)}) {
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 3e38f}) {
      std::vector<float> wb = w;
      wb[at] = bad;
      const Encoded& eb = bad == 3e38f ? big : e;
      test::OnEachTarget(
          [&]() {
            EXPECT_FALSE(AxpyRowsInt16Weights(f, eb.codes.data(), eb.meta.data(), T, D, wb.data(),
                                              T, m, acc.data(), D));
          },
          test::kSimdTestTargetsWithVnni);
      EXPECT_FALSE(ref::AxpyRowsInt16Weights(f, eb.codes.data(), eb.meta.data(), T, D, wb.data(), T,
                                             m, acc.data(), D));
    }
  }
  EXPECT_EQ(acc, before);
}

}  // namespace
}  // namespace hqekv::attn
