// Hand-built inputs for the behavioural tests of the policies' selection:
// every K, V and query row is a function of its position (and head), so a
// test plants which tokens are "hot" (a query direction aligned with chosen
// keys) and which V rows have a large range, then asserts exactly which
// chunks / tokens the policy keeps and at which tier.
//
// Planting attention: a query q = sqrt(D) * e_d scores a key k at
// q.k / sqrt(D) = k[d]; giving every token of a group the key value 2 * L in
// channel d makes its softmax weight proportional to e^(2L) for the queries
// along e_d, i.e. levels one apart differ by a factor e^2 ~ 7.4 in attention.
// Keys constant over a 32-token chunk are quantized exactly by every
// per-channel tier, so decode-time attention over compressed chunks still
// sees the planted levels.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "policy/factory.h"
#include "policy/store_cache.h"

namespace hqekv::policy::testing {

// Row makers: fill one row of head_dim floats for (layer, position, head).
using RowFn = std::function<void(int layer, int32_t pos, int head, float* row)>;

struct Planted {
  RowFn k, v, q;
};

// Appends positions [first, first + n) to every layer, attends the same
// positions as queries, then ends the batch (the compression event).
inline void RunBatch(KvCache& c, const Planted& p, int32_t first, int n, bool prefill) {
  const KvGeometry& g = c.geometry();
  const int D = g.head_dim;
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = first + i;
  for (int l = 0; l < g.n_layers; ++l) {
    std::vector<float> k(static_cast<size_t>(n) * g.n_kv_heads * D, 0.f), v(k.size(), 0.f),
        q(static_cast<size_t>(n) * g.n_q_heads * D, 0.f), out(q.size());
    for (int i = 0; i < n; ++i) {
      for (int h = 0; h < g.n_kv_heads; ++h) {
        const size_t at = (static_cast<size_t>(i) * g.n_kv_heads + h) * D;
        p.k(l, pos[i], h, &k[at]);
        p.v(l, pos[i], h, &v[at]);
      }
      for (int h = 0; h < g.n_q_heads; ++h) {
        p.q(l, pos[i], h, &q[(static_cast<size_t>(i) * g.n_q_heads + h) * D]);
      }
    }
    const Status a = c.Append(l, k.data(), v.data(), pos.data(), n);
    ASSERT_TRUE(a.ok()) << a.message();
    const Status s = c.Attend(l, q.data(), pos.data(), n, out.data());
    ASSERT_TRUE(s.ok()) << s.message();
  }
  const Status e = c.EndBatch(n, prefill);
  ASSERT_TRUE(e.ok()) << e.message();
}

// Decodes positions [first, first + n) one token per batch.
inline void RunDecode(KvCache& c, const Planted& p, int32_t first, int n) {
  for (int i = 0; i < n; ++i) RunBatch(c, p, first + i, 1, false);
}

inline KvGeometry Geometry(int layers, int hq, int hk, int d) {
  KvGeometry g;
  g.n_layers = layers;
  g.n_q_heads = hq;
  g.n_kv_heads = hk;
  g.head_dim = d;
  g.max_ctx = 1 << 14;
  return g;
}

inline std::unique_ptr<KvCache> Make(const std::string& spec, const KvGeometry& g) {
  auto c = MakeKvCache(spec, g);
  EXPECT_TRUE(c.ok()) << spec << ": " << (c.ok() ? "" : c.message());
  return c.ok() ? std::move(c).value() : nullptr;
}

// Positions a store-backed cache keeps for (layer, KV head), in walk order.
inline std::vector<int32_t> Kept(const KvCache& c, int layer, int head) {
  const auto* s = dynamic_cast<const StoreBackedCache*>(&c);
  EXPECT_NE(s, nullptr);
  std::vector<int32_t> pos;
  if (s) s->store().KeptPositions(layer, head, &pos);
  return pos;
}

// {first, first + 1, ..., last}.
inline std::vector<int32_t> Span(int32_t first, int32_t last) {
  std::vector<int32_t> out;
  for (int32_t p = first; p <= last; ++p) out.push_back(p);
  return out;
}

// Concatenation of spans / lists.
inline std::vector<int32_t> Join(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Query sqrt(D) * e_d (scores key channel d exactly).
inline void AlongChannel(int d, int D, float* row) {
  for (int i = 0; i < D; ++i) row[i] = 0.f;
  row[d] = std::sqrt(static_cast<float>(D));
}

}  // namespace hqekv::policy::testing
