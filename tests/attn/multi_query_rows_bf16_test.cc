// bf16 kernels over fp8 chunks (attn/multi_query_rows_bf16.h): K scores
// (DotRowsBf16Query / DotRowsBf16Prepared) and V sums (AxpyRowsBf16Weights)
// against their scalar oracles on every x86 target this CPU runs, AVX3_DL
// included (the same bf16 inputs and exact products; the kernels sum in
// fp32, the oracles in double: equal within fp32 summation, 4e-6 of the sum
// of |products|); the oracles against the fp32 references (ref::DotChunkMulti
// / AxpyChunkMulti) within the bf16 rounding of the query / weights (2^-8 relative);
// the kernels must run on a CPU with AVX512_BF16 in Release; declines write
// nothing.
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
#include "attn/multi_query_rows_bf16.h"
#include "../quant/quant_test_util.h"

namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace {

using testing::Encode;
using testing::Encoded;
using testing::Gaussian;
using testing::kKernelMustRun;

// Relative error of the kernels' fp32 sums against the oracles' double sums,
// per unit of sum |products| (D / 32 + a few dependent adds, each 2^-24).
constexpr double kSumTol = 4e-6;

bool CpuHasBf16Kernel() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  return (hwy::SupportedTargets() & HWY_AVX3_DL) != 0 && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

// An fp8 chunk: Gaussian values, or (extreme) every code value (NaN / inf
// codes included, which decode to the largest finite value) and a random
// fp16 scale.
Encoded Fp8Chunk(const Format& f, int T, int D, uint32_t seed, bool extreme) {
  Encoded e = Encode(f, Gaussian(T, D, seed), T, D, /*reference=*/false);
  if (extreme) {
    std::mt19937 rng(seed);
    for (size_t i = 0; i < e.codes.size(); ++i) {
      e.codes[i] = static_cast<uint8_t>(i < 256 ? i : rng() & 255);
    }
    const uint16_t h = F32ToF16(std::uniform_real_distribution<float>(1e-3f, 4.0f)(rng));
    std::memcpy(e.meta.data(), &h, 2);
  }
  return e;
}

float Scale(const Encoded& e) { return F16ToF32(LoadF16(e.meta.data())); }

const Format kFormats[] = {Fp8E4M3(), Fp8E5M2()};

TEST(MultiQueryRowsBf16Query, MatchesOracleOnEveryTarget) {
  int simd_ran = 0, cases = 0;
  const int targets = test::OnEachTarget(
      [&](int64_t target) {
        for (const Format& f : kFormats) {
          const float* v = Fp8DecodeTable(f.kind == Kind::kFp8E4M3);
          for (int D : {64, 128, 512}) {
            for (int T : {1, 3, 4, 7, 32, 64}) {
              for (bool extreme : {false, true}) {
                SCOPED_TRACE(FormatName(f) + " D=" + std::to_string(D) + " T=" + std::to_string(T) +
                             (extreme ? " extreme" : ""));
                const uint32_t seed = static_cast<uint32_t>(13 * D + T);
                const Encoded e = Fp8Chunk(f, T, D, seed, extreme);
                for (int m : {1, 2, 3, 4, 5, 8}) {
                  SCOPED_TRACE("m=" + std::to_string(m));
                  const size_t qs = D + 3, ss = T + 5;
                  std::vector<float> q = Gaussian(m, static_cast<int>(qs), seed + m, 0.3f);
                  if (extreme) q[0] = 1e30f;
                  std::vector<float> want(m * ss, -7.0f), got(m * ss, -7.0f);
                  ASSERT_TRUE(ref::DotRowsBf16Query(f, e.codes.data(), e.meta.data(), T, D,
                                                    q.data(), qs, m, want.data(), ss));
                  ++cases;
                  if (!DotRowsBf16Query(f, e.codes.data(), e.meta.data(), T, D, q.data(), qs, m,
                                        got.data(), ss)) {
                    // Declined: nothing written. Only AVX3_DL with BF16 has the kernel.
                    EXPECT_TRUE(!kKernelMustRun || target != HWY_AVX3_DL || !CpuHasBf16Kernel());
                    for (float x : got) ASSERT_EQ(x, -7.0f);
                    continue;
                  }
                  ++simd_ran;
                  // The prepared form gives the same bits.
                  Bf16Query prepared;
                  ASSERT_TRUE(PrepareBf16Query(q.data(), qs, m, D, &prepared));
                  std::vector<float> again(m * ss, -7.0f);
                  ASSERT_TRUE(DotRowsBf16Prepared(f, e.codes.data(), e.meta.data(), T, prepared,
                                                  again.data(), ss));
                  ASSERT_EQ(again, got);
                  for (int h = 0; h < m; ++h) {
                    for (size_t t = 0; t < ss; ++t) {
                      if (t >= static_cast<size_t>(T)) {  // past the row: untouched
                        ASSERT_EQ(got[h * ss + t], -7.0f);
                        continue;
                      }
                      double mag = 0.0;
                      for (int d = 0; d < D; ++d) {
                        mag += std::abs(double{q[h * qs + d]} * v[e.codes[t * D + d]]);
                      }
                      const double tol = kSumTol * mag * Scale(e) + 1e-30;
                      ASSERT_NEAR(got[h * ss + t], want[h * ss + t], tol)
                          << "h=" << h << " t=" << t;
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
  if (kKernelMustRun && CpuHasBf16Kernel()) {
    EXPECT_GT(simd_ran, 0) << "the bf16 kernel never ran on an AVX3_DL + BF16 CPU";
  }
  EXPECT_GT(cases, 0);
}

// The oracle against the fp32-query reference: each score moves by at most
// 2^-8 · s · sum_d |q[d]·v[t][d]| (the query's bf16 rounding) plus the
// reference's fp32 rounding.
TEST(MultiQueryRowsBf16Query, OracleIsWithinTheQueryRoundingOfTheFp32Reference) {
  for (const Format& f : kFormats) {
    const float* v = Fp8DecodeTable(f.kind == Kind::kFp8E4M3);
    for (int D : {64, 128, 512}) {
      for (bool extreme : {false, true}) {
        SCOPED_TRACE(FormatName(f) + " D=" + std::to_string(D) + (extreme ? " extreme" : ""));
        const int T = 32, m = 4;
        const Encoded e = Fp8Chunk(f, T, D, 5u + D, extreme);
        const std::vector<float> q = Gaussian(m, D, 77u + D, 0.3f);
        std::vector<float> got(m * T), fp32(m * T);
        ASSERT_TRUE(ref::DotRowsBf16Query(f, e.codes.data(), e.meta.data(), T, D, q.data(), D, m,
                                          got.data(), T));
        ref::DotChunkMulti(f, e.codes.data(), e.meta.data(), T, D, q.data(), D, m, fp32.data(), T);
        for (int h = 0; h < m; ++h) {
          for (int t = 0; t < T; ++t) {
            double mag = 0.0;
            for (int d = 0; d < D; ++d)
              mag += std::abs(double{q[h * D + d]} * v[e.codes[t * D + d]]);
            const double tol = Scale(e) * mag * (0x1p-8 + 1e-5) + 1e-30;
            ASSERT_NEAR(got[h * T + t], fp32[h * T + t], tol) << "h=" << h << " t=" << t;
          }
        }
      }
    }
  }
}

TEST(MultiQueryRowsBf16Query, DeclinesAndWritesNothing) {
  const int T = 32, D = 128, m = 8;
  const Encoded e = Fp8Chunk(Fp8E4M3(), T, D, 3u, false);
  const std::vector<float> q = Gaussian(m, D, 9u, 0.3f);
  std::vector<float> s(m * T, -7.0f);
  Bf16Query prepared;
  for (const Format& f : {Int8PerToken(), F16(), Uniform(8, Grouping::kPerToken)}) {
    EXPECT_FALSE(Bf16QueryRowsApply(f, T, D)) << FormatName(f);
    EXPECT_FALSE(
        DotRowsBf16Query(f, e.codes.data(), e.meta.data(), T, D, q.data(), D, m, s.data(), T));
    EXPECT_FALSE(
        ref::DotRowsBf16Query(f, e.codes.data(), e.meta.data(), T, D, q.data(), D, m, s.data(), T));
  }
  const Format f = Fp8E4M3();
  EXPECT_TRUE(Bf16QueryRowsApply(f, T, D));
  for (int bad_d : {32, 96, 1024}) {
    EXPECT_FALSE(Bf16QueryRowsApply(f, T, bad_d)) << bad_d;
    EXPECT_FALSE(PrepareBf16Query(q.data(), D, m, bad_d, &prepared)) << bad_d;
  }
  EXPECT_FALSE(Bf16QueryRowsApply(f, 0, D));
  EXPECT_FALSE(Bf16QueryRowsApply(f, 65, D));
  EXPECT_FALSE(
      DotRowsBf16Query(f, e.codes.data(), e.meta.data(), T, D, q.data(), D, 0, s.data(), T));
  // Not prepared: declined.
  EXPECT_FALSE(DotRowsBf16Prepared(f, e.codes.data(), e.meta.data(), T, Bf16Query{}, s.data(), T));
  // A non-finite or too big entry (its bf16 could round to inf) in the last
  // row (a later block of 4 rows) or the first block: nothing written.
  for (size_t at : {static_cast<size_t>(7 * D + 5), static_cast<size_t>(D + 1)}) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity(), -1e38f}) {
      std::vector<float> qb = q;
      qb[at] = bad;
      test::OnEachTarget(
          [&]() {
            EXPECT_FALSE(DotRowsBf16Query(f, e.codes.data(), e.meta.data(), T, D, qb.data(), D, m,
                                          s.data(), T));
            EXPECT_FALSE(PrepareBf16Query(qb.data(), D, m, D, &prepared));
            EXPECT_EQ(prepared.m, 0);
          },
          test::kSimdTestTargetsWithVnni);
      EXPECT_FALSE(ref::DotRowsBf16Query(f, e.codes.data(), e.meta.data(), T, D, qb.data(), D, m,
                                         s.data(), T));
    }
  }
  EXPECT_TRUE(std::all_of(s.begin(), s.end(), [](float x) { return x == -7.0f; }));
}

TEST(MultiQueryRowsBf16Weights, MatchesOracleOnEveryTarget) {
  int simd_ran = 0, cases = 0;
  const int targets = test::OnEachTarget(
      [&](int64_t target) {
        for (const Format& f : kFormats) {
          const float* v = Fp8DecodeTable(f.kind == Kind::kFp8E4M3);
          for (int D : {64, 128, 512}) {
            for (int T : {2, 6, 32, 64}) {
              for (bool extreme : {false, true}) {
                SCOPED_TRACE(FormatName(f) + " D=" + std::to_string(D) + " T=" + std::to_string(T) +
                             (extreme ? " extreme" : ""));
                const uint32_t seed = static_cast<uint32_t>(17 * D + T);
                const Encoded e = Fp8Chunk(f, T, D, seed, extreme);
                for (int m : {1, 2, 3, 4, 5, 8, 16}) {
                  SCOPED_TRACE("m=" + std::to_string(m));
                  const size_t ws = T + 3, as = D + 5;
                  std::vector<float> w = Gaussian(m, static_cast<int>(ws), seed + m, 0.05f);
                  if (extreme) w[0] = 1e20f;
                  std::vector<float> want = Gaussian(m, static_cast<int>(as), seed + 99, 0.5f);
                  std::vector<float> got = want;
                  const std::vector<float> before = want;
                  ASSERT_TRUE(ref::AxpyRowsBf16Weights(f, e.codes.data(), e.meta.data(), T, D,
                                                       w.data(), ws, m, want.data(), as));
                  ++cases;
                  if (!AxpyRowsBf16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(), ws, m,
                                           got.data(), as)) {
                    EXPECT_TRUE(!kKernelMustRun || target != HWY_AVX3_DL || !CpuHasBf16Kernel());
                    ASSERT_EQ(got, before);
                    continue;
                  }
                  ++simd_ran;
                  for (int h = 0; h < m; ++h) {
                    for (size_t d = 0; d < as; ++d) {
                      if (d >= static_cast<size_t>(D)) {  // channels past D: untouched
                        ASSERT_EQ(got[h * as + d], before[h * as + d]);
                        continue;
                      }
                      double mag = 0.0;
                      for (int t = 0; t < T; ++t) {
                        mag += std::abs(double{w[h * ws + t]} * Scale(e) * v[e.codes[t * D + d]]);
                      }
                      const double tol =
                          kSumTol * mag + 0x1p-23 * std::abs(double{before[h * as + d]}) + 1e-30;
                      ASSERT_NEAR(got[h * as + d], want[h * as + d], tol)
                          << "h=" << h << " d=" << d;
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
  if (kKernelMustRun && CpuHasBf16Kernel()) {
    EXPECT_GT(simd_ran, 0) << "the bf16 kernel never ran on an AVX3_DL + BF16 CPU";
  }
  EXPECT_GT(cases, 0);
}

// The oracle against the fp32-weight reference: each output moves by at most
// 2^-8 · sum_t |w·s·v[t][d]| (the bf16 rounding of w·s) plus fp32 rounding.
TEST(MultiQueryRowsBf16Weights, OracleIsWithinTheWeightRoundingOfTheFp32Reference) {
  for (const Format& f : kFormats) {
    const float* v = Fp8DecodeTable(f.kind == Kind::kFp8E4M3);
    for (int D : {64, 128}) {
      for (bool extreme : {false, true}) {
        SCOPED_TRACE(FormatName(f) + " D=" + std::to_string(D) + (extreme ? " extreme" : ""));
        const int T = 32, m = 4;
        const Encoded e = Fp8Chunk(f, T, D, 21u + D, extreme);
        std::vector<float> w = Gaussian(m, T, 31u + D, 0.05f);
        for (float& x : w) x = std::abs(x);  // softmax weights are >= 0
        std::vector<float> got(m * D, 0.0f), fp32(m * D, 0.0f);
        ASSERT_TRUE(ref::AxpyRowsBf16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(), T, m,
                                             got.data(), D));
        ref::AxpyChunkMulti(f, e.codes.data(), e.meta.data(), T, D, w.data(), T, m, fp32.data(), D);
        for (int h = 0; h < m; ++h) {
          for (int d = 0; d < D; ++d) {
            double mag = 0.0;
            for (int t = 0; t < T; ++t) {
              mag += std::abs(double{w[h * T + t]} * Scale(e) * v[e.codes[t * D + d]]);
            }
            const double tol = mag * (0x1p-8 + 1e-5) + 1e-30;
            ASSERT_NEAR(got[h * D + d], fp32[h * D + d], tol) << "h=" << h << " d=" << d;
          }
        }
      }
    }
  }
}

TEST(MultiQueryRowsBf16Weights, DeclinesAndWritesNothing) {
  const int T = 32, D = 128, m = 8;
  const Encoded e = Fp8Chunk(Fp8E4M3(), T, D, 4u, false);
  const std::vector<float> w = Gaussian(m, T, 10u, 0.05f);
  const std::vector<float> before(m * D, -7.0f);
  std::vector<float> acc = before;
  for (const Format& f : {Int8PerToken(), F16(), Uniform(8, Grouping::kPerToken)}) {
    EXPECT_FALSE(Bf16WeightsRowsApply(f, T, D)) << FormatName(f);
    EXPECT_FALSE(
        AxpyRowsBf16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(), T, m, acc.data(), D));
    EXPECT_FALSE(ref::AxpyRowsBf16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(), T, m,
                                          acc.data(), D));
  }
  const Format f = Fp8E5M2();
  EXPECT_TRUE(Bf16WeightsRowsApply(f, T, D));
  for (int bad_d : {32, 96, 1024}) EXPECT_FALSE(Bf16WeightsRowsApply(f, T, bad_d)) << bad_d;
  for (int bad_t : {1, 7, 66}) EXPECT_FALSE(Bf16WeightsRowsApply(f, bad_t, D)) << bad_t;
  EXPECT_FALSE(
      AxpyRowsBf16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(), T, 0, acc.data(), D));
  EXPECT_FALSE(
      AxpyRowsBf16Weights(f, e.codes.data(), e.meta.data(), T, D, w.data(), T, 17, acc.data(), D));
  // A weight whose product with the chunk scale is not finite or too big
  // (NaN, inf, 3e38 times a scale of 4), in the last row or the first: nothing
  // written.
  Encoded big = e;
  const uint16_t four = F32ToF16(4.0f);
  std::memcpy(big.meta.data(), &four, 2);
  for (size_t at : {static_cast<size_t>(7 * T + 3), static_cast<size_t>(1)}) {
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 3e38f}) {
      std::vector<float> wb = w;
      wb[at] = bad;
      const Encoded& eb = bad == 3e38f ? big : e;
      test::OnEachTarget(
          [&]() {
            EXPECT_FALSE(AxpyRowsBf16Weights(f, eb.codes.data(), eb.meta.data(), T, D, wb.data(), T,
                                             m, acc.data(), D));
          },
          test::kSimdTestTargetsWithVnni);
      EXPECT_FALSE(ref::AxpyRowsBf16Weights(f, eb.codes.data(), eb.meta.data(), T, D, wb.data(), T,
                                            m, acc.data(), D));
    }
  }
  EXPECT_EQ(acc, before);
}

// Every fp8 value is a bf16 exactly (the tables the kernels widen with).
TEST(MultiQueryRowsBf16, Fp8ValuesAreExactBf16) {
  for (bool e4m3 : {true, false}) {
    const float* v = Fp8DecodeTable(e4m3);
    const uint16_t* b = Fp8Bf16Table(e4m3);
    for (int c = 0; c < 256; ++c) {
      ASSERT_EQ(Bf16Value(b[c]), v[c]) << "code " << c << (e4m3 ? " E4M3" : " E5M2");
      ASSERT_EQ((b[c] & 0x8000) != 0, (c & 0x80) != 0) << c;  // the sign: the code's bit 7
      ASSERT_EQ(b[c] & 0x7FFF, b[c & 0x7F] & 0x7FFF) << c;    // magnitude from 7 bits
    }
  }
}

// The store's walk takes the bf16 kernels only where Bf16RowsPreferred says so:
// never where they would decline (the walk would then pay a failed call per
// chunk), never on Intel (wave 19: the fp32 row kernels are faster there), and
// on every other CPU with AVX512_BF16 where the kernels run.
TEST(MultiQueryRowsBf16Query, PreferredOnlyWhereTheKernelsRunAndWin) {
  const int T = 32, D = 128, m = 4;
  const Encoded e = Fp8Chunk(Fp8E4M3(), T, D, 5u, false);
  const std::vector<float> q = Gaussian(m, D, 11u, 0.3f);
  std::vector<float> s(m * T, 0.0f);
  const bool runs =
      DotRowsBf16Query(Fp8E4M3(), e.codes.data(), e.meta.data(), T, D, q.data(), D, m, s.data(), T);
  if (Bf16RowsPreferred()) EXPECT_TRUE(runs);
#if defined(__x86_64__) || defined(__i386__)
  if (__builtin_cpu_is("intel")) EXPECT_FALSE(Bf16RowsPreferred());
  if (runs && !__builtin_cpu_is("intel")) EXPECT_TRUE(Bf16RowsPreferred());
#endif
}

}  // namespace
}  // namespace hqekv::attn
