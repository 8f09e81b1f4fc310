// Every policy against the naive reference (dequantize the kept tokens to
// fp64, attend), hand-built eviction patterns, budgets over long decodes,
// determinism, Reset, and creation errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "policy/budget.h"
#include "policy/hqekv_cache.h"
#include "policy/quant_cache.h"
#include "policy_harness.h"
#include "policy/selection.h"
#include "../temp_path.h"

namespace hqekv::policy {
namespace {

using testing::Driver;
using testing::MustMake;
using testing::SmallGeometry;

// Attention over the compressed cache equals fp64 attention over the
// dequantized kept tokens: fused dequant-dot in fp32 vs fp64 reference.
// Tolerance 2e-4 absolute (outputs are O(1): averages of N(0,1) values).
TEST(PolicyCache, EveryPolicyMatchesTheNaiveReference) {
  const char* specs[] = {"fp8",
                         "fp8:format=e5m2",
                         "int8",
                         "kivi:nominal_bits=2,residual=32",
                         "kivi:nominal_bits=4",
                         "streaming:sink=4,window=40",
                         "h2o:keep=0.5",
                         "snapkv:keep=0.4,window=8",
                         "pyramid:keep=0.4,window=8",
                         "hqekv:nominal_bits=2",
                         "hqekv:nominal_bits=3.2,per_head=1",
                         "hqekv:nominal_bits=2.8,hadamard=1",
                         "h2o:bits=4",
                         "snapkv:bits=6,window=8"};
  for (const char* spec : specs) {
    auto c = MustMake(spec, SmallGeometry());
    ASSERT_NE(c, nullptr);
    Driver d(c.get(), 7);
    double worst = d.Step(150, true, true);
    for (int s = 0; s < 80; ++s) worst = std::max(worst, d.Step(1, false, true));
    EXPECT_LT(worst, 2e-4) << spec;
    const KvStats st = c->Stats();
    EXPECT_GT(st.kept_elements, 0) << spec;
    EXPECT_EQ(st.original_elements, 2LL * 2 * 230 * 32 * 2) << spec;  // layers*heads*tokens*D*2
  }
}

// Quantization policies also stay close to exact attention over the original
// values (loose bounds: they are lossy by design; fp16 output differences of
// averages of N(0,1) values). KIVI-4's bound is half a 4-bit step of a
// typical V group (32 N(0,1) values span about 4.1 sigma: step 4.1 / 15):
// measured 0.11; a 2-bit cache (step 4.1 / 3, measured 0.72) must fail it.
double WorstDecodeError(const char* spec) {
  const KvGeometry g = SmallGeometry(1, 4, 2, 32);
  auto c = MustMake(spec, g);
  auto ref = MustMake("fp32", g);
  Driver a(c.get(), 3), b(ref.get(), 3);
  a.Step(96, true, false);
  b.Step(96, true, false);
  for (int s = 0; s < 40; ++s) {
    a.Step(1, false, false);
    b.Step(1, false, false);
  }
  const size_t from = 96 * 4 * 32;  // decode outputs only (prefill is exact)
  double worst = 0;
  for (size_t i = from; i < a.last_out_.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(a.last_out_[i] - b.last_out_[i])));
  }
  return worst;
}

TEST(PolicyCache, QuantizersStayCloseToExactAttention) {
  const double kHalfU4Step = 0.5 * 4.1 / 15;
  struct Case {
    const char* spec;
    double tol;
  } cases[] = {{"int8", 0.02}, {"fp8", 0.08}, {"kivi:nominal_bits=4,residual=32", kHalfU4Step}};
  for (const auto& cs : cases) {
    const double worst = WorstDecodeError(cs.spec);
    EXPECT_LT(worst, cs.tol) << cs.spec;
    EXPECT_GT(worst, 0.0) << cs.spec;  // it is really compressed
  }
  EXPECT_GT(WorstDecodeError("kivi:nominal_bits=2,residual=32"),
            kHalfU4Step);  // the bound tells 4 from 2 bits
}

// fp8:format=e5m2 (vLLM's fp8_e5m2) really stores E5M2 codes: one mantissa
// bit fewer than E4M3, so its decode error is larger, within twice fp8's bound.
TEST(PolicyCache, Fp8E5m2IsCoarserThanE4m3) {
  const double e4m3 = WorstDecodeError("fp8"), e5m2 = WorstDecodeError("fp8:format=e5m2");
  std::printf("worst decode error: fp8 e4m3 %.4f, e5m2 %.4f\n", e4m3, e5m2);
  EXPECT_GT(e5m2, 1.3 * e4m3);
  EXPECT_LT(e5m2, 0.16);
}

TEST(PolicyCache, PrefillAttentionIsExact) {
  const KvGeometry g = SmallGeometry();
  auto c = MustMake("hqekv:nominal_bits=2", g);
  auto ref = MustMake("fp16", g);
  Driver a(c.get(), 11), b(ref.get(), 11);
  a.Step(100, true, false);
  b.Step(100, true, false);
  ASSERT_EQ(a.last_out_.size(), b.last_out_.size());
  // Same fp16 values, both fp32 softmax: equal up to summation order.
  for (size_t i = 0; i < a.last_out_.size(); ++i) {
    ASSERT_NEAR(a.last_out_[i], b.last_out_[i], 1e-5) << i;
  }
}

std::vector<int32_t> Kept(const KvCache& c, int layer, int head) {
  std::vector<int32_t> p;
  dynamic_cast<const StoreBackedCache&>(c).store().KeptPositions(layer, head, &p);
  return p;
}

TEST(PolicyCache, StreamingKeepsSinkAndWindow) {
  auto c = MustMake("streaming:sink=2,window=5", SmallGeometry(1, 2, 1, 8));
  Driver d(c.get(), 1);
  d.Step(10, true, false);
  EXPECT_EQ(Kept(*c, 0, 0), (std::vector<int32_t>{0, 1, 5, 6, 7, 8, 9}));
  for (int s = 0; s < 40; ++s) d.Step(1, false, false);
  EXPECT_EQ(Kept(*c, 0, 0), (std::vector<int32_t>{0, 1, 45, 46, 47, 48, 49}));
}

// Unit vector e_0 scaled: token `hot` has key 8 e_0, every query is e_0, so
// the hot token takes almost all of every visible query's attention.
void MakeHot(std::set<int32_t> hot, Driver* d, int D) {
  d->fill = [hot, D](int, const std::vector<int32_t>& pos, std::vector<float>* k,
                     std::vector<float>* v, std::vector<float>* q) {
    const int n = static_cast<int>(pos.size());
    const int hk = static_cast<int>(k->size()) / (n * D),
              hq = static_cast<int>(q->size()) / (n * D);
    for (int i = 0; i < n; ++i) {
      for (int h = 0; h < hk; ++h) {
        float* kr = &(*k)[(static_cast<size_t>(i) * hk + h) * D];
        for (int e = 0; e < D; ++e) kr[e] *= 0.01f;
        if (hot.count(pos[i])) kr[0] = 8.0f * std::sqrt(static_cast<float>(D));
      }
      for (int h = 0; h < hq; ++h) {
        float* qr = &(*q)[(static_cast<size_t>(i) * hq + h) * D];
        std::fill(qr, qr + D, 0.0f);
        qr[0] = 1.0f;
      }
    }
  };
}

TEST(PolicyCache, H2oKeepsTheHeavyHittersAndTheRecentWindow) {
  auto c = MustMake("h2o:heavy=2,recent=3", SmallGeometry(1, 2, 1, 8));
  Driver d(c.get(), 2);
  MakeHot({3, 9}, &d, 8);
  d.Step(12, true, false);
  // Recent: 9, 10, 11. Heavy among 0..8: token 3 (every later query), then
  // token 0 (queries 0..2 see only tokens 0..2: 1 + 1/2 + 1/3).
  EXPECT_EQ(Kept(*c, 0, 0), (std::vector<int32_t>{0, 3, 9, 10, 11}));
  for (int s = 0; s < 5; ++s) d.Step(1, false, false);
  // Now 3 and 9 share every query's attention: they are the heavy hitters.
  EXPECT_EQ(Kept(*c, 0, 0), (std::vector<int32_t>{3, 9, 14, 15, 16}));
}

TEST(PolicyCache, SnapKvKeepsTheWindowsFavouritesOnce) {
  // 40-token prompt, window 8, keep 0.25 -> 10 tokens: the window + 2.
  auto c = MustMake("snapkv:keep=0.25,window=8,kernel=1", SmallGeometry(2, 4, 2, 8));
  Driver d(c.get(), 3);
  MakeHot({5, 20}, &d, 8);
  d.Step(40, true, false);
  const std::vector<int32_t> want = {5, 20, 32, 33, 34, 35, 36, 37, 38, 39};
  for (int l = 0; l < 2; ++l) {
    for (int h = 0; h < 2; ++h) EXPECT_EQ(Kept(*c, l, h), want) << l << " " << h;
  }
  // Decode tokens are appended unchanged, nothing else is evicted.
  for (int s = 0; s < 50; ++s) d.Step(1, false, false);
  std::vector<int32_t> after = want;
  for (int p = 40; p < 90; ++p) after.push_back(p);
  EXPECT_EQ(Kept(*c, 1, 1), after);
}

TEST(PolicyCache, SnapKvPoolingKeepsNeighbours) {
  auto c = MustMake("snapkv:keep=0.25,window=8,kernel=3", SmallGeometry(1, 2, 1, 8));
  Driver d(c.get(), 4);
  MakeHot({20}, &d, 8);
  d.Step(44, true, false);  // budget 11 = window 8 + 3: 19, 20, 21 by pooling
  EXPECT_EQ(Kept(*c, 0, 0), (std::vector<int32_t>{19, 20, 21, 36, 37, 38, 39, 40, 41, 42, 43}));
}

TEST(PolicyCache, PyramidBudgetsPerLayer) {
  const KvGeometry g = SmallGeometry(4, 2, 1, 8);
  auto c = MustMake("pyramid:keep=0.5,window=8,beta=4", g);
  Driver d(c.get(), 5);
  d.Step(64, true, false);  // mean budget 32 = 8 + 24 extra
  const std::vector<int64_t> extra = PyramidBudgets(24, 4, 4);
  int64_t total = 0;
  for (int l = 0; l < 4; ++l) {
    const auto k = Kept(*c, l, 0);
    EXPECT_EQ(static_cast<int64_t>(k.size()), extra[l] + 8) << l;
    total += static_cast<int64_t>(k.size());
    // The observation window is always kept.
    EXPECT_EQ(std::vector<int32_t>(k.end() - 8, k.end()),
              (std::vector<int32_t>{56, 57, 58, 59, 60, 61, 62, 63}));
  }
  EXPECT_EQ(total, 4 * 32);
  EXPECT_GT(Kept(*c, 0, 0).size(), Kept(*c, 3, 0).size());
}

// keep=f of a prompt below the observation window (as a context shift's
// re-prefill of a short window gives): the window is kept and BudgetNote says
// so. Before, EndBatch failed, ending a generation at its first context shift.
TEST(PolicyCache, SnapKvBudgetBelowTheWindowKeepsTheWindowAndSaysSo) {
  auto c = MustMake("snapkv:keep=0.1,window=32", SmallGeometry(1, 2, 1, 8));
  const KvGeometry& g = c->geometry();
  std::vector<float> k(100 * g.n_kv_heads * 8, 0.1f), v(k), q(100 * g.n_q_heads * 8, 0.1f),
      out(q.size());
  std::vector<int32_t> pos(100);
  for (int i = 0; i < 100; ++i) pos[i] = i;
  ASSERT_TRUE(c->Append(0, k.data(), v.data(), pos.data(), 100).ok());
  ASSERT_TRUE(c->Attend(0, q.data(), pos.data(), 100, out.data()).ok());
  const Status s = c->EndBatch(100, true);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_NE(c->BudgetNote().find("structural minimum"), std::string::npos) << c->BudgetNote();
}

// Budgets hold over a long decode (2000 steps).
TEST(PolicyCache, BudgetsHoldOverALongDecode) {
  const KvGeometry g = SmallGeometry(1, 2, 1, 16);
  {
    auto c = MustMake("h2o:keep=0.2", g);
    Driver d(c.get(), 8);
    d.Step(64, true, false);
    for (int s = 0; s < 2000; ++s) {
      d.Step(1, false, false);
      const int64_t seen = 65 + s;
      ASSERT_LE(static_cast<int64_t>(Kept(*c, 0, 0).size()), seen / 5) << s;
    }
    EXPECT_EQ(static_cast<int64_t>(Kept(*c, 0, 0).size()), 2064 / 5);
  }
  {
    auto c = MustMake("streaming:sink=4,window=60", g);
    Driver d(c.get(), 9);
    d.Step(64, true, false);
    int64_t early = 0;
    for (int s = 0; s < 2000; ++s) {
      d.Step(1, false, false);
      // Same phase of the 32-token sealing cycle as the last step (1999):
      // the fp16 residual is held at its exact size, so the bytes vary a
      // little within a cycle.
      if (s == 111) early = c->Stats().bytes.total();
    }
    EXPECT_EQ(Kept(*c, 0, 0).size(), 64u);
    EXPECT_LE(c->Stats().bytes.total(), early);  // constant memory
  }
  for (const char* spec : {"h2o:bits=4", "streaming:bits=3"}) {
    auto c = MustMake(spec, g);
    auto parsed = ParseSpec(spec);
    const double bits = parsed->Num("bits");
    Driver d(c.get(), 10);
    d.Step(64, true, false);
    for (int s = 0; s < 2000; ++s) {
      d.Step(1, false, false);
      // From 500 tokens on: below that, the store's fixed costs (a 4 KiB page
      // per size class at D = 16) exceed the whole budget.
      if (s >= 500 && (s % 50 == 0 || s == 1999)) {
        const KvStats st = c->Stats();
        ASSERT_LE(st.bits_per_original(), bits + 1e-9) << spec << " step " << s;
      }
    }
    // What fits is used: within 15% of the budget.
    EXPECT_GT(c->Stats().bits_per_original(), 0.85 * bits) << spec;
  }
  {
    auto c = MustMake("hqekv:ratios=0.3/0.4/0.1/0.2", g);
    Driver d(c.get(), 11);
    d.Step(320, true, false);
    for (int s = 0; s < 2000; ++s) d.Step(1, false, false);
    // Evicted share over everything compressed stays at r0 (the fix), not
    // just the prompt's share.
    const auto* h = dynamic_cast<const HqekvCache*>(c.get());
    const int64_t nb = h->chunks_compressed(0);
    EXPECT_EQ(nb, (320 + 2000) / 32);
    const int64_t live = static_cast<int64_t>(h->k_tiers(0, 0).size());
    EXPECT_EQ(nb - live, AllocateChunks(nb, {0.3, 0.4, 0.1, 0.2}, 2)[4]);
  }
}

TEST(PolicyCache, HqekvTierCountsFollowTheRatiosAndNeverUpgrade) {
  const KvGeometry g = SmallGeometry(2, 4, 2, 32);
  auto c = MustMake("hqekv:ratios=0.4/0.3/0.2/0.1", g);
  auto* h = dynamic_cast<HqekvCache*>(c.get());
  Driver d(c.get(), 12);
  d.Step(32 * 20 + 7, true, false);
  const TierRatios r{0.4, 0.3, 0.2, 0.1};
  auto histogram = [](const std::vector<Tier>& t) {
    std::array<int64_t, kNumTiers> c{};
    for (Tier x : t) c[static_cast<int>(x)]++;
    return c;
  };
  for (int l = 0; l < 2; ++l) {
    auto want = AllocateChunks(20, r, 2);
    auto got_k = histogram(h->k_tiers(l, 0)), got_v = histogram(h->v_tiers(l, 0));
    got_k[4] = got_v[4] = 20 - static_cast<int64_t>(h->k_tiers(l, 0).size());
    EXPECT_EQ(got_k, want) << l;
    EXPECT_EQ(got_v, want) << l;
  }
  // The store holds exactly those formats (K per-channel, V per-token).
  const KvStats st = c->Stats();
  EXPECT_EQ(st.layers[0].k_tiers.at("u4"), AllocateChunks(20, r, 2)[1] * 32 * 2);
  EXPECT_EQ(st.layers[0].k_tiers.at("residual"), 7 * 2);
  EXPECT_EQ(st.layers[0].k_tiers.at("evicted"), AllocateChunks(20, r, 2)[4] * 32 * 2);
  // Decode: across events, a chunk (identified by its first position) only
  // moves down.
  auto snapshot = [&](int l) {
    std::map<int32_t, std::pair<Tier, Tier>> m;
    const auto& store = h->store();
    for (int ci = 0; ci < store.NumChunks(l, 0); ++ci) {
      const auto v = store.Chunk(l, 0, ci);
      m[v.pos0] = {h->k_tiers(l, 0)[ci], h->v_tiers(l, 0)[ci]};
    }
    return m;
  };
  auto before = snapshot(1);
  std::set<int32_t> gone;
  int events = 0;
  for (int s = 0; s < 400; ++s) {
    const int64_t nb0 = h->chunks_compressed(1);
    d.Step(1, false, false);
    if (h->chunks_compressed(1) == nb0) continue;
    ++events;
    auto now = snapshot(1);
    for (const auto& [p, t] : now) {
      auto it = before.find(p);
      if (it == before.end()) continue;  // a new chunk
      EXPECT_GE(t.first, it->second.first) << "K chunk at " << p << " upgraded";
      EXPECT_GE(t.second, it->second.second) << "V chunk at " << p << " upgraded";
    }
    // Evicted chunks never come back.
    for (const auto& [p, t] : before) {
      if (!now.count(p)) gone.insert(p);
    }
    for (int32_t p : gone) EXPECT_EQ(now.count(p), 0u) << "chunk at " << p << " returned";
    before = now;
  }
  EXPECT_EQ(events, (7 + 400) / 32);
}

TEST(PolicyCache, RunsAreDeterministicAndResetForgetsEverything) {
  for (const char* spec :
       {"hqekv:nominal_bits=2", "h2o:keep=0.3", "kivi:nominal_bits=2", "snapkv:bits=4,window=8"}) {
    const KvGeometry g = SmallGeometry();
    auto a = MustMake(spec, g), b = MustMake(spec, g);
    Driver da(a.get(), 21), db(b.get(), 21);
    da.Step(100, true, false);
    db.Step(100, true, false);
    for (int s = 0; s < 70; ++s) {
      da.Step(1, false, false);
      db.Step(1, false, false);
    }
    EXPECT_EQ(da.last_out_, db.last_out_) << spec;
    EXPECT_EQ(a->Stats().bytes.total(), b->Stats().bytes.total()) << spec;
    // After Reset, the same request gives the same outputs as a fresh cache
    // (per-request state: the reference's bug B1).
    a->Reset();
    EXPECT_EQ(a->Stats().kept_elements, 0) << spec;
    // Reset frees the policy state too: as small as a fresh cache.
    EXPECT_EQ(a->Stats().bytes.total(), MustMake(spec, g)->Stats().bytes.total()) << spec;
    Driver dr(a.get(), 21);
    dr.Step(100, true, false);
    for (int s = 0; s < 70; ++s) dr.Step(1, false, false);
    EXPECT_EQ(dr.last_out_, da.last_out_) << spec;
  }
}

TEST(PolicyCache, StatsCountPolicyStateAndTiers) {
  auto c = MustMake("h2o:keep=0.5", SmallGeometry(1, 2, 1, 16));
  Driver d(c.get(), 13);
  d.Step(64, true, false);
  const KvStats st = c->Stats();
  const auto& store = dynamic_cast<const StoreBackedCache&>(*c).store();
  const KvStats raw = store.Stats();
  // The 32 kept H2O scores (float) are in bookkeeping on top of the store's.
  EXPECT_EQ(st.layers[0].bytes.bookkeeping - raw.layers[0].bytes.bookkeeping, 32 * 4);
  EXPECT_EQ(st.bytes.total(), raw.bytes.total() + 32 * 4);
  EXPECT_EQ(st.layers[0].k_tiers.at("evicted"), 32);
  EXPECT_EQ(st.layers[0].k_tiers.at("fp16"), 32);
}

TEST(PolicyCache, CreationErrors) {
  const KvGeometry g = SmallGeometry(2, 4, 2, 24);
  auto err = [&](const std::string& spec) {
    auto r = MakeKvCache(spec, g);
    return r.ok() ? std::string("<ok>") : r.message();
  };
  EXPECT_NE(err("kivi:group=16").find("does not divide head_dim 24"), std::string::npos);
  EXPECT_NE(err("kivi:residual=40").find("multiple of 32"), std::string::npos);
  EXPECT_NE(err("hqekv:nominal_bits=2.5").find("no built-in tier ratios"), std::string::npos);
  EXPECT_NE(err("hqekv").find("give one of bits"), std::string::npos);
  EXPECT_NE(err("hqekv:nominal_bits=2,decouple=1").find("not supported"), std::string::npos);
  EXPECT_NE(err("hqekv:nominal_bits=2,hadamard=1").find("power-of-two"), std::string::npos);
  EXPECT_NE(err("hqekv:profile=/nonexistent/p.json").find("cannot read profile"),
            std::string::npos);
  EXPECT_NE(err("h2o:heavy=4").find("heavy and recent together"), std::string::npos);
  EXPECT_NE(err("snapkv:kernel=4").find("odd"), std::string::npos);
  EXPECT_NE(err("nope").find("unknown KV policy"), std::string::npos);
  KvGeometry bad = g;
  bad.n_kv_heads = 3;
  EXPECT_FALSE(MakeKvCache("hqekv:nominal_bits=2", bad).ok());
  EXPECT_FALSE(MakeKvCache("snapkv", bad).ok());
}

TEST(PolicyCache, HqekvProfile) {
  const std::string path = hqekv::test::TempPath("hqekv_profile_test.json");
  {
    std::ofstream f(path);
    f << R"({"ratios": {"r4": 0.5, "r2": 0.3, "r1": 0.1, "r0": 0.1},
             "per_layer": [[0.5, 0.3, 0.1, 0.1], [0.2, 0.2, 0.2, 0.4]]})";
  }
  auto c = MakeKvCache("hqekv:profile=" + path, SmallGeometry());
  ASSERT_TRUE(c.ok()) << c.message();
  const auto* h = dynamic_cast<const HqekvCache*>(c->get());
  EXPECT_DOUBLE_EQ(h->ratios(1).r0, 0.4);
  {
    std::ofstream f(path);
    f << R"({"ratios": {"r4": 0.5}})";
  }
  auto e = MakeKvCache("hqekv:profile=" + path, SmallGeometry());
  ASSERT_FALSE(e.ok());
  EXPECT_NE(
      e.message().find("cannot read profile") == std::string::npos ? e.message().find("r2") : 0,
      std::string::npos)
      << e.message();
  std::remove(path.c_str());
}

// Decode-time seals (a chunk per KV head) place the heads of a layer in
// turn; QuantCache repacks the layer, each plane of a stream in consecutive
// units, when the chunks per head cross a multiple of max(16, bit_floor / 8).
TEST(PolicyCache, QuantCacheRepacksDecodeSealsIntoStreamOrder) {
  EXPECT_FALSE(QuantCache::RepackDue(0, 64));  // a prefill is already in order
  EXPECT_FALSE(QuantCache::RepackDue(14, 15));
  EXPECT_TRUE(QuantCache::RepackDue(15, 16));
  EXPECT_FALSE(QuantCache::RepackDue(16, 17));
  EXPECT_TRUE(QuantCache::RepackDue(255, 256));  // step 32 from 256 chunks on
  EXPECT_FALSE(QuantCache::RepackDue(256, 287));
  EXPECT_TRUE(QuantCache::RepackDue(287, 288));
  EXPECT_FALSE(QuantCache::RepackDue(40, 40));
  // Staggered layers cross at other chunk counts: never two of 16 layers in
  // the same step, and a prefill is still never repacked.
  EXPECT_FALSE(QuantCache::RepackDue(0, 64, 5));
  EXPECT_FALSE(QuantCache::RepackDue(15, 16, 5));
  EXPECT_TRUE(QuantCache::RepackDue(26, 27, 5));  // 27 + 5 = 32
  for (int after = 17; after < 600; ++after) {
    int due = 0;
    for (int l = 0; l < 16; ++l) due += QuantCache::RepackDue(after - 1, after, l) ? 1 : 0;
    EXPECT_LE(due, 1) << "chunks " << after;
  }

  const int D = 128, G = 32;  // int8: 4 KiB code blocks, two a page
  auto c = MustMake("int8", SmallGeometry(1, 4, 2, D));
  ASSERT_NE(c, nullptr);
  Driver d(c.get(), 3);
  d.Step(2 * G, true, false);
  for (int s = 0; s < 40 * G; ++s) d.Step(1, false, false);
  const cache::KvStore& st = dynamic_cast<StoreBackedCache&>(*c).store();
  ASSERT_EQ(st.NumChunks(0, 0), 42);
  // Repacked at 32 chunks: the K codes of chunks 0..31 of each head fill 16
  // pages in order (the 10 newer chunks are still in decode order).
  for (int h = 0; h < 2; ++h) {
    int adjacent = 0;
    for (int i = 1; i < 32; ++i) {
      adjacent += st.Chunk(0, h, i).k_codes == st.Chunk(0, h, i - 1).k_codes + 4096 ? 1 : 0;
    }
    EXPECT_GE(adjacent, 16) << h;
  }
  EXPECT_EQ(st.Stats().layers[0].bytes.total(), st.LayerHeldBytes(0));
}

}  // namespace
}  // namespace hqekv::policy
