// attn::AttendRows (tiled SIMD, online softmax) against ref::AttendRows (the
// scalar two-pass oracle) on every SIMD target this CPU runs.
#include "attn/flash_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "core/half.h"
#include "../quant/quant_test_util.h"

namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace {

// One KV head of `tokens` random rows in tiles of `tile` tokens.
struct Head {
  std::vector<std::vector<float>> k32, v32;
  std::vector<std::vector<f16_t>> k16, v16;
  std::vector<const void*> kp, vp;
  float max_v = 0.0f;
  KvTiles tiles;

  Head(KvRowType type, int D, int tile, int64_t tokens, std::mt19937& rng, float k_scale) {
    std::normal_distribution<float> nd(0.f, 1.f);
    for (int64_t t0 = 0; t0 < tokens; t0 += tile) {
      std::vector<float> k(static_cast<size_t>(tile) * D), v(k.size());
      for (auto& x : k) x = nd(rng) * k_scale;
      for (auto& x : v) x = nd(rng);
      if (type == KvRowType::kF16) {
        // Keep the fp16-representable values so max_v is exact.
        k16.emplace_back(k.size());
        v16.emplace_back(v.size());
        for (size_t i = 0; i < k.size(); ++i) {
          k16.back()[i] = F32ToF16(k[i]);
          v16.back()[i] = F32ToF16(v[i]);
          max_v = std::max(max_v, std::fabs(F16ToF32(v16.back()[i])));
        }
      } else {
        for (float x : v) max_v = std::max(max_v, std::fabs(x));
        k32.push_back(std::move(k));
        v32.push_back(std::move(v));
      }
    }
    for (size_t i = 0; i < std::max(k16.size(), k32.size()); ++i) {
      kp.push_back(type == KvRowType::kF16 ? static_cast<const void*>(k16[i].data())
                                           : static_cast<const void*>(k32[i].data()));
      vp.push_back(type == KvRowType::kF16 ? static_cast<const void*>(v16[i].data())
                                           : static_cast<const void*>(v32[i].data()));
    }
    tiles.type = type;
    tiles.D = D;
    tiles.tile_tokens = tile;
    tiles.tokens = tokens;
    tiles.k = kp.data();
    tiles.v = vp.data();
  }
};

struct Case {
  KvRowType type;
  int D, tile, R;
  int64_t tokens;
};

// Checks one case; returns the largest error / bound seen.
double Check(const Case& c, std::mt19937& rng) {
  Head head(c.type, c.D, c.tile, c.tokens, rng, 0.5f);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> q(static_cast<size_t>(c.R) * c.D);
  for (auto& x : q) x = nd(rng) / std::sqrt(static_cast<float>(c.D)) * 3.0f;
  // Visible counts: causal edges (0, 1, a tile boundary and one either side,
  // everything) and random prefixes; rows of one block differ.
  std::vector<int64_t> vis(static_cast<size_t>(c.R));
  std::uniform_int_distribution<int64_t> ud(0, c.tokens);
  const int64_t edges[] = {0, 1, c.tile - 1, c.tile, c.tile + 1, c.tokens - 1, c.tokens};
  for (int r = 0; r < c.R; ++r) {
    vis[r] = r < 7 ? std::clamp<int64_t>(edges[r], 0, c.tokens) : ud(rng);
  }
  // Strides wider than D: the kernel must honour them.
  const size_t qs = c.D, os = c.D + 3;
  std::vector<float> got(static_cast<size_t>(c.R) * os, -7.0f), want(got.size(), -7.0f);
  AttendRows(head.tiles, q.data(), qs, c.R, vis.data(), got.data(), os);
  ref::AttendRows(head.tiles, q.data(), qs, c.R, vis.data(), want.data(), os);
  // The same call with column sums of rows [R / 3, R) (added to a non-zero
  // start): outputs bit-identical, sums within their tolerance of the oracle.
  const int first_row = c.R / 3;
  std::vector<float> got_cols(got.size(), -7.0f);
  std::vector<float> sums(static_cast<size_t>(c.tokens) + 1, 0.5f), want_sums(sums);
  AttendRows(head.tiles, q.data(), qs, c.R, vis.data(), got_cols.data(), os,
             ColumnSums{sums.data(), first_row});
  std::vector<float> unused(got.size());
  ref::AttendRows(head.tiles, q.data(), qs, c.R, vis.data(), unused.data(), os,
                  ColumnSums{want_sums.data(), first_row});
  EXPECT_EQ(got_cols, got);
  double smax_all = 0.0;
  double worst = 0.0;
  for (int r = 0; r < c.R; ++r) {
    // Largest |score| of the row bounds the exp error's effect.
    float smax = 0.0f;
    for (int64_t t = 0; t < vis[r]; ++t) {
      float s = 0.0f;
      const size_t i = static_cast<size_t>(t % c.tile) * c.D;
      for (int d = 0; d < c.D; ++d) {
        const float k = c.type == KvRowType::kF16 ? F16ToF32(head.k16[t / c.tile][i + d])
                                                  : head.k32[t / c.tile][i + d];
        s += q[r * qs + d] * k;
      }
      smax = std::max(smax, std::fabs(s));
    }
    if (r >= first_row) smax_all = std::max<double>(smax_all, smax);
    const double bound = 4e-6 * head.max_v * (1.0 + smax);
    for (int d = 0; d < c.D; ++d) {
      const double e = std::fabs(got[r * os + d] - want[r * os + d]);
      EXPECT_LE(e, bound) << "row " << r << " d " << d << " visible " << vis[r] << " D " << c.D
                          << " R " << c.R << " tokens " << c.tokens;
      worst = std::max(worst, e / bound);
      if (vis[r] == 0) {
        EXPECT_EQ(got[r * os + d], 0.0f);
      }
    }
    // The stride gap is untouched.
    for (size_t d = c.D; d < os; ++d) EXPECT_EQ(got[r * os + d], -7.0f);
  }
  // Tokens no summed row sees keep their start value exactly; the entry past
  // the last token is never touched.
  int64_t summed_vis = 0;
  for (int r = first_row; r < c.R; ++r) summed_vis = std::max(summed_vis, vis[r]);
  for (int64_t t = 0; t <= c.tokens; ++t) {
    if (t >= summed_vis) {
      EXPECT_EQ(sums[t], 0.5f) << "token " << t;
      continue;
    }
    const double w = want_sums[t] - 0.5;  // the oracle's sum for token t
    const double bound = 1e-5 * (1.0 + smax_all) * (std::fabs(w) + 0.5) + 1e-30;
    EXPECT_NEAR(sums[t], want_sums[t], bound) << "token " << t << " D " << c.D << " R " << c.R;
    worst = std::max(worst, std::fabs(sums[t] - want_sums[t]) / bound);
  }
  return worst;
}

TEST(FlashAttention, MatchesScalarOracleOnEveryTarget) {
  const Case cases[] = {
      {KvRowType::kF16, 128, 32, 64, 300},  // one full block, partial last tile
      {KvRowType::kF16, 128, 32, 77, 256},  // rows not a multiple of any block
      {KvRowType::kF32, 128, 32, 130, 97},
      {KvRowType::kF16, 64, 32, 33, 200},
      {KvRowType::kF32, 64, 32, 9, 64},
      {KvRowType::kF16, 72, 16, 40, 50},  // D not a multiple of the channel block
      {KvRowType::kF32, 3, 5, 11, 23},    // tiny odd shapes: every remainder path
  };
  auto run = [&] {
    std::mt19937 rng(2024);
    double worst = 0.0;
    for (const Case& c : cases) worst = std::max(worst, Check(c, rng));
    std::printf("worst error / bound: %.3g\n", worst);
  };
  if (testing::RunOnEachTarget([&](int64_t) { run(); }) == 0) run();
}

TEST(FlashAttention, LargeScoresStayFinite) {
  // Scores in the hundreds: the online rescale must not overflow or lose rows
  // whose max moves late.
  std::mt19937 rng(5);
  Head head(KvRowType::kF32, 64, 32, 200, rng, 8.0f);
  std::vector<float> q(64 * 64);
  std::normal_distribution<float> nd(0.f, 4.f);
  for (auto& x : q) x = nd(rng);
  std::vector<int64_t> vis(64);
  for (int r = 0; r < 64; ++r) vis[r] = 1 + r * 3;
  std::vector<float> got(q.size()), want(q.size());
  AttendRows(head.tiles, q.data(), 64, 64, vis.data(), got.data(), 64);
  ref::AttendRows(head.tiles, q.data(), 64, 64, vis.data(), want.data(), 64);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << i;
    // Weights are near one-hot: outputs equal V entries up to rounding.
    EXPECT_NEAR(got[i], want[i], 1e-4 * head.max_v) << i;
  }
}

TEST(FlashAttention, BlockIsAWholeNumberOfVectors) {
  const int b = AttendRowsBlock();
  EXPECT_GE(b, 4);
  EXPECT_EQ(b % 4, 0);
}

}  // namespace
}  // namespace hqekv::attn
