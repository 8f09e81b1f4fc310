// Attention numerics at the edges of float range, through the SIMD bodies of
// attn::SoftmaxRow and the multi-query kernels (rows longer than 64, so the
// vector loops, not only the scalar tails, see the extreme values): scores
// near ±88 (where exp overflows / goes subnormal without the max
// subtraction) and ±1e4, long all-masked rows, a single kept entry. Every
// case runs on every SIMD target this CPU has and against a double
// reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "quant/format.h"
#include "attn/multi_query.h"
#include "../quant/quant_test_util.h"

namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Softmax in double with the SoftmaxRow contract (-inf masked, all masked
// gives zeros).
std::vector<double> RefSoftmax(const std::vector<float>& x) {
  double mx = -std::numeric_limits<double>::infinity();
  for (float v : x) mx = std::max(mx, double(v));
  std::vector<double> w(x.size(), 0.0);
  if (mx == -std::numeric_limits<double>::infinity()) return w;
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i)
    sum += (w[i] = x[i] == kNegInf ? 0.0 : std::exp(double(x[i]) - mx));
  for (double& v : w) v /= sum;
  return w;
}

// Runs fn on every SIMD target and once on the default dispatch.
template <class Fn>
void OnEveryTarget(Fn fn) {
  testing::RunOnEachTarget([&](int64_t) { fn(); });
  fn();
}

// Scores base + delta, delta a multiple of 1/64 in [-4, 4] (exact in float
// even at |base| = 1e4), every 7th entry masked.
std::vector<float> Row(int n, float base, uint32_t seed, bool mask) {
  std::mt19937 rng(seed);
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) {
    x[i] = base + static_cast<float>(static_cast<int>(rng() % 513) - 256) / 64.0f;
    if (mask && i % 7 == 3) x[i] = kNegInf;
  }
  return x;
}

TEST(SoftmaxEdges, ExtremeScoresInTheVectorBodyMatchTheDoubleReference) {
  OnEveryTarget([] {
    for (float base : {88.0f, 88.7f, -88.0f, -100.0f, 1e4f, -1e4f, 0.0f}) {
      for (int n : {67, 100, 1000}) {
        for (bool mask : {false, true}) {
          SCOPED_TRACE("base " + std::to_string(base) + " n " + std::to_string(n) +
                       (mask ? " masked" : ""));
          const std::vector<float> x = Row(n, base, 17u + static_cast<uint32_t>(n), mask);
          const std::vector<double> want = RefSoftmax(x);
          std::vector<float> got = x;
          ASSERT_TRUE(SoftmaxRow(got.data(), n));
          double sum = 0;
          for (int i = 0; i < n; ++i) {
            ASSERT_TRUE(std::isfinite(got[i])) << i;
            if (x[i] == kNegInf) {
              ASSERT_EQ(got[i], 0.0f) << i;
            }
            ASSERT_NEAR(got[i], want[i], 4e-6 * want[i] + 1e-30) << i;
            sum += got[i];
          }
          EXPECT_NEAR(sum, 1.0, 1e-5);
        }
      }
    }
  });
}

TEST(SoftmaxEdges, ExtremeScoresFarApartGiveAOneHotRow) {
  // One entry 1e4 above the rest (which sit at -1e4, -88 or 0): weight
  // exactly 1 for it and (sub)normal dust at most for the others (the
  // vector body clamps exponents at -100), wherever it sits in the row.
  OnEveryTarget([] {
    for (int at : {0, 37, 64, 99}) {
      for (float rest : {-1e4f, -88.0f, 0.0f}) {
        std::vector<float> x(100, rest);
        x[at] = rest + 1e4f;
        ASSERT_TRUE(SoftmaxRow(x.data(), 100));
        for (int i = 0; i < 100; ++i) {
          if (i == at) {
            ASSERT_EQ(x[i], 1.0f) << "at " << at;
          } else {
            ASSERT_GE(x[i], 0.0f) << "at " << at << " i " << i;
            ASSERT_LT(x[i], 1e-38f) << "at " << at << " i " << i;
          }
        }
      }
    }
  });
}

TEST(SoftmaxEdges, SingleKeptEntryGetsWeightExactlyOne) {
  // Everything masked but one entry, at any score: exp(0) / exp(0).
  OnEveryTarget([] {
    for (int at : {5, 37, 64, 98}) {
      for (float v : {1e4f, -1e4f, 88.5f, -88.5f, 0.0f}) {
        std::vector<float> x(99, kNegInf);
        x[at] = v;
        ASSERT_TRUE(SoftmaxRow(x.data(), 99));
        for (int i = 0; i < 99; ++i)
          ASSERT_EQ(x[i], i == at ? 1.0f : 0.0f) << "at " << at << " v " << v;
      }
    }
  });
}

TEST(SoftmaxEdges, LongAllMaskedRowsGiveZerosAndFalse) {
  OnEveryTarget([] {
    for (int n : {64, 100, 1000}) {
      std::vector<float> x(n, kNegInf);
      EXPECT_FALSE(SoftmaxRow(x.data(), n));
      for (float v : x) ASSERT_EQ(v, 0.0f);
    }
  });
}

// The attention pipeline of the store (DotChunkMulti -> SoftmaxRow ->
// AxpyChunkMulti) over 3 f16 chunks of 32 tokens (96 scores per row), with
// 4 query rows whose scores sit at ±88 and ±1e4. K rows are [1, k1, noise]
// and query rows [base, 1, 0...], so every score is exactly base + k1 in
// float; the outputs are compared with a double softmax-weighted sum of the
// fp16 V rows.
TEST(SoftmaxEdges, MultiQueryAttentionAtExtremeScoresMatchesTheDoubleReference) {
  const int T = 32, D = 16, C = 3, M = 4, n = T * C;
  const float bases[M] = {88.5f, -88.0f, 1e4f, -1e4f};
  const Format f16 = F16();
  std::mt19937 rng(29);
  std::vector<std::vector<uint8_t>> kc(C), vc(C);
  std::vector<float> k1(n), V(static_cast<size_t>(n) * D);
  for (int c = 0; c < C; ++c) {
    std::vector<float> k(static_cast<size_t>(T) * D), v(k.size());
    for (int t = 0; t < T; ++t) {
      const int j = c * T + t;
      k1[j] = static_cast<float>(static_cast<int>(rng() % 65) - 32) / 8.0f;
      for (int d = 0; d < D; ++d) {
        k[t * D + d] = d == 0   ? 1.0f
                       : d == 1 ? k1[j]
                                : RoundF16(std::normal_distribution<float>(0, 3)(rng));
        v[t * D + d] = V[static_cast<size_t>(j) * D + d] =
            RoundF16(std::normal_distribution<float>(0, 1)(rng));
      }
    }
    kc[c].resize(CodeBytes(f16, T, D));
    vc[c].resize(CodeBytes(f16, T, D));
    QuantizeChunk(f16, k.data(), T, D, kc[c].data(), nullptr);
    QuantizeChunk(f16, v.data(), T, D, vc[c].data(), nullptr);
  }
  std::vector<float> q(static_cast<size_t>(M) * D, 0.0f);
  for (int h = 0; h < M; ++h) q[h * D] = bases[h], q[h * D + 1] = 1.0f;

  OnEveryTarget([&] {
    std::vector<float> s(static_cast<size_t>(M) * n);
    for (int c = 0; c < C; ++c) {
      DotChunkMulti(f16, kc[c].data(), nullptr, T, D, q.data(), D, M, s.data() + c * T, n);
    }
    for (int h = 0; h < M; ++h) {
      for (int j = 0; j < n; ++j)
        ASSERT_EQ(s[h * n + j], bases[h] + k1[j]) << "row " << h << " token " << j;
    }
    std::vector<std::vector<double>> want_w(M);
    for (int h = 0; h < M; ++h) {
      want_w[h] = RefSoftmax(std::vector<float>(s.begin() + h * n, s.begin() + (h + 1) * n));
      ASSERT_TRUE(SoftmaxRow(s.data() + h * n, n));
    }
    std::vector<float> acc(static_cast<size_t>(M) * D, 0.0f);
    for (int c = 0; c < C; ++c) {
      AxpyChunkMulti(f16, vc[c].data(), nullptr, T, D, s.data() + c * T, n, M, acc.data(), D);
    }
    for (int h = 0; h < M; ++h) {
      for (int d = 0; d < D; ++d) {
        double want = 0;
        for (int j = 0; j < n; ++j) want += want_w[h][j] * V[static_cast<size_t>(j) * D + d];
        ASSERT_TRUE(std::isfinite(acc[h * D + d]));
        EXPECT_NEAR(acc[h * D + d], want, 2e-5) << "row " << h << " d " << d;
      }
    }
  });
}

TEST(SoftmaxEdges, SingleTokenChunkAttentionReturnsItsValueExactly) {
  // One kept token (T = 1) at a score of ±1e4: weight 1, output = its V row.
  const int D = 16;
  const Format f16 = F16();
  std::vector<float> k(D), v(D), q(2 * D, 0.0f);
  for (int d = 0; d < D; ++d) k[d] = d == 0 ? 1.0f : 0.5f, v[d] = RoundF16(0.37f * d - 2.0f);
  q[0] = 1e4f, q[D] = -1e4f;
  std::vector<uint8_t> kc(CodeBytes(f16, 1, D)), vc(kc.size());
  QuantizeChunk(f16, k.data(), 1, D, kc.data(), nullptr);
  QuantizeChunk(f16, v.data(), 1, D, vc.data(), nullptr);
  OnEveryTarget([&] {
    float s[2];
    DotChunkMulti(f16, kc.data(), nullptr, 1, D, q.data(), D, 2, s, 1);
    std::vector<float> acc(2 * D, 0.0f);
    for (int h = 0; h < 2; ++h) ASSERT_TRUE(SoftmaxRow(s + h, 1));
    AxpyChunkMulti(f16, vc.data(), nullptr, 1, D, s, 1, 2, acc.data(), D);
    for (int h = 0; h < 2; ++h) {
      for (int d = 0; d < D; ++d) ASSERT_EQ(acc[h * D + d], v[d]) << h << " " << d;
    }
  });
}

}  // namespace
}  // namespace hqekv::attn
