// HqeKV budgets hold during decode (issue 12 item 3): after a prompt, decode
// as many tokens again, one per step; at every compression event the tier
// histogram of every (layer, unit) stays within 5% (of the compressed,
// non-pinned chunks) of the configured ratios and of AllocateChunks, for K and
// for V, whatever the ranking. Before the fix the 4-bit share fell to a fraction
// of its budget: already-2-bit chunks ranked into 4-bit slots they could not
// use (downgrade-only store).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "policy/hqekv_cache.h"
#include "policy_harness.h"

namespace hqekv::policy {
namespace {

using testing::Driver;
using testing::MustMake;
using testing::SmallGeometry;

std::array<int64_t, kNumTiers> Histogram(const std::vector<Tier>& tiers, int64_t nb) {
  std::array<int64_t, kNumTiers> h{};
  for (Tier t : tiers) h[static_cast<int>(t)]++;
  h[static_cast<int>(Tier::kEvicted)] = nb - static_cast<int64_t>(tiers.size());
  return h;
}

void ExpectSharesHold(const HqekvCache& h, const KvGeometry& g, int units, const TierRatios& r,
                      const std::string& what) {
  const double ratio[4] = {r.r4, r.r2, r.r1, r.r0};
  for (int l = 0; l < g.n_layers; ++l) {
    const int64_t nb = h.chunks_compressed(l);
    const auto want = AllocateChunks(nb, r, 2);
    const double rest = static_cast<double>(nb - want[0]);
    for (int u = 0; u < units; ++u) {
      for (bool k : {true, false}) {
        const auto got = Histogram(k ? h.k_tiers(l, u) : h.v_tiers(l, u), nb);
        EXPECT_EQ(got[0], want[0]) << what;
        for (int t = 1; t < kNumTiers; ++t) {
          EXPECT_LE(std::fabs(got[t] - want[t]) / rest, 0.05)
              << what << " layer " << l << " unit " << u << (k ? " K" : " V") << " tier "
              << TierName(static_cast<Tier>(t)) << ": " << got[t] << " of " << nb;
          EXPECT_LE(std::fabs(got[t] / rest - ratio[t - 1]), 0.05)
              << what << " layer " << l << (k ? " K" : " V") << " tier " << t;
        }
      }
    }
  }
}

TEST(HqekvDecode, TierSharesHoldOverADecodeAsLongAsThePrompt) {
  const KvGeometry g = SmallGeometry(2, 4, 2, 16);
  const int prompt = 32 * 24;
  for (const std::string budget :
       {"ratios=0.5/0.5/0/0", "ratios=0.63/0.37/0/0", "nominal_bits=3.2", "nominal_bits=2",
        "ratios=0.7/0/0/0.3", "nominal_bits=3.2,per_head=1"}) {
    for (const std::string ranking : {"paper", "pooled", "random", "recency", "sink_recency"}) {
      // Every ranking at one budget (the fill does not depend on the scores);
      // the paper's at the others, to keep the test fast.
      if (budget != "nominal_bits=3.2" && ranking != "paper") continue;
      const std::string spec = "hqekv:" + budget + ",ranking=" + ranking;
      auto c = MustMake(spec, g);
      ASSERT_NE(c, nullptr);
      const auto* h = dynamic_cast<const HqekvCache*>(c.get());
      const int units = budget.find("per_head") != std::string::npos ? g.n_kv_heads : 1;
      const TierRatios r = h->ratios(0);
      Driver d(c.get(), 21);
      d.Step(prompt, true, false);
      ExpectSharesHold(*h, g, units, r, spec + " after prefill");
      for (int s = 0; s < prompt; ++s) {
        const int64_t nb0 = h->chunks_compressed(0);
        d.Step(1, false, false);
        if (h->chunks_compressed(0) != nb0) {
          ExpectSharesHold(*h, g, units, r, spec + " step " + std::to_string(s));
        }
      }
      EXPECT_EQ(h->chunks_compressed(0), 2 * prompt / 32) << spec;
    }
  }
}

// With sink=4 (off by default) a chunk holding the attention sink (position
// 0) keeps the best tier it can have: with fp16_chunks >= 1 it stays fp16
// through a long decode.
TEST(HqekvDecode, SinkChunkStaysFp16) {
  const KvGeometry g = SmallGeometry(2, 4, 2, 16);
  for (const char* spec :
       {"hqekv:nominal_bits=2,sink=4", "hqekv:ratios=0.7/0/0/0.3,ranking=random,sink=4",
        "hqekv:nominal_bits=3.2,ranking=recency,sink=4"}) {
    auto c = MustMake(spec, g);
    const auto* h = dynamic_cast<const HqekvCache*>(c.get());
    Driver d(c.get(), 22);
    d.Step(320, true, false);
    for (int s = 0; s < 640; ++s) d.Step(1, false, false);
    for (int l = 0; l < g.n_layers; ++l) {
      ASSERT_GT(h->store().NumChunks(l, 0), 0);
      EXPECT_EQ(h->store().Chunk(l, 0, 0).pos0, 0) << spec;
      EXPECT_EQ(h->k_tiers(l, 0)[0], Tier::kF16) << spec << " layer " << l;
      EXPECT_EQ(h->v_tiers(l, 0)[0], Tier::kF16) << spec << " layer " << l;
    }
  }
  // sink=0: no protection (recency then gives the fp16 slot to the newest chunk).
  auto c = MustMake("hqekv:ratios=0/1/0/0,fp16_chunks=1,sink=0,ranking=recency", g);
  const auto* h = dynamic_cast<const HqekvCache*>(c.get());
  Driver d(c.get(), 23);
  d.Step(320, true, false);
  EXPECT_EQ(h->k_tiers(0, 0)[0], Tier::kMid);
}

}  // namespace
}  // namespace hqekv::policy
