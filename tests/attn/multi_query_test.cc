// Multi-query kernels (attn/multi_query.h) against their oracle, the
// single-query scalar reference called once per row, for every format and
// grouping, m in {1,...,5,8}, T in {1,7,32}, D in {8,64,96,128}, with row strides
// larger than the rows. Tolerances (attn/multi_query.h): scores within
// 1e-5·D·max|x̂|·max|q|, accumulators within 1e-5·T·max|x̂|·max|w|.
#include "attn/multi_query.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "quant/internal.h"
#include "../quant/quant_test_util.h"

namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace {

using testing::Encode;
using testing::Encoded;
using testing::Gaussian;
using testing::MaxAbs;

// Formats for a D-channel chunk: AllFormats() (per-token group 8) plus the
// store's per-token group min(32, D) and Hadamard variants.
std::vector<Format> FormatsFor(int D) {
  std::vector<Format> fs = testing::AllFormats();
  for (int b : {1, 2, 4, 8}) fs.push_back(Uniform(b, Grouping::kPerToken, std::min(32, D)));
  // Groups of 16: one AVX-512 vector per group in the wide kernels
  // (multi_query_wide-inl.h); 32-bit, 64-bit and 128-bit code fetches.
  for (int b : {2, 4, 8}) fs.push_back(Uniform(b, Grouping::kPerToken, std::min(16, D)));
  fs.push_back(Normal(2, Grouping::kPerToken, std::min(16, D)));
  for (int b : {1, 2}) fs.push_back(Normal(b, Grouping::kPerToken, std::min(32, D)));
  // Groups of the whole head (HqeKV's lean layout): one weight per token and
  // row in the wide kernels' affine fold, every vector of a block sharing it.
  for (int b : {2, 4}) fs.push_back(Uniform(b, Grouping::kPerToken, D));
  fs.push_back(Normal(1, Grouping::kPerToken, D));
  // u3 per token (the multi-row axpy of quant/simd.cc): the store's group and
  // the lean layout's whole head.
  fs.push_back(Uniform3(Grouping::kPerToken, std::min(32, D)));
  fs.push_back(Uniform3(Grouping::kPerToken, D));
  // llama.cpp blocks (D a multiple of 32; Validate skips the others).
  for (Kind k : {Kind::kQ8_0, Kind::kQ4_0, Kind::kQ4_1, Kind::kQ5_0, Kind::kQ5_1})
    fs.push_back(GgmlBlock(k));
  for (Format f : {Uniform(2, Grouping::kPerChannel), Uniform(4, Grouping::kPerToken, 8),
                   Int8PerToken(), F16()}) {
    f.hadamard = true;
    fs.push_back(f);
  }
  return fs;
}

// Runs fn on each x86 SIMD target this CPU supports (AVX-512 uses 4
// accumulator vectors per row, the others 2); with none, once on the default
// dispatch.
template <class Fn>
void ForEachTargetOrDefault(Fn fn) {
  if (testing::RunOnEachTarget([&](int64_t) { fn(); }) == 0) fn();
}

// Counts the (format, T, D, m) cases checked in *checked.
void CheckDotAndAxpy(int* checked) {
  for (int D : {8, 64, 96, 128}) {  // 96: an odd number of 32-channel groups
    for (const Format& f : FormatsFor(D)) {
      for (int T : {1, 7, 32}) {
        if (!Validate(f, T, D).ok()) continue;
        SCOPED_TRACE(FormatName(f) + " T=" + std::to_string(T) + " D=" + std::to_string(D));
        const uint32_t seed = static_cast<uint32_t>(T * 1000 + D);
        const std::vector<float> x = Gaussian(T, D, seed);
        const Encoded e = Encode(f, x, T, D, /*reference=*/false);
        std::vector<float> xhat(static_cast<size_t>(T) * D);
        quant::ref::DequantizeStored(f, e.codes.data(), e.meta.data(), T, D, xhat.data());
        const float xmax = MaxAbs(xhat);
        for (int m : {1, 2, 3, 4, 5, 8}) {  // every head-block size, and two blocks
          SCOPED_TRACE("m=" + std::to_string(m));
          // Strides larger than the rows: the kernels must honour them.
          const size_t qs = D + 3, ss = T + 5, ws = T + 2, as = D + 1;
          const std::vector<float> q = Gaussian(m, static_cast<int>(qs), seed + 1, 0.5f);
          std::vector<float> w = Gaussian(m, static_cast<int>(ws), seed + 2);
          for (float& v : w) v = std::abs(v) / 8.0f;  // attention-like weights >= 0
          const float qmax = MaxAbs(q), wmax = MaxAbs(w);

          std::vector<float> got(m * ss, -9.0f), want(m * ss, -9.0f);
          DotChunkMulti(f, e.codes.data(), e.meta.data(), T, D, q.data(), qs, m, got.data(), ss);
          ref::DotChunkMulti(f, e.codes.data(), e.meta.data(), T, D, q.data(), qs, m, want.data(),
                             ss);
          const double dtol = 1e-5 * D * xmax * qmax + 1e-30;
          for (int h = 0; h < m; ++h) {
            for (size_t t = 0; t < ss; ++t) {
              const size_t i = h * ss + t;
              if (t >= static_cast<size_t>(T)) {
                ASSERT_EQ(got[i], -9.0f) << "wrote past row " << h;  // stride padding untouched
              } else {
                ASSERT_NEAR(got[i], want[i], dtol) << "score h=" << h << " t=" << t;
              }
            }
          }

          const std::vector<float> acc0 = Gaussian(m, static_cast<int>(as), seed + 3);
          std::vector<float> ga = acc0, wa = acc0;
          AxpyChunkMulti(f, e.codes.data(), e.meta.data(), T, D, w.data(), ws, m, ga.data(), as);
          ref::AxpyChunkMulti(f, e.codes.data(), e.meta.data(), T, D, w.data(), ws, m, wa.data(),
                              as);
          const double atol = 1e-5 * T * xmax * wmax + 1e-6 * MaxAbs(acc0);
          for (int h = 0; h < m; ++h) {
            for (size_t d = 0; d < as; ++d) {
              const size_t i = h * as + d;
              if (d >= static_cast<size_t>(D)) {
                ASSERT_EQ(ga[i], acc0[i]) << "wrote past row " << h;
              } else {
                ASSERT_NEAR(ga[i], wa[i], atol) << "acc h=" << h << " d=" << d;
              }
            }
          }
          ++*checked;
        }
      }
    }
  }
}

TEST(MultiQuery, DotAndAxpyMatchSingleQueryReferenceOnEveryTarget) {
  ForEachTargetOrDefault([] {
    int checked = 0;
    CheckDotAndAxpy(&checked);
    EXPECT_GT(checked, 600);  // the loops really ran (formats × shapes × m)
  });
}

// The row-major 8-bit and llama.cpp-block kernels on codes no quantizer
// writes (every byte value: fp8 NaN / inf codes, which decode clamped to the
// largest finite value, int8 -128, random q5 high bits) against the oracle.
TEST(MultiQuery, RowKernelsMatchReferenceOnArbitraryCodes) {
  ForEachTargetOrDefault([] {
    std::mt19937 rng(23);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.01f, 2.0f);
    int checked = 0;
    for (const Format& f :
         {Fp8E4M3(), Fp8E5M2(), Int8PerToken(), GgmlBlock(Kind::kQ8_0), GgmlBlock(Kind::kQ4_0),
          GgmlBlock(Kind::kQ4_1), GgmlBlock(Kind::kQ5_0), GgmlBlock(Kind::kQ5_1)}) {
      for (int D : {64, 128}) {
        const int T = 32, m = 4;
        SCOPED_TRACE(FormatName(f) + " D=" + std::to_string(D));
        std::vector<uint8_t> codes(CodeBytes(f, T, D)), meta(MetaBytes(f, T, D));
        for (size_t i = 0; i < codes.size(); ++i)
          codes[i] = static_cast<uint8_t>(i < 256 ? i : byte(rng));
        // Metadata: fp16 scales / minima in [0.01, 2) (random signs for
        // minima), then random q5 masks: every 16-bit field a valid value.
        for (size_t i = 0; i + 1 < meta.size(); i += 2) {
          const float v = scale(rng) * ((i / 2) % 3 == 2 ? -1.0f : 1.0f);
          StoreF16(F32ToF16(v), meta.data() + i);
        }
        if (f.kind == Kind::kQ5_0 || f.kind == Kind::kQ5_1) {
          const BlockLayout lay = BlockLayoutOf(f.kind);
          const size_t nb = static_cast<size_t>(T) * D / kBlockValues;
          for (size_t i = lay.mask_offset(nb); i < meta.size(); ++i)
            meta[i] = static_cast<uint8_t>(byte(rng));
        }
        std::vector<float> xhat(static_cast<size_t>(T) * D);
        quant::ref::DequantizeStored(f, codes.data(), meta.data(), T, D, xhat.data());
        const float xmax = MaxAbs(xhat);
        ASSERT_TRUE(std::isfinite(xmax));
        const std::vector<float> q = Gaussian(m, D, 7, 0.5f);
        std::vector<float> w = Gaussian(m, T, 8);
        for (float& v : w) v = std::abs(v) / 8.0f;
        std::vector<float> got(m * T), want(m * T);
        DotChunkMulti(f, codes.data(), meta.data(), T, D, q.data(), D, m, got.data(), T);
        ref::DotChunkMulti(f, codes.data(), meta.data(), T, D, q.data(), D, m, want.data(), T);
        const double dtol = 1e-5 * D * xmax * MaxAbs(q);
        for (int i = 0; i < m * T; ++i) ASSERT_NEAR(got[i], want[i], dtol) << "score " << i;
        std::vector<float> ga(m * D, 0.5f), wa = ga;
        AxpyChunkMulti(f, codes.data(), meta.data(), T, D, w.data(), T, m, ga.data(), D);
        ref::AxpyChunkMulti(f, codes.data(), meta.data(), T, D, w.data(), T, m, wa.data(), D);
        const double atol = 1e-5 * T * xmax * MaxAbs(w) + 1e-6;
        for (int i = 0; i < m * D; ++i) ASSERT_NEAR(ga[i], wa[i], atol) << "acc " << i;
        ++checked;
      }
    }
    EXPECT_EQ(checked, 16);
  });
}

// The multi-query result for row h does not depend on the other rows (a
// broken register-blocking would mix heads): permuting rows permutes results.
TEST(MultiQuery, RowsAreIndependent) {
  const int T = 32, D = 128, m = 8;
  for (const Format& f :
       {Uniform(2, Grouping::kPerChannel), Uniform(2, Grouping::kPerToken, 32), F16()}) {
    SCOPED_TRACE(FormatName(f));
    const std::vector<float> x = Gaussian(T, D, 5);
    const Encoded e = Encode(f, x, T, D, false);
    const std::vector<float> q = Gaussian(m, D, 6);
    std::vector<float> all(m * T), one(T);
    DotChunkMulti(f, e.codes.data(), e.meta.data(), T, D, q.data(), D, m, all.data(), T);
    for (int h = 0; h < m; ++h) {
      DotChunkMulti(f, e.codes.data(), e.meta.data(), T, D, q.data() + h * D, D, 1, one.data(), T);
      for (int t = 0; t < T; ++t) ASSERT_NEAR(all[h * T + t], one[t], 1e-4f) << h << " " << t;
    }
  }
}

// On every target: the vector body is 4, 8 or 16 lanes wide, so the sizes
// cover an exact vector, a vector plus a tail and tails only.
TEST(MultiQuery, SoftmaxMatchesReferenceAndMasks) {
  ForEachTargetOrDefault([] {
    const float ninf = -std::numeric_limits<float>::infinity();
    std::mt19937 rng(17);
    std::normal_distribution<float> nd(0.0f, 4.0f);
    for (int n : {1, 3, 8, 9, 15, 16, 17, 33, 100, 1027}) {
      SCOPED_TRACE("n=" + std::to_string(n));
      std::vector<float> x(n);
      for (int i = 0; i < n; ++i) x[i] = (i % 5 == 3) ? ninf : nd(rng);
      if (n == 3) x[0] = 200.0f;  // far-apart scores: others underflow to ~0
      std::vector<float> got = x, want = x, stats = x;
      const bool any = SoftmaxRow(got.data(), n);
      ASSERT_EQ(any, ref::SoftmaxRow(want.data(), n));
      // The stats variant: same weights, and max / sum of exp(x - max).
      float mx = 0.0f, sum_e = 0.0f;
      ASSERT_EQ(SoftmaxRowStats(stats.data(), n, &mx, &sum_e), any);
      EXPECT_EQ(stats, got);
      EXPECT_EQ(mx, *std::max_element(x.begin(), x.end()));
      double want_sum = 0.0;
      for (float v : x) want_sum += v == ninf ? 0.0 : std::exp(static_cast<double>(v) - mx);
      EXPECT_NEAR(sum_e, want_sum, 1e-5 * want_sum);
      // The unnormalized variant: exp(x - max) with the same sum; weights
      // times the sum are the reference's within its tolerance.
      std::vector<float> raw = x;
      float raw_sum = 0.0f;
      ASSERT_EQ(SoftmaxRowUnnormalized(raw.data(), n, &raw_sum), any);
      EXPECT_EQ(raw_sum, sum_e);
      for (int i = 0; i < n; ++i) {
        if (x[i] == ninf) {
          ASSERT_EQ(raw[i], 0.0f) << i;
        }
        ASSERT_NEAR(raw[i] / raw_sum, want[i], 4e-6f * want[i] + 1e-30f) << i;
        ASSERT_EQ(raw[i] * (1.0f / raw_sum), got[i]) << i;  // the same rounding as normalized
      }
      float sum = 0.0f;
      for (int i = 0; i < n; ++i) {
        if (x[i] == ninf) {
          ASSERT_EQ(got[i], 0.0f) << i;  // masked: exactly 0
        }
        ASSERT_NEAR(got[i], want[i], 4e-6f * want[i] + 1e-30f) << i;
        sum += got[i];
      }
      EXPECT_NEAR(sum, 1.0f, 1e-5f);
    }
    std::vector<float> masked(13, ninf);
    EXPECT_FALSE(SoftmaxRow(masked.data(), 13));
    for (float v : masked) EXPECT_EQ(v, 0.0f);
    std::vector<float> masked2(5, ninf);
    float mx = 0.0f, sum_e = 1.0f;
    EXPECT_FALSE(SoftmaxRowStats(masked2.data(), 5, &mx, &sum_e));
    EXPECT_EQ(mx, ninf);
    EXPECT_EQ(sum_e, 0.0f);
    std::vector<float> masked3(21, ninf);
    sum_e = 1.0f;
    EXPECT_FALSE(SoftmaxRowUnnormalized(masked3.data(), 21, &sum_e));
    EXPECT_EQ(sum_e, 0.0f);
    for (float v : masked3) EXPECT_EQ(v, 0.0f);
  });
}

// u3 per-token V (HqeKV's lean tiers): the multi-row axpy shares the code
// fetches between rows but must give every row exactly what the single-row
// kernel gives it (decode attention's output does not depend on how many
// query heads share a KV head), also with Hadamard and strided rows.
TEST(MultiQuery, Uniform3AxpyRowsAreBitIdenticalToSingleRowCalls) {
  int ran = 0;
  ForEachTargetOrDefault([&] {
    for (int D : {8, 64, 128}) {
      for (int g : {8, 32, D}) {
        if (g > D) continue;
        for (bool had : {false, true}) {
          Format f = Uniform3(Grouping::kPerToken, g);
          f.hadamard = had;
          for (int T : {7, 32}) {
            if (!Validate(f, T, D).ok()) continue;
            SCOPED_TRACE(FormatName(f) + " T=" + std::to_string(T) + " D=" + std::to_string(D));
            const Encoded e = Encode(f, Gaussian(T, D, 31 + D + g), T, D, false);
            for (int m : {1, 3, 4, 8, 9}) {
              const size_t ws = T + 3, as = D + 5;
              std::vector<float> w = Gaussian(m, static_cast<int>(ws), 41 + m);
              for (float& v : w) v = std::abs(v) / 8.0f;
              w[0] = 0.0f;  // a zero weight: the row's values still pass through the kernel
              const std::vector<float> acc0 = Gaussian(m, static_cast<int>(as), 51 + m);
              std::vector<float> multi = acc0, single = acc0;
              AxpyChunkMulti(f, e.codes.data(), e.meta.data(), T, D, w.data(), ws, m, multi.data(),
                             as);
              for (int h = 0; h < m; ++h) {
                AxpyChunk(f, e.codes.data(), e.meta.data(), T, D, w.data() + h * ws,
                          single.data() + h * as);
              }
              for (size_t i = 0; i < multi.size(); ++i) {
                ASSERT_EQ(multi[i], single[i]) << "m=" << m << " at " << i;
              }
              ++ran;
            }
          }
        }
      }
    }
  });
  EXPECT_GT(ran, 100);
}

// fp16 sums (HqeKV's importance window): the vector kernel equals the scalar
// loop bit for bit on every target, through ties (round to nearest even),
// subnormal sums and weights, zero weights, overflow to inf and tails of
// every length; and a few sums checked by hand.
TEST(MultiQuery, AccumulateF16MatchesTheScalarLoopBitForBit) {
  ForEachTargetOrDefault([] {
    std::mt19937 rng(61);
    std::uniform_int_distribution<int> bits(0, 0x7BFF);  // finite non-negative fp16
    std::uniform_real_distribution<float> uni(0.0f, 1.0f);
    for (float scale : {1.0f, 1024.0f, 65536.0f * 16.0f}) {
      for (int n : {1, 3, 8, 15, 16, 17, 31, 33, 100, 1027}) {
        SCOPED_TRACE("scale=" + std::to_string(scale) + " n=" + std::to_string(n));
        std::vector<uint16_t> sums(n);
        std::vector<float> w(n);
        for (int j = 0; j < n; ++j) {
          sums[j] = static_cast<uint16_t>(j % 7 == 0 ? j % 1024 : bits(rng));  // subnormals too
          switch (j % 5) {
            case 0:
              w[j] = 0.0f;
              break;
            case 1:
              w[j] = uni(rng) * 1e-9f;
              break;  // sums that barely move
            case 2:
              w[j] = 1e-40f;
              break;  // an fp32 subnormal weight
            default:
              w[j] = uni(rng);
          }
        }
        std::vector<uint16_t> got = sums, want = sums;
        AccumulateF16(got.data(), w.data(), scale, n);
        ref::AccumulateF16(want.data(), w.data(), scale, n);
        for (int j = 0; j < n; ++j) ASSERT_EQ(got[j], want[j]) << j;
      }
    }
    // By hand: 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even (1) wins;
    // 1 + 3·2^-11 rounds up to 1 + 2^-9; 65504 + 16 (a tie with 65536)
    // overflows to inf; 0 + 2^-25 (half the smallest subnormal) ties to 0.
    std::vector<uint16_t> s = {F32ToF16(1.0f), F32ToF16(1.0f), F32ToF16(65504.0f), 0};
    const std::vector<float> w = {std::ldexp(1.0f, -11), 3 * std::ldexp(1.0f, -11), 16.0f,
                                  std::ldexp(1.0f, -25)};
    AccumulateF16(s.data(), w.data(), 1.0f, 4);
    EXPECT_EQ(s[0], F32ToF16(1.0f));
    EXPECT_EQ(F16ToF32(s[1]), 1.0f + std::ldexp(1.0f, -9));
    EXPECT_EQ(s[2], 0x7C00);  // +inf
    EXPECT_EQ(s[3], 0);
  });
}

}  // namespace
}  // namespace hqekv::attn
