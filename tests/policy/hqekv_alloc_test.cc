#include "policy/hqekv_alloc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

namespace hqekv::policy {
namespace {

using Counts = std::array<int64_t, kNumTiers>;

TEST(HqekvAlloc, DefaultRatiosReproduceTheirBits) {
  for (double b : {2.0, 2.8, 3.2, 3.25}) {
    auto r = DefaultRatios(b);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_NEAR(r->avg_bits(), b, 2e-3) << b;
    EXPECT_NEAR(r->r4 + r->r2 + r->r1 + r->r0, 1.0, 1e-12);
  }
  auto bad = DefaultRatios(2.5);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("2, 2.8, 3.2, 3.25"), std::string::npos);
}

TEST(HqekvAlloc, ParseRatios) {
  auto r = ParseRatios("0.5/0.3/0.1/0.1");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_DOUBLE_EQ(r->r4, 0.5);
  EXPECT_DOUBLE_EQ(r->r0, 0.1);
  EXPECT_NEAR(r->avg_bits(), 2.7, 1e-12);
  EXPECT_FALSE(ParseRatios("0.5/0.3/0.1").ok());
  EXPECT_FALSE(ParseRatios("0.5/0.3/0.1/0.1/0").ok());
  EXPECT_FALSE(ParseRatios("0.5/0.3/x/0.2").ok());
  EXPECT_NE(ParseRatios("0.5/0.5/0.5/0").message().find("sum to"), std::string::npos);
  EXPECT_FALSE(ParseRatios("1.5/-0.5/0/0").ok());
}

TEST(HqekvAlloc, RoundHalfEven) {
  EXPECT_EQ(RoundHalfEven(2.5), 2.0);
  EXPECT_EQ(RoundHalfEven(3.5), 4.0);
  EXPECT_EQ(RoundHalfEven(-0.5), -0.0);
  EXPECT_EQ(RoundHalfEven(2.51), 3.0);
}

// The digest's worked example: Llama-3.1-8B at 3.25 bits, prompt 16,010
// tokens -> C = 16,000 compressed, nb = 500 -> [2, 0, 323, 159, 8, 8] (the
// INT8 entry of the reference is always 0 and absent here).
TEST(HqekvAlloc, DigestWorkedExample) {
  auto r = DefaultRatios(3.25);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(AllocateChunks(500, *r, 2), (Counts{2, 323, 159, 8, 8}));
}

// Issue 12: largest remainder over the configured tiers (was: half-even
// rounding, then the whole shortfall on the 1-bit tier).
TEST(HqekvAlloc, LargestRemainderOverTheConfiguredTiers) {
  // nb = 10, ratios 0.25 each, P = 0: 2.5 each -> floors 2, the 2 missing
  // units to the tied remainders, the more precise tiers first.
  TierRatios q{0.25, 0.25, 0.25, 0.25};
  EXPECT_EQ(AllocateChunks(10, q, 0), (Counts{0, 3, 3, 2, 2}));
  // nb = 6, ratios .35/.35/.05/.25: 2.1, 2.1, .3, 1.5 -> 2, 2, 0, 1 + the unit
  // to the largest remainder (evict, .5).
  EXPECT_EQ(AllocateChunks(6, TierRatios{0.35, 0.35, 0.05, 0.25}, 0), (Counts{0, 2, 2, 0, 2}));
  // nb = 2, ratios .3/.3/.1/.3: .6, .6, .2, .6 -> 2 units to the tied .6s, 4-bit
  // then 2-bit.
  EXPECT_EQ(AllocateChunks(2, TierRatios{0.3, 0.3, 0.1, 0.3}, 0), (Counts{0, 1, 1, 0, 0}));
  // The pinned fp16 chunks come first; the rest is split.
  EXPECT_EQ(AllocateChunks(12, TierRatios{0.5, 0.5, 0, 0}, 2), (Counts{2, 5, 5, 0, 0}));
  EXPECT_EQ(AllocateChunks(13, TierRatios{0.5, 0.5, 0, 0}, 2), (Counts{2, 6, 5, 0, 0}));
}

// A zero ratio never gets a chunk, at any chunk count (the old rounding made
// 1-bit chunks for ratios=0.5/0.5/0/0 at nb = 51, 55, 59, 63, ...), and every
// count is within one chunk of its exact share.
TEST(HqekvAlloc, RatiosAreAppliedAsConfigured) {
  const TierRatios cases[] = {{0.5, 0.5, 0, 0},
                              {0.63, 0.37, 0, 0},
                              {0.7, 0, 0, 0.3},
                              *DefaultRatios(2.0),
                              *DefaultRatios(3.2)};
  for (const TierRatios& r : cases) {
    const double ratio[4] = {r.r4, r.r2, r.r1, r.r0};
    for (int pinned : {0, 2}) {
      for (int64_t nb = 1; nb <= 200; ++nb) {
        const Counts c = AllocateChunks(nb, r, pinned);
        EXPECT_EQ(std::accumulate(c.begin(), c.end(), int64_t{0}), nb);
        EXPECT_EQ(c[0], std::min<int64_t>(pinned, nb));
        const int64_t rest = nb - c[0];
        for (int t = 0; t < 4; ++t) {
          if (ratio[t] == 0) {
            EXPECT_EQ(c[t + 1], 0) << RatiosText(r) << " nb " << nb << " tier " << t;
          }
          EXPECT_LT(std::fabs(c[t + 1] - rest * ratio[t]), 1.0) << RatiosText(r) << " nb " << nb;
        }
      }
    }
  }
}

TEST(HqekvAlloc, ShortInputsKeepEverythingFp16) {  // our guard for the reference's B8
  auto r = DefaultRatios(2.0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(AllocateChunks(1, *r, 2), (Counts{1, 0, 0, 0, 0}));
  EXPECT_EQ(AllocateChunks(2, *r, 2), (Counts{2, 0, 0, 0, 0}));
  EXPECT_EQ(AllocateChunks(0, *r, 2), (Counts{0, 0, 0, 0, 0}));
}

TEST(HqekvAlloc, CountsAlwaysSumToNb) {
  auto r = DefaultRatios(2.8);
  ASSERT_TRUE(r.ok());
  for (int64_t nb = 1; nb < 2000; nb += 7) {
    const Counts c = AllocateChunks(nb, *r, 2);
    EXPECT_EQ(std::accumulate(c.begin(), c.end(), int64_t{0}), nb) << nb;
    for (int64_t x : c) EXPECT_GE(x, 0);
  }
}

TEST(HqekvAlloc, PlanRanksKByAttentionAndVByRangeAmongKept) {
  // 6 new chunks; counts: 1 fp16, 2 u4, 1 u2, 1 n1, 1 evicted.
  const std::vector<Tier> cur(6, Tier::kF16);
  const std::vector<double> sk = {0.6, 0.1, 0.5, 0.4, 0.3, 0.2};
  // V: chunk 5 has a huge range: it ranks first for V; chunk 1 (lowest
  // attention) is evicted for both even though its V score is high.
  const std::vector<double> sv = {0.3, 0.9, 0.2, 0.1, 0.05, 0.8};
  const TierPlan p = PlanTiers(cur, cur, sk, sv, Counts{1, 2, 1, 1, 1});
  using T = Tier;
  EXPECT_EQ(p.k, (std::vector<T>{T::kF16, T::kEvicted, T::kHigh, T::kHigh, T::kMid, T::kLow}));
  EXPECT_EQ(p.v, (std::vector<T>{T::kHigh, T::kEvicted, T::kHigh, T::kMid, T::kLow, T::kF16}));
}

TEST(HqekvAlloc, PlanNeverUpgradesAndKeepsPastEvictions) {
  using T = Tier;
  const std::vector<T> cur_k = {T::kMid, T::kEvicted, T::kLow, T::kF16, T::kF16};
  const std::vector<double> s = {0.9, 0.0, 0.8, 0.1, 0.2};
  // Counts ask for 2 fp16 and 0 evicted: the evicted chunk stays evicted, the
  // old u2 and n1 chunks are not upgraded although they rank first, and they
  // do not take the fp16 slots either: the two fp16 chunks keep them (issue
  // 12; the old plan demoted them to u2 and u4). The u4 slot nobody can take
  // passes to u2.
  const TierPlan p = PlanTiers(cur_k, cur_k, s, s, Counts{2, 1, 1, 1, 0});
  EXPECT_EQ(p.k, (std::vector<T>{T::kMid, T::kEvicted, T::kLow, T::kF16, T::kF16}));
  for (size_t i = 0; i < p.k.size(); ++i) EXPECT_GE(p.k[i], cur_k[i]);
}

// The issue-12 drift: 2-bit chunks with high (noise-inflated) scores must not
// take 4-bit slots they can never use.
TEST(HqekvAlloc, PlanNeverSpendsABetterSlotOnAChunkThatCannotMoveUp) {
  using T = Tier;
  const std::vector<T> cur = {T::kMid, T::kMid, T::kHigh, T::kHigh, T::kF16};
  const std::vector<double> s = {0.9, 0.8, 0.1, 0.2, 0.05};
  const TierPlan p = PlanTiers(cur, cur, s, s, Counts{0, 3, 2, 0, 0});
  EXPECT_EQ(p.k, (std::vector<T>{T::kMid, T::kMid, T::kHigh, T::kHigh, T::kHigh}));
  EXPECT_EQ(p.v, p.k);
  // One u4 slot fewer: the lowest-scored u4 chunk goes to u2 (the new fp16
  // chunk outranks the u4 chunks: scores compare within a tier).
  const TierPlan q = PlanTiers(cur, cur, s, s, Counts{0, 2, 3, 0, 0});
  EXPECT_EQ(q.k, (std::vector<T>{T::kMid, T::kMid, T::kMid, T::kHigh, T::kHigh}));
}

// Scores compare within a tier: the worst tier's lowest chunk is evicted (or
// demoted) first, whatever a better tier's scores are; the ablation option
// compares raw scores across tiers.
TEST(HqekvAlloc, PlanComparesScoresWithinATier) {
  using T = Tier;
  const std::vector<T> cur = {T::kHigh, T::kMid, T::kMid, T::kHigh};
  const std::vector<double> s = {0.1, 0.5, 0.3, 0.6};
  const Counts c{0, 2, 1, 0, 1};
  TierPlan p = PlanTiers(cur, cur, s, s, c);
  EXPECT_EQ(p.k, (std::vector<T>{T::kHigh, T::kMid, T::kEvicted, T::kHigh}));
  PlanOptions across;
  across.compare_across_tiers = true;
  p = PlanTiers(cur, cur, s, s, c, across);
  EXPECT_EQ(p.k, (std::vector<T>{T::kEvicted, T::kMid, T::kMid, T::kHigh}));
  // Demotion: one u4 slot for two u4 chunks and a new fp16 chunk: the new
  // chunk (better current tier) keeps u4 within-tier, the lower u4 chunk
  // moves down.
  const std::vector<T> cur2 = {T::kHigh, T::kHigh, T::kF16};
  const std::vector<double> s2 = {0.4, 0.3, 0.1};
  p = PlanTiers(cur2, cur2, s2, s2, Counts{0, 2, 1, 0, 0});
  EXPECT_EQ(p.k, (std::vector<T>{T::kHigh, T::kMid, T::kHigh}));
  p = PlanTiers(cur2, cur2, s2, s2, Counts{0, 2, 1, 0, 0}, across);
  EXPECT_EQ(p.k, (std::vector<T>{T::kHigh, T::kHigh, T::kMid}));
}

// Steady decode: one new fp16 chunk per event, counts from AllocateChunks:
// the tier histogram follows the counts at every event (no drift), whatever
// the scores do. Within one chunk: the largest-remainder evict count can
// shrink by one as nb grows, and evicted chunks never return.
TEST(HqekvAlloc, PlanHoldsTheCountsOverManyEvents) {
  using T = Tier;
  for (const TierRatios& r :
       {TierRatios{0.5, 0.5, 0, 0}, TierRatios{0.63, 0.37, 0, 0}, *DefaultRatios(2.0),
        *DefaultRatios(3.2), TierRatios{0.7, 0, 0, 0.3}}) {
    std::vector<T> cur(48, T::kF16);
    uint32_t state = 1;
    for (int event = 0; event < 300; ++event) {
      std::vector<double> s(cur.size());
      for (size_t i = 0; i < s.size(); ++i) {
        state = state * 1664525u + 1013904223u;
        // Lower tiers score higher: the noise inflation of issue 12.
        s[i] = (state >> 8) * 0x1.0p-24 * (1 + 3 * static_cast<int>(cur[i]));
      }
      const Counts c = AllocateChunks(static_cast<int64_t>(cur.size()), r, 2);
      const TierPlan p = PlanTiers(cur, cur, s, s, c);
      Counts got{};
      for (T t : p.k) got[static_cast<int>(t)]++;
      for (int t = 0; t < kNumTiers; ++t) {
        ASSERT_LE(std::abs(got[t] - c[t]), 1)
            << RatiosText(r) << " event " << event << " tier " << t;
      }
      cur = p.k;
      cur.push_back(T::kF16);
    }
  }
}

TEST(HqekvAlloc, PlanEvictsOnlyUpToTheHistoryTarget) {
  using T = Tier;
  const std::vector<T> cur = {T::kEvicted, T::kHigh, T::kHigh, T::kF16};
  const std::vector<double> s = {0, 0.5, 0.1, 0.9};
  // Target 2 evicted in total, 1 already: one more, the lowest live by K.
  TierPlan p = PlanTiers(cur, cur, s, s, Counts{1, 1, 0, 0, 2});
  EXPECT_EQ(p.k, (std::vector<T>{T::kEvicted, T::kHigh, T::kEvicted, T::kF16}));
  // Target 1: nothing more.
  p = PlanTiers(cur, cur, s, s, Counts{1, 2, 0, 0, 1});
  EXPECT_EQ(p.k[2], T::kHigh);
}

TEST(HqekvAlloc, ShiftOneChunkDownMovesTheBestQuantizedTier) {
  Counts c = {2, 3, 1, 0, 0};
  ASSERT_TRUE(ShiftOneChunkDown(&c));
  EXPECT_EQ(c, (Counts{2, 2, 2, 0, 0}));  // pinned fp16 chunks never move
  c = {0, 0, 0, 1, 4};
  ASSERT_TRUE(ShiftOneChunkDown(&c));
  EXPECT_EQ(c, (Counts{0, 0, 0, 0, 5}));
  EXPECT_FALSE(ShiftOneChunkDown(&c));
  EXPECT_EQ(c, (Counts{0, 0, 0, 0, 5}));
  // Tiers left out of the mask are skipped: u4 -> evicted.
  const TierMask top = 1u << static_cast<int>(Tier::kHigh);
  c = {1, 2, 0, 0, 1};
  ASSERT_TRUE(ShiftOneChunkDown(&c, top));
  EXPECT_EQ(c, (Counts{1, 1, 0, 0, 2}));
  EXPECT_FALSE(TierUsable(top, static_cast<int>(Tier::kMid)));
  EXPECT_TRUE(TierUsable(top, static_cast<int>(Tier::kEvicted)));
}

}  // namespace
}  // namespace hqekv::policy
