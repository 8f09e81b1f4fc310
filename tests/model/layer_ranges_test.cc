// Layer ranges in --kv (policy::ParseSpec, policy::CreateCache,
// cache/layer_split_cache.h): each range of layers gets its own cache.
#include "cache/layer_split_cache.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cache/window_cache.h"
#include "policy/factory.h"
#include "policy/spec.h"

namespace hqekv {
namespace {

std::string ParseError(const std::string& text) {
  auto r = policy::ParseSpec(text);
  EXPECT_FALSE(r.ok()) << text << " parsed";
  return r.ok() ? "" : r.message();
}

TEST(LayerRanges, ParseSplitsAtRangesAndKeepsKeyLists) {
  auto r = policy::ParseSpec("0-1:kivi:nominal_bits=4,group=16, 2:fp32,3-:hqekv:bits=3");
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->ranges.size(), 3u);
  EXPECT_EQ(r->ranges[0].first, 0);
  EXPECT_EQ(r->ranges[0].last, 1);
  EXPECT_EQ(r->ranges[0].spec.name, "kivi");
  EXPECT_EQ(r->ranges[0].spec.Text("group"), "16");
  EXPECT_EQ(r->ranges[1].first, 2);
  EXPECT_EQ(r->ranges[1].last, 2);
  EXPECT_EQ(r->ranges[2].last, -1);
  EXPECT_EQ(r->name, "hqekv");  // the range that starts last
  const std::string canon = r->Canonical();
  EXPECT_EQ(canon, "0-1:kivi:nominal_bits=4,group=16,2:fp32,3-:hqekv:bits=3");
  auto again = policy::ParseSpec(canon);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->Canonical(), canon);
  // The layer-class form is unchanged and a window part may follow ranges.
  auto cls = policy::ParseSpec("global:hqekv:bits=3,local:fp16");
  ASSERT_TRUE(cls.ok()) << cls.message();
  EXPECT_TRUE(cls->ranges.empty());
  EXPECT_EQ(cls->name, "hqekv");
  EXPECT_TRUE(policy::ParseSpec("0-3:fp16,4-:kivi,local:fp16").ok());
}

TEST(LayerRanges, ParseErrorsNameTheBadRange) {
  EXPECT_NE(ParseError("3-1:fp16").find("'3-1'"), std::string::npos);
  EXPECT_NE(ParseError("0-3:fp16,1-x:fp32").find("'1-x'"), std::string::npos);
  EXPECT_NE(ParseError("-2:fp16").find("'-2'"), std::string::npos);
  const std::string overlap = ParseError("0-3:fp16,2-:fp32");
  EXPECT_NE(overlap.find("'0-3'"), std::string::npos) << overlap;
  EXPECT_NE(overlap.find("'2-'"), std::string::npos) << overlap;
  const std::string bad_policy = ParseError("0-3:fp16,4-:nosuch");
  EXPECT_NE(bad_policy.find("'4-'"), std::string::npos) << bad_policy;
  EXPECT_NE(bad_policy.find("nosuch"), std::string::npos) << bad_policy;
  const std::string bad_key = ParseError("0-:kivi:colour=2");
  EXPECT_NE(bad_key.find("'0-'"), std::string::npos) << bad_key;
  EXPECT_NE(bad_key.find("colour"), std::string::npos) << bad_key;
  EXPECT_NE(ParseError("0-3:fp16,global:fp16").find("global:"), std::string::npos);
  EXPECT_NE(ParseError("fp16,2-:fp32").find("before any layer range"), std::string::npos);
  EXPECT_NE(ParseError("0-1:fp16,2-:fp32,local:kivi").find("local:kivi"), std::string::npos);
}

TEST(LayerRanges, CreateChecksTheRangesAgainstTheModel) {
  const KvGeometry g{4, 4, 2, 16, 64};
  auto gap = MakeKvCache("0-1:fp16,3:fp16", g);
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.message().find("layer 2"), std::string::npos) << gap.message();
  auto past = MakeKvCache("0-1:fp16,2-9:fp32", g);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.message().find("'2-9'"), std::string::npos) << past.message();
  EXPECT_NE(past.message().find("4 layers"), std::string::npos) << past.message();
}

// Each layer's attention equals that of a whole-model cache of its range's
// policy (same code, same inputs: bit-equal), Stats() puts each range's
// layers under their model index, and the state round-trips.
TEST(LayerRanges, EachRangeBehavesAsItsOwnPolicy) {
  const int H = 4, KH = 2, D = 16, T = 40;
  const KvGeometry g{4, H, KH, D, 64};
  auto split = MakeKvCache("0:fp32,1-2:kivi:nominal_bits=4,residual=32,3-:fp16", g);
  ASSERT_TRUE(split.ok()) << split.message();
  auto* sc = dynamic_cast<LayerSplitKvCache*>(split->get());
  ASSERT_NE(sc, nullptr);
  EXPECT_EQ(sc->num_parts(), 3);
  EXPECT_NE((*split)->Describe().find("0:fp32"), std::string::npos) << (*split)->Describe();
  auto f32 = MakeKvCache("fp32", g);
  auto kivi = MakeKvCache("kivi:nominal_bits=4,residual=32", g);
  auto f16 = MakeKvCache("fp16", g);
  ASSERT_TRUE(f32.ok() && kivi.ok() && f16.ok());
  KvCache* want_of[4] = {f32->get(), kivi->get(), kivi->get(), f16->get()};

  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  auto fill = [&](std::vector<float>* v) {
    for (float& x : *v) x = nd(rng);
  };
  std::vector<float> k(T * KH * D), v(T * KH * D), q(T * H * D);
  std::vector<int32_t> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = t;
  std::vector<float> got(T * H * D), want(T * H * D);
  auto step = [&](int from, int n, bool prefill) {
    for (int l = 0; l < 4; ++l) {
      fill(&k);
      fill(&v);
      fill(&q);
      for (KvCache* c : {split->get(), want_of[l]}) {
        ASSERT_TRUE(c->Append(l, k.data(), v.data(), &pos[from], n).ok());
      }
      ASSERT_TRUE((*split)->Attend(l, q.data(), &pos[from], n, got.data()).ok());
      ASSERT_TRUE(want_of[l]->Attend(l, q.data(), &pos[from], n, want.data()).ok());
      for (int i = 0; i < n * H * D; ++i) ASSERT_EQ(got[i], want[i]) << "layer " << l;
    }
    for (KvCache* c : {split->get(), f32->get(), kivi->get(), f16->get()})
      ASSERT_TRUE(c->EndBatch(n, prefill).ok());
  };
  step(0, 36, true);
  for (int t = 36; t < T; ++t) step(t, 1, false);

  const KvStats s = (*split)->Stats();
  ASSERT_EQ(s.layers.size(), 4u);
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(s.layers[l].bytes.total(), want_of[l]->Stats().layers[l].bytes.total()) << l;
    EXPECT_EQ(s.layers[l].k_tiers, want_of[l]->Stats().layers[l].k_tiers) << l;
  }
  int64_t sum = 0;
  for (const KvLayerStats& ls : s.layers) sum += ls.bytes.total();
  EXPECT_EQ(s.bytes.total(), sum);
  EXPECT_EQ(s.original_elements, int64_t{4} * T * KH * D * 2);

  std::string state;
  ASSERT_TRUE((*split)->SaveState(&state).ok());
  auto copy = MakeKvCache("0:fp32,1-2:kivi:nominal_bits=4,residual=32,3-:fp16", g);
  ASSERT_TRUE(copy.ok());
  ASSERT_TRUE((*copy)->LoadState(state).ok());
  std::string again;
  ASSERT_TRUE((*copy)->SaveState(&again).ok());
  EXPECT_EQ(again, state);
  EXPECT_FALSE((*copy)->LoadState(state.substr(0, state.size() - 3)).ok());
  auto other = MakeKvCache("0-1:fp32,2-:fp16", g);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE((*other)->LoadState(state).ok());
}

// With window layers the ranges cover the global layers; the window layers
// stay fp16 rings whatever range they fall in.
TEST(LayerRanges, RangesOnAWindowModelSplitTheGlobalLayers) {
  KvGeometry g{6, 4, 1, 16, 64};
  g.layer_window = {8, 8, 0, 8, 8, 0};
  auto made = MakeKvCache("0-2:fp32,3-:kivi:nominal_bits=4,local:fp16", g);
  ASSERT_TRUE(made.ok()) << made.message();
  auto* wc = dynamic_cast<WindowedKvCache*>(made->get());
  ASSERT_NE(wc, nullptr);
  auto* inner = dynamic_cast<const LayerSplitKvCache*>(wc->inner());
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(inner->geometry().n_layers, 2);
  EXPECT_EQ(inner->part(0).Describe(), "fp32");
  EXPECT_NE(inner->part(1).Describe().find("kivi"), std::string::npos);
  // A range holding only window layers needs no cache; a global layer left
  // out is still an error.
  auto only_window = MakeKvCache("0-1:kivi,2-:fp16", g);
  EXPECT_TRUE(only_window.ok()) << only_window.message();
  auto gap = MakeKvCache("0-3:fp16", g);
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.message().find("layer 5"), std::string::npos) << gap.message();
}

}  // namespace
}  // namespace hqekv
