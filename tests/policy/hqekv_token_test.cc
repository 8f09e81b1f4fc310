// hqekv select=token (issue 12, small heads): the residual's lowest-scored
// tokens (cumulative attention, as H2O) are evicted before the survivors are
// sealed into full quantized chunks. Checked here: bits=B holds at every
// decode step and ends within 3% under B at head_dim 8, the bytes held are
// the bytes counted, a saved state continues bit-identically, the tokens
// kept are the highest-scored ones, and bad settings are errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "policy/hqekv_cache.h"
#include "policy_harness.h"

namespace hqekv::policy {
namespace {

using testing::Driver;
using testing::MustMake;
using testing::SmallGeometry;
using testing::StoriesGeometry;

const HqekvCache* AsHqekv(const KvCache* c) { return dynamic_cast<const HqekvCache*>(c); }

TEST(HqekvToken, AutoSelectsTokensOnSmallHeadsOrWellUnderTheBottomSlot) {
  auto small = MustMake("hqekv:bits=4.2", StoriesGeometry(2));
  ASSERT_NE(small, nullptr);
  EXPECT_TRUE(AsHqekv(small.get())->token_select());
  auto chunk = MustMake("hqekv:bits=4.2,select=chunk", StoriesGeometry(2));
  ASSERT_NE(chunk, nullptr);
  EXPECT_FALSE(AsHqekv(chunk.get())->token_select());
  auto big = MustMake("hqekv:bits=4.2", SmallGeometry(2, 4, 2, 64));
  ASSERT_NE(big, nullptr);
  EXPECT_FALSE(AsHqekv(big.get())->token_select());
  auto forced = MustMake("hqekv:bits=4.2,select=token", SmallGeometry(2, 4, 2, 64));
  ASSERT_NE(forced, nullptr);
  EXPECT_TRUE(AsHqekv(forced.get())->token_select());
  // Above the all-u4 cost every token fits: auto keeps whole chunks (u8/u4).
  auto high = MustMake("hqekv:bits=8", StoriesGeometry(2));
  ASSERT_NE(high, nullptr);
  EXPECT_FALSE(AsHqekv(high.get())->token_select());
  EXPECT_EQ(high->Describe(), "hqekv:bits=8");
  // Fixed ratios place whole chunks (auto stays chunk).
  auto ratios = MustMake("hqekv:ratios=0.5/0/0/0.5", StoriesGeometry(2));
  ASSERT_NE(ratios, nullptr);
  EXPECT_FALSE(AsHqekv(ratios.get())->token_select());
}

// select=auto on heads >= 32: whole chunks down to a little under the
// all-bottom-slot cost, tokens below it (one switch point as B falls), and
// never when the spec fixes the selection, the ranking or per-head units.
// Token selection there holds B after a long prefill and at every step.
TEST(HqekvToken, WideHeadsSelectTokensWellUnderTheBottomSlot) {
  KvGeometry g = SmallGeometry(2, 4, 2, 64);
  g.max_ctx = 2048;
  auto token_at = [&](const std::string& spec) {
    auto c = MustMake(spec, g);
    return c != nullptr && AsHqekv(c.get())->token_select();
  };
  EXPECT_TRUE(token_at("hqekv:bits=2.5"));
  EXPECT_FALSE(token_at("hqekv:bits=4.2"));
  EXPECT_FALSE(token_at("hqekv:bits=2.5,select=chunk"));
  EXPECT_FALSE(token_at("hqekv:bits=2.5,ranking=recency"));
  EXPECT_FALSE(token_at("hqekv:bits=2.5,per_head=1"));
  EXPECT_FALSE(token_at("hqekv:bits=2.5,layout=paper"));
  // Contexts under 2048 tokens keep whole chunks (measured lower KL at 1024).
  g.max_ctx = 1024;
  EXPECT_FALSE(token_at("hqekv:bits=2.5"));
  g.max_ctx = 2048;
  int switches = 0;
  bool prev = true;
  for (double b = 2.0; b <= 4.5; b += 0.05) {
    const bool t = token_at("hqekv:bits=" + std::to_string(b));
    switches += t != prev;
    prev = t;
  }
  EXPECT_EQ(switches, 1);
  EXPECT_FALSE(prev);
  auto c = MustMake("hqekv:bits=2.5", g);
  ASSERT_NE(c, nullptr);
  Driver d(c.get(), 11);
  d.Step(1536, true, false);
  EXPECT_LE(c->Stats().bits_per_original(), 2.5 + 1e-9);
  EXPECT_LE(d.DecodePeakBits(300), 2.5 + 1e-9);
}

// select=auto in a short cache: whole chunks, since token selection's fp16
// recent window and open chunk (80 tokens) fill a 512-token cache's budget
// after a short prefill and nothing else is kept, while whole chunks hold the
// residual in int8 rows; with residual=f16 only from 4.1 bits.
TEST(HqekvToken, ShortCachesSelectChunks) {
  auto make = [](const std::string& spec, int max_ctx) {
    KvGeometry g = StoriesGeometry(2);
    g.max_ctx = max_ctx;
    return MustMake(spec, g);
  };
  EXPECT_FALSE(AsHqekv(make("hqekv:bits=5", 512).get())->token_select());
  EXPECT_FALSE(AsHqekv(make("hqekv:bits=4.1", 512).get())->token_select());
  EXPECT_FALSE(AsHqekv(make("hqekv:bits=4", 512).get())->token_select());
  EXPECT_FALSE(AsHqekv(make("hqekv:bits=3.4", 512).get())->token_select());
  EXPECT_FALSE(AsHqekv(make("hqekv:bits=4.1,residual=f16", 512).get())->token_select());
  EXPECT_TRUE(AsHqekv(make("hqekv:bits=4,residual=f16", 512).get())->token_select());
  EXPECT_TRUE(AsHqekv(make("hqekv:bits=3.4,residual=f16", 512).get())->token_select());
  {
    // A cache too short for whole chunks to reach B (128 tokens at D = 16:
    // their floor is ~5 bits) selects tokens, as before the int8 rows.
    KvGeometry g = SmallGeometry(2, 4, 2, 16);
    g.max_ctx = 128;
    auto c = MustMake("hqekv:bits=3.4", g);
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(AsHqekv(c.get())->token_select());
    EXPECT_FALSE(MakeKvCache("hqekv:bits=3.4,select=chunk", g).ok());
  }
  EXPECT_TRUE(AsHqekv(make("hqekv:bits=5", 2048).get())->token_select());
  EXPECT_TRUE(AsHqekv(make("hqekv:bits=5,recent=16", 512).get())->token_select());
  EXPECT_TRUE(AsHqekv(make("hqekv:bits=5,select=token", 512).get())->token_select());
  // After a 256-token prefill at 5 bits: chunks keep quantized tokens, token
  // selection only its fp16 residual; both hold B at every step.
  auto quantized_cells = [](const KvCache& c) {
    int64_t n = 0;
    for (const auto& l : c.Stats().layers) {
      for (const auto& [name, cells] : l.k_tiers) {
        if (name != "evicted" && name != "residual") n += cells;
      }
    }
    return n;
  };
  for (const char* spec : {"hqekv:bits=5", "hqekv:bits=5,select=token"}) {
    SCOPED_TRACE(spec);
    auto c = make(spec, 512);
    Driver d(c.get(), 7);
    d.Step(256, true, false);
    const int64_t after_prefill = quantized_cells(*c);
    EXPECT_LE(d.DecodePeakBits(200), 5.0 + 1e-9);
    if (AsHqekv(c.get())->token_select()) {
      EXPECT_EQ(after_prefill, 0);
    } else {
      EXPECT_GE(after_prefill, 64);
    }
  }
}

// sink=K keeps the first K tokens whatever their scores: they count against
// B when the selection sizes what it keeps (they were left out, and a
// 256-token prefill at 3.4 bits held 3.41 on stories260K).
TEST(HqekvToken, TheSinksTokensCountAgainstTheBudget) {
  for (const double b : {2.5, 3.4}) {
    for (const int sink : {1, 4, 16}) {
      KvGeometry g = StoriesGeometry(2);
      g.max_ctx = 512;
      const std::string spec =
          "hqekv:bits=" + std::to_string(b) + ",select=token,sink=" + std::to_string(sink);
      SCOPED_TRACE(spec);
      auto c = MustMake(spec, g);
      Driver d(c.get(), 11);
      d.Step(256, true, false);
      EXPECT_LE(d.DecodePeakBits(100), b + 1e-9);
      // The sink's tokens are still held (sink=16 at these budgets: not
      // always, a chunk of them is evicted when no sealed chunk fits B).
      if (sink > 4) continue;
      std::vector<int32_t> pos;
      AsHqekv(c.get())->store().KeptPositions(0, 0, &pos);
      ASSERT_GE(pos.size(), static_cast<size_t>(sink));
      for (int i = 0; i < sink; ++i) EXPECT_EQ(pos[i], i);
    }
  }
}

TEST(HqekvToken, BadSettingsAreErrors) {
  for (const char* spec :
       {"hqekv:ratios=0.5/0/0/0.5,select=token", "hqekv:nominal_bits=2,select=token",
        "hqekv:bits=4.2,select=token,per_head=1", "hqekv:bits=4.2,select=tokens",
        "hqekv:bits=4.2,recent=-1"}) {
    auto c = MakeKvCache(spec, StoriesGeometry(2));
    EXPECT_FALSE(c.ok()) << spec;
    if (!c.ok()) {
      const std::string m = c.message();
      EXPECT_TRUE(m.find("select") != std::string::npos || m.find("recent") != std::string::npos)
          << spec << ": " << m;
    }
  }
}

// A 512-token prompt and 1024 decoded tokens (twice the prompt), every step
// checked: <= B + 0.01 true bits per original element, and every step of the
// second half close under B (what fits is kept). Sealing 32 residual tokens
// into a u4 chunk frees ~27 bytes per token and head at once (fp16 K, V,
// position and sum vs codes, scales, record, uint16 position), 5% of a
// layer's budget at 3.4 bits, which the next ~25 steps' tokens fill again;
// the sealed chunks hold those bytes in fp16 until the tokens need them.
// Before, the cache dropped 4-6% under B after every seal and a run's end
// (ppl's 1536 + 511 tokens) fell 3.5-4% under B at 3.4 bits on stories260K:
// out of the Pareto study's ±3% window.
TEST(HqekvToken, HeadDim8HoldsTheBudgetOverALongDecode) {
  for (double b : {3.4, 4.2, 5.4}) {
    char spec[64];
    std::snprintf(spec, sizeof spec, "hqekv:bits=%g", b);
    SCOPED_TRACE(spec);
    auto c = MustMake(spec, StoriesGeometry(3));
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(AsHqekv(c.get())->token_select());
    Driver d(c.get(), 7);
    d.Step(512, true, false);
    double worst = c->Stats().bits_per_original(), low = worst;
    for (int i = 0; i < 1024; ++i) {
      d.Step(1, false, false);
      const double bits = c->Stats().bits_per_original();
      worst = std::max(worst, bits);
      if (i >= 512) low = std::min(low, bits);
    }
    const double end = c->Stats().bits_per_original();
    std::printf("%s: worst %.3f lowest of the second half %.3f end %.3f bits/original\n", spec,
                worst, low, end);
    EXPECT_LE(worst, b + 0.01);
    EXPECT_GE(low, b * 0.965);
    EXPECT_GE(end, b * 0.965);
    EXPECT_EQ(c->BudgetNote(), "");
    // Tokens were evicted (the budget binds) and the sealed chunks are u4.
    const KvStats st = c->Stats();
    EXPECT_GT(st.layers[0].k_tiers.count("evicted"), 0u);
    EXPECT_GT(st.layers[0].k_tiers.count("u4"), 0u);
  }
}

// Stats() == the bytes every allocation counted, at every step (the residual
// has no reserve and the fp32 residual sums are policy state).
TEST(HqekvToken, HeldBytesAreCountedBytes) {
  auto c = MustMake("hqekv:bits=4.2", StoriesGeometry(2));
  ASSERT_NE(c, nullptr);
  const auto* sc = AsHqekv(c.get());
  Driver d(c.get(), 3);
  auto check = [&](const std::string& when) {
    const KvStats st = c->Stats();
    for (int l = 0; l < c->geometry().n_layers; ++l)
      ASSERT_EQ(st.layers[l].bytes.total(), c->LayerAllocatedBytes(l)) << when << " layer " << l;
    EXPECT_GT(sc->StateAllocatedBytes(0), 0) << when;
  };
  d.Step(300, true, false);
  check("after prefill");
  for (int i = 0; i < 120; ++i) {
    d.Step(1, false, false);
    check("step " + std::to_string(i));
  }
  d.Step(5, false, false);
  check("after a 5-token batch");
}

// Saved mid-decode, a restored cache continues bit-identically (attention
// outputs and bytes), the residual's fp32 sums included.
TEST(HqekvToken, StateRoundTripContinuesBitIdentically) {
  const KvGeometry g = StoriesGeometry(2);
  auto a = MustMake("hqekv:bits=4.2", g);
  ASSERT_NE(a, nullptr);
  Driver da(a.get(), 11);
  da.Step(400, true, false);
  for (int i = 0; i < 45; ++i) da.Step(1, false, false);  // residual sums open
  std::string state;
  ASSERT_TRUE(a->SaveState(&state).ok());
  auto b = MustMake("hqekv:bits=4.2", g);
  ASSERT_NE(b, nullptr);
  const Status st = b->LoadState(state);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(b->Stats().bytes.total(), a->Stats().bytes.total());
  // The same rows into both: one driver per cache, the same seed.
  Driver ea(a.get(), 5), eb(b.get(), 5);
  ea.next_pos_ = eb.next_pos_ = da.next_pos_;
  for (int i = 0; i < 100; ++i) {
    ea.Step(1, false, false);
    eb.Step(1, false, false);
    ASSERT_EQ(ea.last_out_, eb.last_out_) << "step " << i;
    ASSERT_EQ(a->Stats().bytes.total(), b->Stats().bytes.total()) << "step " << i;
  }
}

// Every 5th prompt token carries a key aligned with every query, so the
// prompt attends to it far more than to the others: after the prefill event
// all of them are kept while most other judged tokens are evicted.
TEST(HqekvToken, KeepsTheHighestScoredTokens) {
  const KvGeometry g = StoriesGeometry(1);
  auto c = MustMake("hqekv:bits=4.2,recent=32", g);
  ASSERT_NE(c, nullptr);
  const int D = g.head_dim, n = 640;
  Driver d(c.get(), 5);
  d.fill = [&](int, const std::vector<int32_t>& pos, std::vector<float>* k, std::vector<float>* v,
               std::vector<float>* q) {
    for (size_t i = 0; i < pos.size(); ++i) {
      for (int h = 0; h < g.n_q_heads; ++h) {
        for (int e = 0; e < D; ++e) (*q)[(i * g.n_q_heads + h) * D + e] = e == 0 ? 3.0f : 0.0f;
      }
      for (int h = 0; h < g.n_kv_heads; ++h) {
        float* kr = &(*k)[(i * g.n_kv_heads + h) * D];
        for (int e = 0; e < D; ++e) kr[e] *= 0.3f;
        if (pos[i] % 5 == 0) kr[0] = 4.0f;
      }
    }
  };
  d.Step(n, true, false);
  const auto* hq = AsHqekv(c.get());
  std::vector<int32_t> kept;
  hq->store().KeptPositions(0, 0, &kept);
  const std::set<int32_t> s(kept.begin(), kept.end());
  int heavy_kept = 0, light_kept = 0, light = 0;
  for (int p = 0; p < n - 32; ++p) {  // the newest 32 are not judged
    if (p % 5 == 0) {
      heavy_kept += s.count(p);
    } else {
      ++light;
      light_kept += s.count(p);
    }
  }
  EXPECT_EQ(heavy_kept, (n - 32 + 4) / 5) << "every high-attention token is kept";
  EXPECT_LT(light_kept, light / 2) << "most low-attention tokens are evicted";
  EXPECT_GT(static_cast<int>(kept.size()), (n - 32) / 5);  // the budget is spent
  // Each KV head chooses by its own sums, the same number of tokens (the
  // chunks stay aligned across heads).
  for (int h = 1; h < g.n_kv_heads; ++h) {
    std::vector<int32_t> other;
    hq->store().KeptPositions(0, h, &other);
    EXPECT_EQ(other.size(), kept.size()) << "head " << h;
    EXPECT_EQ(hq->store().NumChunks(0, h), hq->store().NumChunks(0, 0)) << "head " << h;
  }
}

}  // namespace
}  // namespace hqekv::policy
