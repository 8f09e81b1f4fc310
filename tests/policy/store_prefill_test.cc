// A second prefill batch over what each store-backed policy kept after its
// first compression event: the cache's Attend (tiled over the compressed
// tiers for the queries no sink records, cache/store_prefill_attention.h)
// against cache::StoreAttention's per-query path on the same store, for
// KIVI 2/4-bit, int8, fp8, HqeKV and the eviction policies (H2O, SnapKV:
// tokens dropped per head), GQA groups 1/4, D 64/128.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cache/store_attention.h"
#include "policy/store_cache.h"
#include "policy_harness.h"

namespace hqekv::policy {
namespace {

TEST(StorePrefill, AttendMatchesPerQueryAfterCompression) {
  const char* const specs[] = {
      "kivi:nominal_bits=2",    "kivi:nominal_bits=4", "int8",           "fp8",
      "hqekv:nominal_bits=3.2", "h2o:keep=0.5",        "snapkv:keep=0.5"};
  for (const char* spec : specs) {
    for (int group : {1, 4}) {
      for (int D : {64, 128}) {
        SCOPED_TRACE(::testing::Message() << spec << " group " << group << " D " << D);
        KvGeometry g = testing::SmallGeometry(1, 2 * group, 2, D);
        g.max_ctx = 4096;
        auto c = testing::MustMake(spec, g);
        ASSERT_NE(c, nullptr);
        auto* sc = dynamic_cast<StoreBackedCache*>(c.get());
        ASSERT_NE(sc, nullptr);
        std::mt19937 rng(17 + group + D);
        std::normal_distribution<float> nd(0.f, 1.f);
        int32_t next = 0;
        std::vector<float> out;
        std::vector<float> q;
        std::vector<int32_t> pos;
        for (int n : {400, 48}) {  // the prompt (compressed at its end), then a second batch
          pos.resize(n);
          for (int i = 0; i < n; ++i) pos[i] = next, next += (i % 3 == 0) ? 2 : 1;  // gaps
          std::vector<float> k(static_cast<size_t>(n) * 2 * D), v(k.size());
          q.resize(static_cast<size_t>(n) * g.n_q_heads * D);
          out.resize(q.size());
          for (float& x : k) x = nd(rng);
          for (float& x : v) x = nd(rng);
          for (float& x : q) x = nd(rng);
          ASSERT_TRUE(c->Append(0, k.data(), v.data(), pos.data(), n).ok());
          ASSERT_TRUE(c->Attend(0, q.data(), pos.data(), n, out.data()).ok());
          if (n == 48) break;  // compare before this batch's event
          ASSERT_TRUE(c->EndBatch(n, true).ok());
        }
        const int n = static_cast<int>(pos.size());
        cache::StoreAttentionOptions per_query;
        per_query.tiled_prefill = false;
        std::vector<float> want(out.size());
        ASSERT_TRUE(cache::StoreAttention(sc->store(), 0, g.n_q_heads, q.data(), pos.data(), n,
                                          want.data(), nullptr, per_query)
                        .ok());
        float max_v = 0.f;
        for (int h = 0; h < 2; ++h) {
          const int64_t m = sc->store().KeptTokens(0, h);
          std::vector<float> kk(m * D), vv(m * D);
          sc->store().DequantizeKept(0, h, kk.data(), vv.data());
          for (float x : vv) max_v = std::max(max_v, std::fabs(x));
        }
        // |q · k| / sqrt(D) stays below ~8 for these N(0, 1) rows: AttendRows'
        // tolerance 4e-6 · max|v| · (1 + max score), times 4 for the two paths.
        const float tol = 4e-6f * max_v * 9.0f * 4.0f;
        for (size_t e = 0; e < out.size(); ++e) ASSERT_NEAR(out[e], want[e], tol) << e;
      }
    }
  }
}

// H2O records every prefill query: a prompt attended in one batch (tiled, the
// weights summed per kept token by the kernel, EvictCache::OnColumns) and the
// same prompt attended 3 queries at a time (below the tiled threshold: per-query
// rows, EvictCache::OnRow) give the same attention and, after the event, keep
// the same tokens of every head.
TEST(StorePrefill, H2oKeepsTheSameTokensWithColumnSums) {
  for (int group : {1, 4}) {
    SCOPED_TRACE(::testing::Message() << "group " << group);
    const int D = 64, n = 300;
    KvGeometry g = testing::SmallGeometry(1, 2 * group, 2, D);
    g.max_ctx = 4096;
    std::mt19937 rng(5 + group);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> k(static_cast<size_t>(n) * 2 * D), v(k.size());
    std::vector<float> q(static_cast<size_t>(n) * g.n_q_heads * D);
    for (float& x : k) x = nd(rng);
    for (float& x : v) x = nd(rng);
    for (float& x : q) x = 2.0f * nd(rng);  // peaked weights: clear winners
    std::vector<int32_t> pos(n);
    for (int i = 0; i < n; ++i) pos[i] = i;
    std::vector<float> out[2];
    std::vector<int32_t> kept[2][2];
    for (int split = 0; split < 2; ++split) {
      auto c = testing::MustMake("h2o:keep=0.3", g);
      ASSERT_NE(c, nullptr);
      ASSERT_TRUE(c->Append(0, k.data(), v.data(), pos.data(), n).ok());
      out[split].resize(q.size());
      const int step = split ? 3 : n;
      const size_t row = static_cast<size_t>(g.n_q_heads) * D;
      for (int i0 = 0; i0 < n; i0 += step) {
        const int m = std::min(step, n - i0);
        ASSERT_TRUE(
            c->Attend(0, q.data() + i0 * row, pos.data() + i0, m, out[split].data() + i0 * row)
                .ok());
      }
      ASSERT_TRUE(c->EndBatch(n, true).ok());
      const auto& store = dynamic_cast<StoreBackedCache*>(c.get())->store();
      for (int h = 0; h < 2; ++h) store.KeptPositions(0, h, &kept[split][h]);
    }
    for (size_t e = 0; e < out[0].size(); ++e) ASSERT_NEAR(out[0][e], out[1][e], 1e-4f) << e;
    for (int h = 0; h < 2; ++h) {
      EXPECT_LT(kept[0][h].size(), static_cast<size_t>(n));  // the event evicted
      EXPECT_EQ(kept[0][h], kept[1][h]) << "head " << h;
    }
  }
}

}  // namespace
}  // namespace hqekv::policy
