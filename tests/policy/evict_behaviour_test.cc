// Which tokens the eviction policies keep (StreamingLLM, H2O, SnapKV,
// PyramidKV), on hand-built caches with planted attention
// (behaviour_harness.h): each test asserts the exact kept positions per
// (layer, KV head) at prefill and after decode steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "behaviour_harness.h"

namespace hqekv::policy {
namespace {

using testing::AlongChannel;
using testing::Geometry;
using testing::Join;
using testing::Kept;
using testing::Make;
using testing::Planted;
using testing::RunBatch;
using testing::RunDecode;
using testing::Span;

constexpr int kEvictHeadDim = 16;

std::vector<int32_t> Set(std::initializer_list<int32_t> s) { return std::vector<int32_t>(s); }

// Rows that carry no planted structure (streaming records no attention).
Planted Flat() {
  Planted p;
  p.k = [](int, int32_t pos, int h, float* r) {
    for (int d = 0; d < kEvictHeadDim; ++d) r[d] = 0.01f * static_cast<float>((pos + d + h) % 5);
  };
  p.v = p.k;
  p.q = [](int, int32_t, int, float* r) { AlongChannel(0, kEvictHeadDim, r); };
  return p;
}

// sink=4, window=8: the first 4 positions plus the newest 8, on every head,
// after the prompt and after each decode step.
TEST(EvictBehaviour, StreamingKeepsTheSinkAndTheNewestWindow) {
  auto c = Make("streaming:sink=4,window=8", Geometry(2, 2, 2, kEvictHeadDim));
  ASSERT_NE(c, nullptr);
  const Planted p = Flat();
  RunBatch(*c, p, 0, 40, true);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h) EXPECT_EQ(Kept(*c, l, h), Join({Span(0, 3), Span(32, 39)}));
  RunDecode(*c, p, 40, 5);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h) EXPECT_EQ(Kept(*c, l, h), Join({Span(0, 3), Span(37, 44)}));
}

// keep=0.5 keeps floor(n / 2) tokens: the sink plus the newest; a token once
// evicted never comes back when the budget grows.
TEST(EvictBehaviour, StreamingFractionBudgetFollowsTheTokensSeen) {
  auto c = Make("streaming:sink=4,keep=0.5", Geometry(1, 2, 1, kEvictHeadDim));
  ASSERT_NE(c, nullptr);
  const Planted p = Flat();
  RunBatch(*c, p, 0, 40, true);
  EXPECT_EQ(Kept(*c, 0, 0), Join({Span(0, 3), Span(24, 39)}));  // 20 of 40
  RunDecode(*c, p, 40, 1);
  EXPECT_EQ(Kept(*c, 0, 0), Join({Span(0, 3), Span(25, 40)}));  // 20 of 41
  RunDecode(*c, p, 41, 1);
  EXPECT_EQ(Kept(*c, 0, 0), Join({Span(0, 3), Span(25, 41)}));  // 21 of 42
}

// H2O heavy=4, recent=8 over a 64-token prompt. Every query reads channel 0;
// KV head 0 plants four heavy hitters at 3, 17, 30, 41 (key 8 against 0:
// each takes ~1/4 of every later query, the least of them, 41, ~23/4 = 5.7 in
// all; a cold token collects at most 1 + 1/2 + 1/3 before the first hot
// one), KV head 1 at 8, 22, 35, 50 (the least, 50: ~14/4 = 3.5; cold tokens
// before 8 collect at most H(8) ~ 2.7).
// Decode queries read channel 1, where head 0's token 63 (head 1's 62) has
// key 12: it takes ~1 per step, and when it leaves the recent window (step 8,
// resp. 7) it outscores the weakest prefill hitter (8 > 5.7, 7 > 3.5), which
// is evicted; the cold decode tokens 64, 65 leave with the window.
TEST(EvictBehaviour, H2oKeepsHeavyHittersPerKvHeadAndTheRecentWindow) {
  const std::set<int32_t> hot0 = {3, 17, 30, 41}, hot1 = {8, 22, 35, 50};
  Planted p;
  p.k = [&](int, int32_t pos, int h, float* r) {
    for (int d = 0; d < kEvictHeadDim; ++d) r[d] = 0.f;
    r[0] = (h == 0 ? hot0 : hot1).count(pos) ? 8.f : 0.f;
    r[1] = pos == (h == 0 ? 63 : 62) ? 12.f : 0.f;
  };
  p.v = [](int, int32_t pos, int, float* r) {
    for (int d = 0; d < kEvictHeadDim; ++d) r[d] = static_cast<float>((pos * 7 + d) % 11) - 5.f;
  };
  p.q = [](int, int32_t pos, int, float* r) { AlongChannel(pos < 64 ? 0 : 1, kEvictHeadDim, r); };
  auto c = Make("h2o:heavy=4,recent=8", Geometry(1, 2, 2, kEvictHeadDim));
  ASSERT_NE(c, nullptr);
  RunBatch(*c, p, 0, 64, true);
  EXPECT_EQ(Kept(*c, 0, 0), Join({Set({3, 17, 30, 41}), Span(56, 63)}));
  EXPECT_EQ(Kept(*c, 0, 1), Join({Set({8, 22, 35, 50}), Span(56, 63)}));
  RunDecode(*c, p, 64, 10);
  EXPECT_EQ(Kept(*c, 0, 0), Join({Set({3, 17, 30, 63}), Span(66, 73)}));
  EXPECT_EQ(Kept(*c, 0, 1), Join({Set({8, 22, 35, 62}), Span(66, 73)}));
}

// SnapKV window=8, kernel=7, keep=22/64 of a 64-token prompt: the window
// (56..63) plus the 14 prefix tokens with the highest max-pooled votes. The
// window queries read channel 0, where KV head 0 plants hot tokens 10 and
// 30, head 1 20 and 45: pooling over +-3 spreads each vote to 7 tokens, so
// exactly the two 7-token neighbourhoods fill the 14 places. Decode tokens
// are appended and never evicted.
TEST(EvictBehaviour, SnapKvKeepsThePooledNeighbourhoodsOfTheVotesAndTheWindow) {
  Planted p;
  p.k = [](int, int32_t pos, int h, float* r) {
    for (int d = 0; d < kEvictHeadDim; ++d) r[d] = 0.f;
    const bool hot = h == 0 ? (pos == 10 || pos == 30) : (pos == 20 || pos == 45);
    r[0] = hot ? 8.f : 0.f;
  };
  p.v = [](int, int32_t pos, int, float* r) {
    for (int d = 0; d < kEvictHeadDim; ++d) r[d] = static_cast<float>((pos + d) % 3);
  };
  p.q = [](int, int32_t, int, float* r) { AlongChannel(0, kEvictHeadDim, r); };
  auto c = Make("snapkv:window=8,kernel=7,keep=0.34375", Geometry(1, 2, 2, kEvictHeadDim));
  ASSERT_NE(c, nullptr);
  RunBatch(*c, p, 0, 64, true);
  EXPECT_EQ(Kept(*c, 0, 0), Join({Span(7, 13), Span(27, 33), Span(56, 63)}));
  EXPECT_EQ(Kept(*c, 0, 1), Join({Span(17, 23), Span(42, 48), Span(56, 63)}));
  RunDecode(*c, p, 64, 5);
  EXPECT_EQ(Kept(*c, 0, 0), Join({Span(7, 13), Span(27, 33), Span(56, 68)}));
  EXPECT_EQ(Kept(*c, 0, 1), Join({Span(17, 23), Span(42, 48), Span(56, 68)}));
}

// PyramidKV over 4 layers, window=8, kernel=1 (no pooling), keep=0.5 of a
// 64-token prompt, beta=2: mean budget 32, a = 24 beyond the window, layer
// budgets beyond it 2a - a/beta = 36, 28, 20, a/beta = 12 (linear in depth),
// so the layers keep 44, 36, 28, 20 tokens. Every prefix token i has its own
// level sigma(i) = 23 i mod 56 (a permutation) in channel 0, logit sigma/4,
// and every window query sees the whole prefix, so the votes rank the prefix
// exactly by sigma: layer l keeps the prefix tokens with the top budget_l
// levels, plus the window.
TEST(EvictBehaviour, PyramidShrinksTheBudgetWithDepthAndKeepsTheTopVotes) {
  auto sigma = [](int32_t i) { return (23 * i) % 56; };
  Planted p;
  p.k = [&](int, int32_t pos, int, float* r) {
    for (int d = 0; d < kEvictHeadDim; ++d) r[d] = 0.f;
    r[0] = pos < 56 ? 0.25f * static_cast<float>(sigma(pos)) : 0.f;
  };
  p.v = p.k;
  p.q = [](int, int32_t, int, float* r) { AlongChannel(0, kEvictHeadDim, r); };
  auto c = Make("pyramid:window=8,kernel=1,keep=0.5,beta=2", Geometry(4, 2, 1, kEvictHeadDim));
  ASSERT_NE(c, nullptr);
  RunBatch(*c, p, 0, 64, true);
  const int extra[4] = {36, 28, 20, 12};
  for (int l = 0; l < 4; ++l) {
    std::vector<int32_t> want;
    for (int32_t i = 0; i < 56; ++i)
      if (sigma(i) >= 56 - extra[l]) want.push_back(i);
    const std::vector<int32_t> w = Span(56, 63);
    want.insert(want.end(), w.begin(), w.end());
    EXPECT_EQ(Kept(*c, l, 0), want) << "layer " << l;
  }
  RunDecode(*c, p, 64, 3);
  EXPECT_EQ(Kept(*c, 3, 0).size(), 20u + 3u);
  EXPECT_EQ(Kept(*c, 0, 0).size(), 44u + 3u);
}

}  // namespace
}  // namespace hqekv::policy
