// Sliding-window layers in the KV cache (cache/window_cache.h, created by
// policy::CreateCache when the geometry names window layers).
#include "cache/window_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "io/model_source.h"
#include "io/synthetic.h"
#include "model/llama.h"
#include "policy/factory.h"
#include "../sanitized.h"
#include "../temp_path.h"

namespace hqekv {
namespace {

// Naive windowed attention in double: query at p sees keys p - W < pos <= p.
void NaiveWindowAttention(const std::vector<float>& keys, const std::vector<float>& vals,
                          const std::vector<int32_t>& kpos, const float* q, int32_t qpos, int H,
                          int KH, int D, int W, float* out, double cap = 0) {
  for (int h = 0; h < H; ++h) {
    const int kh = h / (H / KH);
    std::vector<double> s;
    std::vector<size_t> idx;
    for (size_t t = 0; t < kpos.size(); ++t) {
      if (kpos[t] > qpos || (W > 0 && qpos - kpos[t] >= W)) continue;
      double d = 0;
      for (int j = 0; j < D; ++j) d += double(q[h * D + j]) * keys[(t * KH + kh) * D + j];
      d /= std::sqrt(double(D));
      s.push_back(cap > 0 ? cap * std::tanh(d / cap) : d);
      idx.push_back(t);
    }
    double mx = -1e300, sum = 0;
    for (double x : s) mx = std::max(mx, x);
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int j = 0; j < D; ++j) {
      double a = 0;
      for (size_t i = 0; i < s.size(); ++i) a += s[i] / sum * vals[(idx[i] * KH + kh) * D + j];
      out[h * D + j] = static_cast<float>(a);
    }
  }
}

// Layer 0 a window of 5, layer 1 global; a prompt longer than the window,
// then single tokens: every output equals the naive masked attention, and
// the window layer ends up holding exactly 5 tokens.
TEST(WindowCache, AttendsOverItsWindowAcrossBatchesAndHoldsOnlyIt) {
  KvGeometry g{2, 4, 2, 16, 64};
  g.layer_window = {5, 0};
  auto made = MakeKvCache("fp32", g);
  ASSERT_TRUE(made.ok()) << made.message();
  KvCache& c = **made;
  auto* wc = dynamic_cast<WindowedKvCache*>(&c);
  ASSERT_NE(wc, nullptr);
  ASSERT_NE(wc->inner(), nullptr);
  EXPECT_EQ(wc->inner()->geometry().n_layers, 1);
  const int H = 4, KH = 2, D = 16, row = KH * D;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> keys[2], vals[2];
  std::vector<int32_t> kpos;
  int32_t next = 0;
  for (int batch : {12, 1, 1, 3, 1}) {
    std::vector<int32_t> pos(batch);
    for (int i = 0; i < batch; ++i) pos[i] = (next += 2);  // gaps: the window counts positions
    std::vector<float> q(batch * H * D), out(batch * H * D), want(H * D);
    for (float& x : q) x = nd(rng);
    for (int l = 0; l < 2; ++l) {
      std::vector<float> k(batch * row), v(batch * row);
      for (float& x : k) x = nd(rng);
      for (float& x : v) x = nd(rng);
      keys[l].insert(keys[l].end(), k.begin(), k.end());
      vals[l].insert(vals[l].end(), v.begin(), v.end());
      std::vector<int32_t> all = kpos;
      all.insert(all.end(), pos.begin(), pos.end());
      ASSERT_TRUE(c.Append(l, k.data(), v.data(), pos.data(), batch).ok());
      ASSERT_TRUE(c.Attend(l, q.data(), pos.data(), batch, out.data()).ok());
      for (int i = 0; i < batch; ++i) {
        NaiveWindowAttention(keys[l], vals[l], all, &q[i * H * D], pos[i], H, KH, D, l == 0 ? 5 : 0,
                             want.data());
        for (int j = 0; j < H * D; ++j)
          ASSERT_NEAR(out[i * H * D + j], want[j], 1e-4) << "layer " << l << " query " << i;
      }
    }
    kpos.insert(kpos.end(), pos.begin(), pos.end());
    ASSERT_TRUE(c.EndBatch(batch, batch > 1).ok());
  }
  EXPECT_EQ(wc->WindowTokens(0), 5);
  const KvStats s = c.Stats();
  ASSERT_EQ(s.layers.size(), 2u);
  EXPECT_EQ(s.layers[0].kept_tokens, 5 * KH);
  EXPECT_EQ(s.layers[0].bytes.payload, 5 * row * 4 * 2);  // fp32 K and V of 5 tokens
  EXPECT_EQ(s.layers[0].bytes.bookkeeping, 5 * 4);        // their positions
  EXPECT_EQ(s.layers[0].bytes.total(), c.LayerAllocatedBytes(0));
  EXPECT_EQ(s.layers[1].kept_tokens, 18 * KH);
  EXPECT_EQ(s.original_elements, 2 * 18 * row * 2);
}

// Gemma 2's soft-cap with a compressing policy: the window layer is a ring,
// the global layer a store-backed cache (KIVI with a residual longer than
// the run, so its K/V stay fp16 and the only difference from the naive
// capped attention is fp16 rounding). Scores of a few units against a cap of
// 1.5: without the cap the outputs move far more than the tolerance.
TEST(WindowCache, StorePoliciesApplyTheAttentionSoftCap) {
  KvGeometry g{2, 4, 2, 16, 128};
  g.layer_window = {6, 0};
  g.attn_softcap = 1.5f;
  auto made = MakeKvCache("kivi:residual=128", g);
  ASSERT_TRUE(made.ok()) << made.message();
  auto* wc = dynamic_cast<WindowedKvCache*>(made->get());
  ASSERT_NE(wc, nullptr);
  ASSERT_NE(wc->inner(), nullptr);
  EXPECT_FLOAT_EQ(wc->inner()->geometry().attn_softcap, 1.5f);
  ASSERT_TRUE(MakeKvCache("hqekv:bits=3.4", g).ok());
  KvCache& c = **made;
  const int H = 4, KH = 2, D = 16, row = KH * D;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  std::vector<float> keys[2], vals[2];
  std::vector<int32_t> kpos;
  int32_t next = 0;
  double moved = 0;
  for (int batch : {20, 1, 1, 1}) {  // 20 rows: the prefill size of the tiled path
    std::vector<int32_t> pos(batch);
    for (int i = 0; i < batch; ++i) pos[i] = next++;
    std::vector<float> q(batch * H * D), out(batch * H * D), want(H * D), plain(H * D);
    for (float& x : q) x = 2.0f * nd(rng);
    for (int l = 0; l < 2; ++l) {
      std::vector<float> k(batch * row), v(batch * row);
      for (float& x : k) x = 2.0f * nd(rng);
      for (float& x : v) x = nd(rng);
      keys[l].insert(keys[l].end(), k.begin(), k.end());
      vals[l].insert(vals[l].end(), v.begin(), v.end());
      std::vector<int32_t> all = kpos;
      all.insert(all.end(), pos.begin(), pos.end());
      ASSERT_TRUE(c.Append(l, k.data(), v.data(), pos.data(), batch).ok());
      ASSERT_TRUE(c.Attend(l, q.data(), pos.data(), batch, out.data()).ok());
      for (int i = 0; i < batch; ++i) {
        const int W = l == 0 ? 6 : 0;
        NaiveWindowAttention(keys[l], vals[l], all, &q[i * H * D], pos[i], H, KH, D, W, want.data(),
                             1.5);
        NaiveWindowAttention(keys[l], vals[l], all, &q[i * H * D], pos[i], H, KH, D, W,
                             plain.data());
        for (int j = 0; j < H * D; ++j) {
          ASSERT_NEAR(out[i * H * D + j], want[j], 5e-3) << "layer " << l << " query " << i;
          if (l == 1) moved = std::max(moved, double(std::abs(plain[j] - want[j])));
        }
      }
    }
    kpos.insert(kpos.end(), pos.begin(), pos.end());
    ASSERT_TRUE(c.EndBatch(batch, batch > 1).ok());
  }
  EXPECT_GT(moved, 0.1);  // the cap bites on the store-backed layer
}

// Save after a prompt longer than the window, load into a fresh cache: the
// next token's attention is identical; a corrupted state is refused.
TEST(WindowCache, StateRoundTripsAndBadStateIsRefused) {
  KvGeometry g{2, 2, 1, 8, 64};
  g.layer_window = {4, 0};
  auto a = MakeKvCache("fp16", g);
  auto b = MakeKvCache("fp16", g);
  ASSERT_TRUE(a.ok() && b.ok());
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  std::vector<float> k(10 * 8), v(10 * 8), q(2 * 8), oa(2 * 8), ob(2 * 8);
  std::vector<int32_t> pos(10);
  for (int i = 0; i < 10; ++i) pos[i] = i;
  for (float& x : k) x = nd(rng);
  for (float& x : v) x = nd(rng);
  for (int l = 0; l < 2; ++l) ASSERT_TRUE((*a)->Append(l, k.data(), v.data(), pos.data(), 10).ok());
  ASSERT_TRUE((*a)->EndBatch(10, true).ok());
  std::string state;
  ASSERT_TRUE((*a)->SaveState(&state).ok());
  ASSERT_TRUE((*b)->LoadState(state).ok());
  for (float& x : q) x = nd(rng);
  const int32_t p10 = 10;
  for (int l = 0; l < 2; ++l) {
    ASSERT_TRUE((*a)->Append(l, k.data(), v.data(), &p10, 1).ok());
    ASSERT_TRUE((*b)->Append(l, k.data(), v.data(), &p10, 1).ok());
    ASSERT_TRUE((*a)->Attend(l, q.data(), &p10, 1, oa.data()).ok());
    ASSERT_TRUE((*b)->Attend(l, q.data(), &p10, 1, ob.data()).ok());
    EXPECT_EQ(oa, ob) << "layer " << l;
  }
  std::string broken = state;
  broken[8 + 4 + 7] = static_cast<char>(0x80);  // layer 0's token count (int64) made negative
  EXPECT_FALSE((*b)->LoadState(broken).ok());
  EXPECT_FALSE((*b)->LoadState(state.substr(0, state.size() / 2)).ok());
}

TEST(WindowCache, LayerClassSpecNamesTheGlobalPolicy) {
  auto a = policy::ParseSpec("global:hqekv:bits=3.4,local:fp16");
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->name, "hqekv");
  EXPECT_DOUBLE_EQ(a->Num("bits"), 3.4);
  auto b = policy::ParseSpec("global:kivi");
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->name, "kivi");
  auto c = policy::ParseSpec("global:hqekv:bits=3,local:kivi");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("local:kivi"), std::string::npos) << c.message();
  EXPECT_FALSE(policy::ParseSpec("local:fp16").ok());
}

// Gemma 3 1B's cache geometry (26 layers, 1 KV head of 256, window 512:
// 22 window layers, 4 global ones) read from a synthetic file, 32K tokens
// (8K in the sanitized tree, where 32K takes minutes):
// with hqekv at 3.4 bits on the global layers the cache holds at most a
// quarter of an all-fp16 cache's K/V bytes, and every window layer holds
// exactly its 512 tokens.
TEST(WindowCache, Gemma3OneBGeometryAt32KHoldsWindowsAndFitsAQuarterOfFp16) {
  SyntheticSpec s;
  s.arch = "gemma3";
  s.n_layers = 26;
  s.d_model = 256;
  s.n_heads = 4;
  s.n_kv_heads = 1;
  s.head_dim = 256;
  s.d_ff = 256;
  s.vocab = 300;
  s.max_ctx = 32768;
  s.sliding_window = 512;
  s.type = TensorType::kQ8_0;
  const std::string path = hqekv::test::TempPath("hqekv_win_") + "gemma3_1b_geom.gguf";
  std::filesystem::remove(path);
  ASSERT_TRUE(WriteSyntheticGguf(s, path).ok());
  auto src = LoadModel(path);
  ASSERT_TRUE(src.ok()) << src.message();
  auto model = LlamaModel::Create(**src);
  ASSERT_TRUE(model.ok()) << model.message();
  const int T = test::FullOrSanitized(32768, 8192);
  const KvGeometry g = (*model)->CacheGeometry(T);
  int windows = 0;
  for (int w : g.layer_window) windows += w == 512;
  ASSERT_EQ(windows, 22);
  auto made = MakeKvCache("global:hqekv:bits=3.4,local:fp16", g);
  ASSERT_TRUE(made.ok()) << made.message();
  KvCache& c = **made;
  const int B = 2048, row = g.n_kv_heads * g.head_dim;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<float> k(size_t(B) * row), v(size_t(B) * row),
      q(size_t(4) * g.n_q_heads * g.head_dim), out(q.size());
  std::vector<int32_t> pos(B);
  for (float& x : q) x = nd(rng);
  for (int a = 0; a < T; a += B) {
    for (int i = 0; i < B; ++i) pos[i] = a + i;
    for (int l = 0; l < g.n_layers; ++l) {
      for (float& x : k) x = nd(rng);
      for (float& x : v) x = nd(rng);
      ASSERT_TRUE(c.Append(l, k.data(), v.data(), pos.data(), B).ok());
      // The last 4 rows of the batch attend (what importance scores see).
      ASSERT_TRUE(c.Attend(l, q.data(), &pos[B - 4], 4, out.data()).ok());
    }
    ASSERT_TRUE(c.EndBatch(B, a == 0).ok());
  }
  const KvStats st = c.Stats();
  const int64_t fp16_all = int64_t{T} * g.n_layers * row * 2 * 2;  // K and V payload only
  for (int l = 0; l < g.n_layers; ++l) {
    if (g.layer_window[l] == 0) continue;
    EXPECT_EQ(st.layers[l].kept_tokens, 512) << "layer " << l;
    EXPECT_EQ(st.layers[l].bytes.payload, 512 * row * 2 * 2) << "layer " << l;
  }
  EXPECT_LE(st.bytes.total(), fp16_all / 4)
      << "held " << st.bytes.total() << " bytes, all-fp16 payload " << fp16_all;
  std::printf("gemma3-1B geometry, %d tokens: held %lld bytes = %.4f x all-fp16 (%lld)\n", T,
              static_cast<long long>(st.bytes.total()), double(st.bytes.total()) / fp16_all,
              static_cast<long long>(fp16_all));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace hqekv
