#include "policy/hqekv_alloc.h"

#include <gtest/gtest.h>

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

TEST(HqekvAlloc, SumFixTakesFromOneBitUpward) {
  // nb = 10, ratios 0.25 each, P = 0: 2.5 -> 2 (half-even) each, evict 2:
  // sum 8 < 10 -> the 1-bit entry grows by 2.
  TierRatios q{0.25, 0.25, 0.25, 0.25};
  EXPECT_EQ(AllocateChunks(10, q, 0), (Counts{0, 2, 2, 4, 2}));
  // nb = 6, ratios .35/.35/.05/.25, P = 0: 2.1->2, 2.1->2, .3->0, 1.5->2: sum 6.
  EXPECT_EQ(AllocateChunks(6, TierRatios{0.35, 0.35, 0.05, 0.25}, 0), (Counts{0, 2, 2, 0, 2}));
  // Excess larger than the 1-bit entry carries on to the 2-bit entry:
  // nb = 2, ratios .3/.3/.1/.3, P = 0: .6->1, .6->1, .2->0, .6->1: sum 3, e = 1
  // -> 1-bit has 0, 2-bit 1 -> 0.
  EXPECT_EQ(AllocateChunks(2, TierRatios{0.3, 0.3, 0.1, 0.3}, 0), (Counts{0, 1, 0, 0, 1}));
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
  EXPECT_EQ(p.k, (std::vector<T>{T::kF16, T::kEvicted, T::kU4, T::kU4, T::kU2, T::kN1}));
  EXPECT_EQ(p.v, (std::vector<T>{T::kU4, T::kEvicted, T::kU4, T::kU2, T::kN1, T::kF16}));
}

TEST(HqekvAlloc, PlanNeverUpgradesAndKeepsPastEvictions) {
  using T = Tier;
  const std::vector<T> cur_k = {T::kU2, T::kEvicted, T::kN1, T::kF16, T::kF16};
  const std::vector<double> s = {0.9, 0.0, 0.8, 0.1, 0.2};
  // Counts ask for 2 fp16 and 0 evicted: the evicted chunk stays evicted, the
  // old u2 and n1 chunks are not upgraded although they rank first.
  const TierPlan p = PlanTiers(cur_k, cur_k, s, s, Counts{2, 1, 1, 1, 0});
  EXPECT_EQ(p.k, (std::vector<T>{T::kU2, T::kEvicted, T::kN1, T::kU2, T::kU4}));
  for (size_t i = 0; i < p.k.size(); ++i) EXPECT_GE(p.k[i], cur_k[i]);
}

TEST(HqekvAlloc, PlanEvictsOnlyUpToTheHistoryTarget) {
  using T = Tier;
  const std::vector<T> cur = {T::kEvicted, T::kU4, T::kU4, T::kF16};
  const std::vector<double> s = {0, 0.5, 0.1, 0.9};
  // Target 2 evicted in total, 1 already: one more, the lowest live by K.
  TierPlan p = PlanTiers(cur, cur, s, s, Counts{1, 1, 0, 0, 2});
  EXPECT_EQ(p.k, (std::vector<T>{T::kEvicted, T::kU4, T::kEvicted, T::kF16}));
  // Target 1: nothing more.
  p = PlanTiers(cur, cur, s, s, Counts{1, 2, 0, 0, 1});
  EXPECT_EQ(p.k[2], T::kU4);
}

}  // namespace
}  // namespace hqekv::policy
