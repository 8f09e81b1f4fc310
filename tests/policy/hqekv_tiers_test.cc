// hqekv's tier layouts (issue 12, item 5) and the profiles shipped per model
// (item 7): bits= defaults to the lean layout (u4/u3/u2, V groups of
// head_dim, Hadamard rotation, no pinned fp16 chunks), layout=paper keeps the
// paper's, tiers= / vgroup= choose the formats, and bits=B on a model with a
// profile shipped for B uses it (checked against the model).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "policy/factory.h"
#include "policy/hqekv_cache.h"
#include "policy/profile.h"
#include "policy/true_bits.h"
#include "policy_harness.h"
#include "../temp_path.h"

namespace hqekv::policy {
namespace {

using testing::MustMake;

KvGeometry Geometry(int d = 64, int max_ctx = 2048) {
  KvGeometry g = testing::SmallGeometry(2, 4, 2, d);
  g.max_ctx = max_ctx;
  return g;
}

HqekvCache* AsHqekv(const std::unique_ptr<KvCache>& c) {
  return dynamic_cast<HqekvCache*>(c.get());
}

// Plane bytes of one chunk of the named K and V formats, as the byte model counts them.
int64_t Planes(const HqekvCache& h, const char* k, const char* v) {
  return ChunkPlaneBytes(h.cost_model().layout, *quant::ParseFormat(k), *quant::ParseFormat(v));
}

TEST(HqekvTiers, BitsDefaultsToTheLeanLayoutAndPaperKeepsThePapers) {
  // menu=off: the lean ladder (the default takes the tier menu at every
  // budget where its block formats fit, hqekv_menu_test.cc).
  auto lean = MustMake("hqekv:bits=4,menu=off", Geometry(64));
  const HqekvCache* h = AsHqekv(lean);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->pinned_chunks(), 0);
  const auto& tb = h->cost_model().tier_bytes;
  EXPECT_EQ(tb[static_cast<int>(Tier::kHigh)], Planes(*h, "u4:chan:had", "u4:tok:g=64:had"));
  EXPECT_EQ(tb[static_cast<int>(Tier::kMid)], Planes(*h, "u3:chan:had", "u3:tok:g=64:had"));
  EXPECT_EQ(tb[static_cast<int>(Tier::kLow)], Planes(*h, "u2:chan:had", "u2:tok:g=64:had"));

  for (const char* spec : {"hqekv:bits=4,layout=paper", "hqekv:ratios=0.5/0.5/0/0"}) {
    SCOPED_TRACE(spec);
    auto paper = MustMake(spec, Geometry(64));
    const HqekvCache* p = AsHqekv(paper);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->pinned_chunks(), 2);
    const auto& pb = p->cost_model().tier_bytes;
    EXPECT_EQ(pb[static_cast<int>(Tier::kHigh)], Planes(*p, "u4:chan", "u4:tok"));
    EXPECT_EQ(pb[static_cast<int>(Tier::kMid)], Planes(*p, "u2:chan", "u2:tok"));
    EXPECT_EQ(pb[static_cast<int>(Tier::kLow)], Planes(*p, "n1:chan", "n1:tok"));
  }
  // Keys given explicitly win over the layout's defaults.
  auto mixed =
      MustMake("hqekv:bits=4,fp16_chunks=1,vgroup=16,hadamard=0,tiers=u8/u4/n2", Geometry(64));
  const HqekvCache* m = AsHqekv(mixed);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->pinned_chunks(), 1);
  EXPECT_EQ(m->cost_model().tier_bytes[static_cast<int>(Tier::kHigh)],
            Planes(*m, "u8:chan", "u8:tok:g=16"));
  EXPECT_EQ(m->cost_model().tier_bytes[static_cast<int>(Tier::kLow)],
            Planes(*m, "n2:chan", "n2:tok:g=16"));
  // The lean tiers are cheaper per chunk than the paper's at the same names.
  EXPECT_LT(tb[static_cast<int>(Tier::kHigh)],
            AsHqekv(MustMake("hqekv:bits=4,layout=paper", Geometry(64)))
                ->cost_model()
                .tier_bytes[static_cast<int>(Tier::kHigh)]);
}

// menu=off: a budget above all-u4 moves the lean tiers one width up
// (u8/u4/u3) instead of saturating at all-u4; at or below all-u4 they stay
// u4/u3/u2, and tiers= given by the user is never replaced (the default menu
// is tested in hqekv_menu_test.cc).
TEST(HqekvTiers, BudgetsAboveAllU4UseTheWiderLeanTiers) {
  const double all_u4 = AsHqekv(MustMake("hqekv:bits=4,menu=off", Geometry(64)))
                            ->cost_model()
                            .TierBits(Geometry(64).max_ctx)[0];
  auto low = MustMake("hqekv:bits=" + std::to_string(all_u4 * 0.98) + ",menu=off", Geometry(64));
  EXPECT_EQ(AsHqekv(low)->cost_model().tier_bytes[static_cast<int>(Tier::kHigh)],
            Planes(*AsHqekv(low), "u4:chan:had", "u4:tok:g=64:had"));
  auto high = MustMake("hqekv:bits=8,menu=off", Geometry(64));
  const HqekvCache* h = AsHqekv(high);
  ASSERT_NE(h, nullptr);
  const auto& tb = h->cost_model().tier_bytes;
  EXPECT_EQ(tb[static_cast<int>(Tier::kHigh)], Planes(*h, "u8:chan:had", "u8:tok:g=64:had"));
  EXPECT_EQ(tb[static_cast<int>(Tier::kMid)], Planes(*h, "u4:chan:had", "u4:tok:g=64:had"));
  EXPECT_EQ(tb[static_cast<int>(Tier::kLow)], Planes(*h, "u3:chan:had", "u3:tok:g=64:had"));
  auto given = MustMake("hqekv:bits=8,tiers=u4/u3/u2", Geometry(64));
  EXPECT_EQ(AsHqekv(given)->cost_model().tier_bytes[static_cast<int>(Tier::kHigh)],
            Planes(*AsHqekv(given), "u4:chan:had", "u4:tok:g=64:had"));
}

// head_dim < 32 (stories260K has 8): lean quantizes V per channel, does not
// rotate, and the bits= solve mixes u4 with eviction only (never u3/u2), the
// sink chunk kept; explicit keys win. (select=chunk: the small-head
// default is now select=token, which evicts tokens, not chunks; its own
// tests are in hqekv_token_test.cc.)
TEST(HqekvTiers, SmallHeadsQuantizeVPerChannelAndMixU4WithEviction) {
  auto c = MustMake("hqekv:bits=4.2,select=chunk", Geometry(8));
  HqekvCache* h = AsHqekv(c);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->cost_model().tier_bytes[static_cast<int>(Tier::kHigh)],
            Planes(*h, "u4:chan", "u4:chan"));
  testing::Driver drv(c.get(), 3);
  drv.Step(1024, true, false);
  for (int l = 0; l < 2; ++l) {
    const std::vector<Tier> k = h->k_tiers(l, 0), v = h->v_tiers(l, 0);
    EXPECT_LT(static_cast<int64_t>(k.size()), h->chunks_compressed(l)) << "layer " << l;
    EXPECT_GT(k.size(), 0u);
    for (size_t i = 0; i < k.size(); ++i) {
      EXPECT_EQ(k[i], Tier::kHigh) << "layer " << l << " chunk " << i;
      EXPECT_EQ(v[i], Tier::kHigh) << "layer " << l << " chunk " << i;
    }
  }
  // The sink: the chunk of position 0 is still held in every layer.
  for (int l = 0; l < 2; ++l) {
    std::vector<int32_t> pos;
    h->store().KeptPositions(l, 0, &pos);
    ASSERT_FALSE(pos.empty());
    EXPECT_EQ(pos[0], 0) << "layer " << l;
  }
  auto ladder = MustMake("hqekv:bits=4.2,vgrouping=tok,hadamard=1,mix=ladder", Geometry(8));
  EXPECT_EQ(AsHqekv(ladder)->cost_model().tier_bytes[static_cast<int>(Tier::kHigh)],
            Planes(*AsHqekv(ladder), "u4:chan:had", "u4:tok:g=8:had"));
  testing::Driver drv2(ladder.get(), 3);
  drv2.Step(1024, true, false);
  bool lower = false;  // the ladder reaches u3 / u2 at this budget
  for (Tier t : AsHqekv(ladder)->k_tiers(0, 0)) lower = lower || t == Tier::kMid || t == Tier::kLow;
  EXPECT_TRUE(lower);
  // head_dim 32 and up keep V per token.
  auto d32 = MustMake("hqekv:bits=4.2,menu=off", Geometry(32));
  EXPECT_EQ(AsHqekv(d32)->cost_model().tier_bytes[static_cast<int>(Tier::kHigh)],
            Planes(*AsHqekv(d32), "u4:chan:had", "u4:tok:g=32:had"));
}

// Small heads above all-u4 (mix=auto): the solve takes every slot, so a
// short prefill keeps every token; before, the room for the fp16
// residual's growth came from an evicted chunk (stories260K ctx 512 after a
// 256-token prefill at 11.49 bits: 1 of 8 chunks evicted, KL 11.7x int8's;
// every slot: 0.41x). The budget holds after the prefill and at every step.
TEST(HqekvTiers, SmallHeadsAboveAllU4KeepEveryTokenOfAShortPrefill) {
  const KvGeometry g = Geometry(8, 512);
  auto run = [&](const std::string& spec, double b, bool* evicted) {
    auto c = MustMake(spec, g);
    testing::Driver d(c.get(), 5);
    d.Step(256, true, false);
    double worst = c->Stats().bits_per_original();
    *evicted = false;
    for (int i = 0; i < 200; ++i) {
      for (const auto& l : c->Stats().layers) {
        if (l.k_tiers.count("evicted") || l.v_tiers.count("evicted")) *evicted = true;
      }
      d.Step(1, false, false);
      worst = std::max(worst, c->Stats().bits_per_original());
    }
    EXPECT_LE(worst, b + 1e-9) << spec;
    std::printf("%s: worst %.3f evicted %d\n", spec.c_str(), worst, *evicted);
  };
  for (const double b : {10.5, 11.5, 13.0}) {
    bool evicted = true;
    run("hqekv:bits=" + std::to_string(b), b, &evicted);
    EXPECT_FALSE(evicted) << "bits=" << b;
  }
  bool top_evicted = false;  // mix=top given: the top two slots and eviction
  run("hqekv:bits=11.5,menu=on,mix=top", 11.5, &top_evicted);
  EXPECT_TRUE(top_evicted);
}

// Small heads above all-u4: the lean ladder u8/u4/u3 (K and V ranked apart)
// up to 1 bit under the all-u8 cost estimate, the tier menu from there, and
// the menu offers nothing under 4 bits (u8 K with u3 V measured 3.5x the KL
// of the u8 / u4 mix on stories260K at 7.8 bits).
TEST(HqekvTiers, SmallHeadsTakeTheLadderThenTheMenuWithoutNarrowFormats) {
  const KvGeometry g = Geometry(8, 2048);
  const double all_u4 = AsHqekv(MustMake("hqekv:bits=4", g))->cost_model().TierBits(2048)[0];
  const double all_u8 =
      AsHqekv(MustMake("hqekv:bits=4,tiers=u8/u4/u3", g))->cost_model().TierBits(2048)[0];
  ASSERT_GT(all_u8 - 1.0, all_u4 + 1.0);
  auto held = [&](double b) {
    const std::string spec = "hqekv:bits=" + std::to_string(b);
    auto c = MustMake(spec, g);
    testing::Driver d(c.get(), 9);
    d.Step(1536, true, false);
    for (int i = 0; i < 64; ++i) d.Step(1, false, false);
    EXPECT_LE(c->Stats().bits_per_original(), b + 1e-9) << spec;
    std::set<std::string> seen;
    for (const auto& l : c->Stats().layers) {
      for (const auto* m : {&l.k_tiers, &l.v_tiers}) {
        for (const auto& [name, cells] : *m) seen.insert(name);
      }
    }
    std::string all;
    for (const auto& n : seen) all += n + " ";
    std::printf("%s: %s\n", spec.c_str(), all.c_str());
    return seen;
  };
  for (const double b : {all_u4 + 0.3, all_u4 + 1.0}) {  // the ladder
    auto c = MustMake("hqekv:bits=" + std::to_string(b), g);
    const HqekvCache* h = AsHqekv(c);
    const auto& tb = h->cost_model().tier_bytes;
    EXPECT_EQ(tb[static_cast<int>(Tier::kHigh)], Planes(*h, "u8:chan", "u8:chan")) << b;
    EXPECT_EQ(tb[static_cast<int>(Tier::kMid)], Planes(*h, "u4:chan", "u4:chan")) << b;
    EXPECT_EQ(tb[static_cast<int>(Tier::kLow)], Planes(*h, "u3:chan", "u3:chan")) << b;
    for (const auto& n : held(b)) {
      EXPECT_TRUE(n == "u8" || n == "u4" || n == "u3" || n == "evicted" || n == "residual") << n;
    }
  }
  for (const double b : {all_u8 - 0.5, all_u8 + 1.0, all_u8 + 3.0}) {  // the menu
    const std::set<std::string> seen = held(b);
    for (const char* low : {"u3", "u2", "u1", "n1", "n2", "evicted"}) {
      EXPECT_EQ(seen.count(low), 0u) << low << " at " << b;
    }
  }
  // Well above all-u8 the menu's fp16 or int8 take chunks.
  const std::set<std::string> top = held(all_u8 + 3.0);
  EXPECT_TRUE(top.count("fp16") || top.count("int8")) << "at " << all_u8 + 3.0;
}

TEST(HqekvTiers, BadTierListsGiveClearErrors) {
  const struct {
    const char* spec;
    const char* says;
  } kCases[] = {
      {"hqekv:bits=4,tiers=u4/u3", "three formats"},
      {"hqekv:bits=4,tiers=u4/u3/u2/n1", "three formats"},
      {"hqekv:bits=4,tiers=u4/f16/u2", "not a plain quantized format"},
      {"hqekv:bits=4,tiers=u4/u3:chan/u2", "not a plain quantized format"},
      {"hqekv:bits=4,vtiers=u4/u3", "three formats"},
      {"hqekv:bits=4,tiers=u4/u5/u2", "u5"},
      {"hqekv:bits=4,vgroup=48", "does not divide"},
  };
  for (const auto& k : kCases) {
    auto spec = ParseSpec(k.spec);
    ASSERT_TRUE(spec.ok()) << k.spec << ": " << spec.message();
    auto c = CreateCache(*spec, Geometry(64), CacheContext{});
    ASSERT_FALSE(c.ok()) << k.spec;
    EXPECT_NE(c.message().find(k.says), std::string::npos) << k.spec << ": " << c.message();
  }
}

// A profile shipped for (model, B) in DIR/<model>/hqekv-<B>-true.json.
class ShippedProfile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = hqekv::test::TempPath("hqekv_tiers_shipped");
    std::filesystem::remove_all(dir_);
    Profile p;
    p.model_name = "tiny";
    p.model_identity = "0123456789abcdef";
    p.n_layers = 2;
    p.budget_bits = 3.4;
    p.ratios = {0.25, 0.5, 0.125, 0.125};
    p.kv_options = "tiers=u8/u4/u2,vgroup=16,fp16_chunks=1";
    path_ = ShippedProfilePath(dir_, "tiny", 3.4);
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path());
    ASSERT_TRUE(SaveProfile(p, path_, false).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Result<std::unique_ptr<KvCache>> Make(const std::string& spec, const std::string& identity) {
    CacheContext ctx = ForModel("tiny", identity, 2);
    ctx.profiles_dir = dir_;
    return CreateCache(*ParseSpec(spec), Geometry(64), ctx);
  }

  std::string dir_, path_;
};

TEST_F(ShippedProfile, PathNamesTheModelAndTheBudget) {
  EXPECT_EQ(path_, dir_ + "/tiny/hqekv-3.4-true.json");
  EXPECT_EQ(ShippedProfilePath("profiles", "refmodel-4l", 5),
            "profiles/refmodel-4l/hqekv-5-true.json");
}

TEST_F(ShippedProfile, BitsOnTheRightModelUsesItsRatiosAndTiers) {
  auto c = Make("hqekv:bits=3.4", "0123456789abcdef");
  ASSERT_TRUE(c.ok()) << c.message();
  const HqekvCache* h = AsHqekv(*c);
  ASSERT_NE(h, nullptr);
  for (int l = 0; l < 2; ++l) {
    EXPECT_DOUBLE_EQ(h->ratios(l).r4, 0.25);
    EXPECT_DOUBLE_EQ(h->ratios(l).r0, 0.125);
  }
  EXPECT_EQ(h->pinned_chunks(), 1);
  EXPECT_EQ(h->cost_model().tier_bytes[static_cast<int>(Tier::kHigh)],
            Planes(*h, "u8:chan:had", "u8:tok:g=16:had"));  // kv_options + the lean rotation
  // A key the spec gives wins over the profile's.
  auto own = Make("hqekv:bits=3.4,fp16_chunks=3", "0123456789abcdef");
  ASSERT_TRUE(own.ok()) << own.message();
  EXPECT_EQ(AsHqekv(*own)->pinned_chunks(), 3);
  // No profile for this budget, or shipped=0: the byte-model solver.
  for (const char* spec : {"hqekv:bits=3.5", "hqekv:bits=3.4,shipped=0"}) {
    auto solved = Make(spec, "0123456789abcdef");
    ASSERT_TRUE(solved.ok()) << spec << ": " << solved.message();
    EXPECT_EQ(AsHqekv(*solved)->pinned_chunks(), 0) << spec;
    EXPECT_NE(AsHqekv(*solved)->ratios(0).r4, 0.25) << spec;
  }
}

TEST_F(ShippedProfile, AnotherModelUnderTheSameNameIsAClearError) {
  auto c = Make("hqekv:bits=3.4", "ffffffffffffffff");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("shipped profile"), std::string::npos) << c.message();
  EXPECT_NE(c.message().find(path_), std::string::npos) << c.message();
  EXPECT_NE(c.message().find("shipped=0"), std::string::npos) << c.message();
  EXPECT_TRUE(Make("hqekv:bits=3.4,shipped=0", "ffffffffffffffff").ok());
  EXPECT_TRUE(Make("hqekv:bits=3.4,force=1", "ffffffffffffffff").ok());
  // Another geometry: per-layer rows that do not match the layer count.
  Profile p = *LoadProfile(path_);
  p.per_layer = {p.ratios, p.ratios, p.ratios};
  ASSERT_TRUE(SaveProfile(p, path_, true).ok());
  auto rows = Make("hqekv:bits=3.4", "0123456789abcdef");
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.message().find("per_layer rows"), std::string::npos) << rows.message();
}

TEST_F(ShippedProfile, KvOptionsRoundTripAndBadOptionsAreNamed) {
  Profile p = *LoadProfile(path_);
  EXPECT_EQ(p.kv_options, "tiers=u8/u4/u2,vgroup=16,fp16_chunks=1");
  p.kv_options = "tiers=u8/u4/u2,bogus=1";
  ASSERT_TRUE(SaveProfile(p, path_, true).ok());
  auto c = Make("hqekv:bits=3.4", "0123456789abcdef");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("kv_options"), std::string::npos) << c.message();
  EXPECT_NE(c.message().find("bogus"), std::string::npos) << c.message();
}

}  // namespace
}  // namespace hqekv::policy
