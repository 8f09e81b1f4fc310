// bits=B means TRUE bits per original element for every policy that takes a
// budget: the byte model behind it matches the bytes held, and the caches
// hold <= B (+ a stated tolerance) after prefill and at every decode step.
#include "policy/true_bits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "policy/hqekv_cache.h"
#include "policy_harness.h"
#include "policy/spec.h"
#include "../sanitized.h"

namespace hqekv::policy {
namespace {

using testing::Driver;
using testing::MustMake;

KvGeometry Geometry(int d = 64, int max_ctx = 4096) {
  KvGeometry g = testing::SmallGeometry(2, 4, 2, d);
  g.max_ctx = max_ctx;
  return g;
}

// Per-layer bytes held vs the model at the same state (after the event).
void ExpectModelMatches(const std::string& spec, int d, int prefill, int decode) {
  SCOPED_TRACE(spec + " D=" + std::to_string(d));
  auto c = MustMake(spec, Geometry(d));
  ASSERT_NE(c, nullptr);
  auto* h = dynamic_cast<HqekvCache*>(c.get());
  ASSERT_NE(h, nullptr);
  Driver drv(c.get(), 3);
  drv.Step(prefill, true, false);
  for (int i = 0; i < decode; ++i) drv.Step(1, false, false);
  const KvStats st = c->Stats();
  const int64_t n = prefill + decode;
  for (int l = 0; l < 2; ++l) {
    const int64_t nb = h->chunks_compressed(l);
    const auto counts = AllocateChunks(nb, h->ratios(l), h->pinned_chunks());
    const int64_t model = h->cost_model().LayerBytes(n, nb, counts);
    const int64_t held = st.layers[l].bytes.total();
    // The model is an upper bound: it counts an open importance window (2
    // bytes per kept token) and a full page of slack at every point; tight
    // within 3% + 2 pages + 2 KiB (headers and table minimums) otherwise.
    const int64_t window = h->cost_model().units * 2 * (st.layers[l].kept_tokens / 2 + 32);
    EXPECT_GE(model, held) << "layer " << l;
    EXPECT_LE(model, held + 3 * held / 100 + window + 2048 +
                         2 * static_cast<int64_t>(h->cost_model().layout.page_bytes))
        << "layer " << l;
  }
}

TEST(TrueBits, HqekvByteModelMatchesHeldBytes) {
  for (int d : {64, 128, 8}) {
    for (const char* spec :
         {"hqekv:ratios=0/1/0/0,fp16_chunks=0", "hqekv:ratios=1/0/0/0", "hqekv:ratios=0/0/1/0",
          "hqekv:ratios=0.3/0.5/0.2/0,layout=lean", "hqekv:ratios=0/1/0/0,tiers=u4/u3/u2,vgroup=64",
          "hqekv:ratios=0/0/0/1", "hqekv:ratios=0.4/0.4/0.1/0.1",
          "hqekv:ratios=0.5/0.5/0/0,per_head=1", "hqekv:ratios=0.5/0/0/0.5,vgrouping=chan"}) {
      ExpectModelMatches(spec, d, 1024, 0);
      ExpectModelMatches(spec, d, 600, 0);
    }
    // During decode the plan's counts are an upper bound (downgrade only):
    // exact for single-tier layouts.
    for (const char* spec : {"hqekv:ratios=0/1/0/0,fp16_chunks=0", "hqekv:ratios=0/0/0/1"}) {
      ExpectModelMatches(spec, d, 600, 40);
    }
  }
}

// Measured bits after prefill and after every decode step.
struct Trace {
  double after_prefill = 0, worst = 0, end = 0;
  std::string note;
};
Trace RunTrace(const std::string& spec, const KvGeometry& g, int prefill, int decode) {
  auto c = MustMake(spec, g);
  Trace t;
  if (!c) return t;
  Driver drv(c.get(), 5);
  drv.Step(prefill, true, false);
  t.after_prefill = t.worst = c->Stats().bits_per_original();
  for (int i = 0; i < decode; ++i) {
    drv.Step(1, false, false);
    t.worst = std::max(t.worst, c->Stats().bits_per_original());
  }
  t.end = c->Stats().bits_per_original();
  t.note = c->BudgetNote();
  return t;
}

// Stated tolerance of bits=: held <= B + 0.01 at every point; after a
// 1024-token prefill (2 KV heads, D = 64) within 0.35 bit of B: one chunk of
// rounding margin, the model's full page of slack and the importance
// window's sums, which the budget reserves for the decode steps where the
// window is open.
constexpr double kOver = 0.01, kUnder = 0.35;

TEST(TrueBits, HqekvHoldsTheBudgetAfterPrefillAndDuringDecode) {
  const KvGeometry g = Geometry(64, 2048);
  for (double b : {1.8, 2.5, 3.4, 4.2, 5.4}) {
    char spec[64];
    std::snprintf(spec, sizeof spec, "hqekv:bits=%g", b);
    SCOPED_TRACE(spec);
    const Trace t = RunTrace(spec, g, 1024, 160);
    EXPECT_LE(t.worst, b + kOver);
    EXPECT_GE(t.after_prefill, b - kUnder);
    EXPECT_EQ(t.note, "");
  }
  // Feasible at the full context (2048 tokens) but not at 1024: the cache
  // holds its minimum (every compressible chunk evicted) and says so. (The
  // paper layout's two fp16 chunks set that floor; the lean default has none.)
  const Trace t = RunTrace("hqekv:bits=1.2,layout=paper", g, 1024, 32);
  EXPECT_NE(t.note.find("below what this sequence length allows"), std::string::npos) << t.note;
}

TEST(TrueBits, EvictionPoliciesHoldTheBudget) {
  const KvGeometry g = Geometry(64, 2048);
  for (const char* fam : {"streaming", "h2o", "snapkv", "pyramid"}) {
    // SnapKV and PyramidKV select once, at the end of prefill, and append
    // decode tokens unchanged (as their papers do): their budget holds at
    // the end of prefill only.
    const bool once = std::string(fam) == "snapkv" || std::string(fam) == "pyramid";
    for (double b : {2.0, 4.0, 8.0}) {
      char spec[64];
      std::snprintf(spec, sizeof spec, "%s:bits=%g", fam, b);
      SCOPED_TRACE(spec);
      const Trace t = RunTrace(spec, g, 1024, 64);
      EXPECT_LE(once ? t.after_prefill : t.worst, b + kOver);
      EXPECT_GE(t.after_prefill, b - 0.5);  // whole fp16 tokens and chunk records
    }
  }
}

TEST(TrueBits, KiviBitsPicksTheWidestCodeThatFits) {
  const KvGeometry g = Geometry(64, 2048);
  // At the full context the cache holds <= B; 5.2 bits buys 2-bit codes
  // (measured 3.34 bits), 5.4 and 6 bits 4-bit codes (measured 5.28 with
  // 24-byte chunk records; with the earlier 56-byte ones 4-bit codes did not
  // fit under 5.4).
  for (double b : {3.8, 5.2, 5.4, 6.0}) {
    char spec[64];
    std::snprintf(spec, sizeof spec, "kivi:bits=%g,residual=32", b);
    SCOPED_TRACE(spec);
    auto c = MustMake(spec, g);
    ASSERT_NE(c, nullptr);
    Driver drv(c.get(), 7);
    drv.Step(1984, true, false);
    for (int i = 0; i < 63; ++i) drv.Step(1, false, false);
    const KvStats st = c->Stats();
    EXPECT_LE(st.bits_per_original(), b + kOver);
    const bool four = st.layers[0].k_tiers.count("u4") != 0;
    EXPECT_EQ(four, b >= 5.4);
  }
}

TEST(TrueBits, InfeasibleBudgetsAndBadKeysGiveClearErrors) {
  const KvGeometry g = Geometry(64, 2048);
  struct Case {
    const char* spec;
    const char* says;
  } cases[] = {
      {"hqekv:bits=0.2", "achievable ["},
      {"kivi:bits=3,residual=32", "2-bit codes hold"},
      {"hqekv:nominal_bits=2.5", "no built-in tier ratios for nominal_bits=2.5"},
      {"hqekv:bits=3,nominal_bits=2", "at most one of"},
      {"kivi:bits=4,nominal_bits=2", "at most one of"},
      {"fp8:bits=4", "unknown key"},
      {"int8:bits=4", "unknown key"},
  };
  for (const Case& k : cases) {
    auto c = MakeKvCache(k.spec, g);
    ASSERT_FALSE(c.ok()) << k.spec;
    EXPECT_NE(c.message().find(k.says), std::string::npos) << k.spec << ": " << c.message();
  }
}

TEST(TrueBits, SolverUsesU4AndU2BetweenTheirCosts) {
  auto c = MustMake("hqekv:bits=4.5", Geometry(64, 2048));
  auto* h = dynamic_cast<HqekvCache*>(c.get());
  ASSERT_NE(h, nullptr);
  const auto b = h->cost_model().TierBits(2048);
  EXPECT_GT(b[0], b[1]);
  EXPECT_GT(b[1], b[2]);
  EXPECT_GT(b[2], b[3]);
  const BudgetRatios r = SolveBudgetRatios(h->cost_model(), (b[0] + b[1]) / 2, 2048);
  EXPECT_GT(r.ratios.r4, 0);
  EXPECT_GT(r.ratios.r2, 0);
  EXPECT_EQ(r.ratios.r1, 0);
  EXPECT_EQ(r.ratios.r0, 0);
  const BudgetRatios low = SolveBudgetRatios(h->cost_model(), (b[2] + b[3]) / 2, 2048);
  EXPECT_EQ(low.ratios.r4 + low.ratios.r2, 0);
  EXPECT_GT(low.ratios.r1, 0);
  EXPECT_GT(low.ratios.r0, 0);
}

TEST(TrueBits, SolveBudgetCountsFillsTheRoomWithTheBetterTier) {
  using Counts = std::array<int64_t, kNumTiers>;
  const Counts bytes = {4096, 1000, 700, 300, 0};  // fp16, u4, u2, n1, evicted
  auto planes = [&](const Counts& c) {
    int64_t p = 0;
    for (int t = 0; t < kNumTiers; ++t) p += c[t] * bytes[t];
    return p;
  };
  // 10 chunks, 1 pinned: every room from the pinned chunk alone to all-u4.
  for (int64_t room = 4096; room <= 4096 + 9 * 1000 + 1500; room += 37) {
    const BudgetCounts b = SolveBudgetCounts(10, 1, bytes, room);
    SCOPED_TRACE(room);
    EXPECT_EQ(b.counts[0], 1);
    EXPECT_EQ(b.counts[0] + b.counts[1] + b.counts[2] + b.counts[3] + b.counts[4], 10);
    EXPECT_FALSE(b.below);
    EXPECT_LE(planes(b.counts), room);
    // Two adjacent tiers at most, and maximal: one more chunk of the worse
    // one a tier up would not fit.
    int first = -1, last = -1;
    for (int t = 1; t < kNumTiers; ++t) {
      if (b.counts[t] > 0) {
        if (first < 0) first = t;
        last = t;
      }
    }
    EXPECT_LE(last - first, 1);
    if (last > 1) {
      Counts up = b.counts;
      --up[last];
      ++up[last - 1];
      EXPECT_GT(planes(up), room);
    }
    EXPECT_EQ(b.above, b.counts[1] == 9 && room - planes(b.counts) >= 300);
  }
  const BudgetCounts none = SolveBudgetCounts(10, 1, bytes, 4095);
  EXPECT_TRUE(none.below);
  EXPECT_EQ(none.counts[4], 9);
}

// usable = u4 and evicted only (mix=top): the solve mixes those two, never
// u2 or n1, and keeps as many u4 chunks as fit.
TEST(TrueBits, SolveBudgetCountsMixesOnlyTheUsableTiers) {
  using Counts = std::array<int64_t, kNumTiers>;
  const Counts bytes = {4096, 1000, 700, 300, 0};
  const TierMask top = 1u << static_cast<int>(Tier::kHigh);
  for (int64_t room = 0; room <= 9 * 1000 + 1500; room += 53) {
    SCOPED_TRACE(room);
    const BudgetCounts b = SolveBudgetCounts(9, 0, bytes, room, top);
    EXPECT_EQ(b.counts[2] + b.counts[3], 0);
    EXPECT_EQ(b.counts[1] + b.counts[4], 9);
    EXPECT_EQ(b.counts[1], std::min<int64_t>(9, room / 1000));
    EXPECT_FALSE(b.below);
    EXPECT_EQ(b.above, room - 9 * 1000 >= 1000);
  }
  // u4 and n1 usable: between all-u4 and all-n1 only those two.
  const TierMask u4n1 =
      (1u << static_cast<int>(Tier::kHigh)) | (1u << static_cast<int>(Tier::kLow));
  const BudgetCounts m = SolveBudgetCounts(9, 0, bytes, 9 * 300 + 3 * 700, u4n1);
  EXPECT_EQ(m.counts, (Counts{0, 3, 0, 6, 0}));
}

TEST(TrueBits, SmallHeadsHoldTheBudgetAfterPrefillAndDuringDecode) {
  // head_dim 8 (stories260K's): the lean layout mixes u4 with eviction; the
  // budget holds at every step, and after prefill it is spent (an eviction
  // frees the chunk's records and state too, which the solve counts) up to
  // kUnder and the next window's fp16 sums, which at 2 KV heads x D = 8 are
  // 2 bytes per 32 elements of a token, 0.5 bit (7.30 after prefill at
  // bits=8, where no chunk is evicted).
  // select=chunk: the whole-chunk solve this test is about (the small-head
  // default is now select=token, whose first event plans from an estimate and
  // lands further under B after the prefill: hqekv_token_test.cc).
  const KvGeometry g = Geometry(8, 2048);
  const double window = 8.0 * 2 / (g.n_kv_heads * g.head_dim * 2);
  for (double b : {3.4, 4.2, 5.4, 8.0}) {
    char spec[64];
    std::snprintf(spec, sizeof spec, "hqekv:bits=%g,select=chunk", b);
    SCOPED_TRACE(spec);
    const Trace t = RunTrace(spec, g, 1024, 160);
    EXPECT_LE(t.worst, b + kOver);
    EXPECT_GE(t.after_prefill, b - kUnder - window);
    EXPECT_EQ(t.note, "");
  }
}

// stories260K's heads (4 KV heads of D = 8) over `ppl`'s protocol: a
// 1536-token prefill and 512 decoded tokens. The end lands within 3% under
// B and no step is above B + 0.01 (issue 12: with 56-byte chunk records and
// the next window's sums reserved, bits=3.4 ended at 3.21 on stories260K).
TEST(TrueBits, SmallHeadsEndWithin3PercentOfTheBudget) {
  KvGeometry g = testing::SmallGeometry(2, 8, 4, 8);
  g.max_ctx = 2048;
  for (double b : {3.4, 4.2, 5.4, 8.0}) {
    if (test::kSanitized && b != 3.4 && b != 8.0) continue;  // two budgets there (minutes)
    char spec[64];
    std::snprintf(spec, sizeof spec, "hqekv:bits=%g", b);
    SCOPED_TRACE(spec);
    const Trace t = RunTrace(spec, g, 1536, 511);
    EXPECT_LE(t.worst, b + kOver);
    EXPECT_GE(t.end, b * 0.97);
    EXPECT_LE(t.end, b + kOver);
    EXPECT_EQ(t.note, "");
    std::printf("%s: after prefill %.3f, worst %.3f, end %.3f\n", spec, t.after_prefill, t.worst,
                t.end);
  }
}

// The end of a prefill + decode run lands within 3% of B (and under it at
// every step): issue 12's budget hit, on a small synthetic geometry (2
// layers, 2 KV heads, D = 64 and 128; 1024 + 600 tokens, so the run ends
// with an importance window open, as `ppl` does). What is left below B is
// the pool's page (4 KiB, 2.4% of a layer at 3.4 bits and 1624 tokens at
// D = 64: the held bytes move in pages) and the next window's sums, held
// from 13 tokens after an event. Below the all-lowest-tier cost (2.5 bits
// at D = 64) chunks are evicted, whole and for good: a step of a chunk
// and a page, so there the end is only within 6%. Above the all-u4 cost
// (5.4 and 8 bits) the slots come from the tier menu, whose neighbouring
// pairs differ by more bytes per chunk: within 4% (5.4 bits at D = 128
// ends 3.3% under B).
TEST(TrueBits, HqekvEndsWithin3PercentOfTheBudget) {
  for (int d : {64, 128}) {
    if (test::kSanitized && d == 128) continue;  // D = 64 only there (minutes)
    const KvGeometry g = Geometry(d, 2048);
    for (double b : {2.5, 3.4, 4.2, 5.4, 8.0}) {
      char spec[64];
      std::snprintf(spec, sizeof spec, "hqekv:bits=%g", b);
      SCOPED_TRACE(std::string(spec) + " D=" + std::to_string(d));
      auto c = MustMake(spec, g);
      ASSERT_NE(c, nullptr);
      Driver drv(c.get(), 7);
      drv.Step(1024, true, false);
      const double worst = drv.DecodePeakBits(600);
      const double end = c->Stats().bits_per_original();
      EXPECT_LE(worst, b + kOver);
      EXPECT_LE(std::fabs(end - b) / b, b < 3 && d == 64 ? 0.06 : (b > 5 ? 0.04 : 0.03))
          << "ends at " << end;
      EXPECT_EQ(c->BudgetNote(), "");
    }
  }
}

}  // namespace
}  // namespace hqekv::policy
