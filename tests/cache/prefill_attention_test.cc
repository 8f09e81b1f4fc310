// The tiled prefill path of PlainKvCache::Attend (cache/prefill_attention.h)
// against its per-query path (AttendPerQuery, the oracle), over GQA groups
// 1/2/4/8, D 64/128, both precisions, positions with gaps, causal edges and
// batches that are not a whole number of row blocks; and the result does not
// depend on the thread count.
#include "cache/prefill_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cache/plain_cache.h"
#include "core/half.h"
#include "core/parallel.h"

namespace hqekv {
namespace {

struct Filled {
  std::unique_ptr<PlainKvCache> cache;
  std::vector<int32_t> pos;
  float max_v = 0.0f;
};

// `tokens` tokens at positions 2, 5, 6, 9, ... (gaps of 1 and 3, never 0 or
// 1), appended in two batches, on layer 1 of 2.
Filled Fill(const KvGeometry& g, PlainPrecision prec, int tokens, std::mt19937& rng) {
  Filled f;
  auto c = PlainKvCache::Create(g, prec);
  EXPECT_TRUE(c.ok()) << c.message();
  f.cache = std::move(c).value();
  std::normal_distribution<float> nd(0.f, 1.f);
  int32_t p = 2;
  for (int i = 0; i < tokens; ++i) {
    f.pos.push_back(p);
    p += (i % 2 == 0) ? 3 : 1;
  }
  const size_t row = static_cast<size_t>(g.n_kv_heads) * g.head_dim;
  const int first = tokens / 3;
  for (auto [b, e] : {std::pair{0, first}, std::pair{first, tokens}}) {
    for (int layer = 0; layer < g.n_layers; ++layer) {  // different K/V per layer
      std::vector<float> k(row * (e - b)), v(k.size());
      for (auto& x : k) x = nd(rng);
      for (auto& x : v) {
        x = nd(rng);
        f.max_v = std::max(f.max_v, std::fabs(prec == PlainPrecision::kF16 ? RoundF16(x) : x));
      }
      EXPECT_TRUE(f.cache->Append(layer, k.data(), v.data(), f.pos.data() + b, e - b).ok());
    }
  }
  return f;
}

void CheckTiledAgainstPerQuery(int group, int D, PlainPrecision prec, int tokens, int n) {
  SCOPED_TRACE(::testing::Message()
               << "group " << group << " D " << D << " fp"
               << (prec == PlainPrecision::kF16 ? 16 : 32) << " tokens " << tokens << " n " << n);
  const int H = 2;
  const KvGeometry g{2, H * group, H, D, 1 << 20};
  ASSERT_TRUE(cache::UsePrefillAttention(g, n));
  std::mt19937 rng(static_cast<unsigned>(group * 1000 + D + tokens));
  Filled f = Fill(g, prec, tokens, rng);
  // Query positions: before every token (sees none), at the first, inside
  // gaps, at tokens, past the last; then random (seeing at least one token),
  // unsorted.
  std::vector<int32_t> qp = {
      0, 1, 2, 3, 4, 5, f.pos.back(), f.pos.back() + 7, f.pos[31], f.pos[32], f.pos[31] + 1};
  std::uniform_int_distribution<int32_t> ud(f.pos[0], f.pos.back() + 2);
  while (static_cast<int>(qp.size()) < n) qp.push_back(ud(rng));
  qp.resize(n);
  const size_t elems = static_cast<size_t>(n) * g.n_q_heads * D;
  std::vector<float> q(elems);
  std::normal_distribution<float> nd(0.f, 1.5f);
  for (auto& x : q) x = nd(rng);
  std::vector<float> got(elems), want(elems);
  ASSERT_TRUE(f.cache->Attend(1, q.data(), qp.data(), n, got.data()).ok());
  ASSERT_TRUE(f.cache->AttendPerQuery(1, q.data(), qp.data(), n, want.data()).ok());
  // Both are within ~1e-6 relative of exact attention; scores are q·k/sqrt(D)
  // ~ N(0, 1.5^2): bound as attn::AttendRows' with |score| <= 12.
  const double tol = 2e-5 * f.max_v * (1.0 + 12.0);
  int zero_rows = 0;
  for (int i = 0; i < n; ++i) {
    const bool sees_none = qp[i] < f.pos[0];
    zero_rows += sees_none;
    for (int h = 0; h < g.n_q_heads; ++h) {
      const size_t o = (static_cast<size_t>(i) * g.n_q_heads + h) * D;
      for (int d = 0; d < D; ++d) {
        ASSERT_NEAR(got[o + d], want[o + d], tol)
            << "query " << i << " at " << qp[i] << " head " << h << " d " << d;
        if (sees_none) {
          ASSERT_EQ(got[o + d], 0.0f);
        }
      }
    }
  }
  EXPECT_EQ(zero_rows, 2);  // positions 0 and 1
  // Layer 0 holds different K/V: the tiled path must read the layer asked for.
  std::vector<float> other(elems);
  ASSERT_TRUE(f.cache->Attend(0, q.data(), qp.data(), n, other.data()).ok());
  EXPECT_NE(other, got);
}

TEST(PrefillAttention, TiledMatchesPerQueryAcrossGroupsAndHeadDims) {
  for (int group : {1, 2, 4, 8}) {
    for (int D : {64, 128}) {
      CheckTiledAgainstPerQuery(group, D, PlainPrecision::kF16, 203, 37);
      CheckTiledAgainstPerQuery(group, D, PlainPrecision::kF32, 96, 21);
    }
  }
  // Many blocks per KV head and a partial last block.
  CheckTiledAgainstPerQuery(4, 128, PlainPrecision::kF16, 300, 131);
}

TEST(PrefillAttention, SameResultOnOneAndTwoThreads) {
  const KvGeometry g{1, 8, 2, 64, 1 << 20};
  std::mt19937 rng(11);
  Filled f = Fill(g, PlainPrecision::kF16, 500, rng);
  const int n = 150;
  std::vector<int32_t> qp(n);
  for (int i = 0; i < n; ++i) qp[i] = f.pos[350 + i];
  std::vector<float> q(static_cast<size_t>(n) * 8 * 64);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& x : q) x = nd(rng);
  std::vector<float> one(q.size()), two(q.size());
  const int before = NumThreads();
  SetNumThreads(1);
  ASSERT_TRUE(f.cache->Attend(0, q.data(), qp.data(), n, one.data()).ok());
  SetNumThreads(2);
  ASSERT_TRUE(f.cache->Attend(0, q.data(), qp.data(), n, two.data()).ok());
  SetNumThreads(before);
  EXPECT_EQ(one, two);  // each row is computed by one task, in a fixed order
}

// Column sums through PrefillAttentionHeads: one wave of tasks, one task per
// wave and waves of a few tasks give bit-identical sums and outputs (buffers
// are added in task order), and the sums match the scalar oracle's
// (attn::ref::AttendRows over the same rows, added in row order).
TEST(PrefillAttention, ColumnSumsDoNotDependOnTheWaves) {
  const int H = 2, group = 4, D = 32, tokens = 300, n = 40, first = 10;
  const KvGeometry g{1, H * group, H, D, 1 << 20};
  std::mt19937 rng(21);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<std::vector<float>> k(H), v(H);
  std::vector<std::vector<const void*>> kt(H), vt(H);
  std::vector<attn::KvTiles> kv(H);
  std::vector<int32_t> pos(tokens);
  for (int t = 0; t < tokens; ++t) pos[t] = 1 + t + t / 3;  // gaps
  for (int h = 0; h < H; ++h) {
    k[h].resize(static_cast<size_t>(tokens) * D);
    v[h].resize(k[h].size());
    for (auto& x : k[h]) x = nd(rng);
    for (auto& x : v[h]) x = nd(rng);
    for (int t0 = 0; t0 < tokens; t0 += 32) {
      kt[h].push_back(k[h].data() + static_cast<size_t>(t0) * D);
      vt[h].push_back(v[h].data() + static_cast<size_t>(t0) * D);
    }
    kv[h] = attn::KvTiles{attn::KvRowType::kF32, D, 32, tokens, kt[h].data(), vt[h].data()};
  }
  std::vector<int32_t> qp(n);
  for (int i = 0; i < n; ++i) qp[i] = pos[tokens - 1] * (i + 1) / n;
  std::vector<float> q(static_cast<size_t>(n) * H * group * D);
  for (auto& x : q) x = nd(rng);
  std::vector<const int32_t*> positions(H, pos.data());
  std::vector<float> want_sums, want_out;
  for (int64_t budget : {int64_t{1} << 24, int64_t{1}, int64_t{600}}) {
    SCOPED_TRACE(::testing::Message() << "budget " << budget);
    std::vector<float> sums(static_cast<size_t>(H) * tokens, 0.25f), out(q.size(), -7.0f);
    cache::HeadColumnSums cols;
    cols.first_query = first;
    cols.max_buffer_floats = budget;
    for (int h = 0; h < H; ++h) cols.sums.push_back(sums.data() + static_cast<size_t>(h) * tokens);
    cache::PrefillAttentionHeads(g, 0, kv, positions, q.data(), qp.data(), n, out.data(), &cols);
    if (want_sums.empty()) {
      want_sums = sums;
      want_out = out;
      continue;
    }
    EXPECT_EQ(sums, want_sums);
    EXPECT_EQ(out, want_out);
  }
  // The oracle: rows (query, query head) of each KV head with i >= first.
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (int h = 0; h < H; ++h) {
    std::vector<float> ref(tokens, 0.25f), qs(D), o(D);
    for (int i = first; i < n; ++i) {
      const int64_t vis = std::upper_bound(pos.begin(), pos.end(), qp[i]) - pos.begin();
      for (int j = 0; j < group; ++j) {
        const float* src = &q[((static_cast<size_t>(i) * H + h) * group + j) * D];
        for (int d = 0; d < D; ++d) qs[d] = src[d] * scale;
        attn::ref::AttendRows(kv[h], qs.data(), D, 1, &vis, o.data(), D,
                              attn::ColumnSums{ref.data(), 0});
      }
    }
    for (int t = 0; t < tokens; ++t) {
      const float got = want_sums[static_cast<size_t>(h) * tokens + t];
      ASSERT_NEAR(got, ref[t], 1e-4 * (ref[t] + 0.25)) << "head " << h << " token " << t;
    }
  }
}

TEST(PrefillAttention, SmallBatchesTakeThePerQueryPath) {
  const KvGeometry g{1, 32, 8, 128, 4096};
  EXPECT_FALSE(cache::UsePrefillAttention(g, 1));  // decode
  EXPECT_FALSE(cache::UsePrefillAttention(g, 3));  // 12 rows per KV head
  EXPECT_TRUE(cache::UsePrefillAttention(g, 4));
  const KvGeometry mha{1, 8, 8, 64, 4096};
  EXPECT_FALSE(cache::UsePrefillAttention(mha, 15));
  EXPECT_TRUE(cache::UsePrefillAttention(mha, 16));
}

}  // namespace
}  // namespace hqekv
