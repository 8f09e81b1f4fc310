// Random K/V tokens for the attention benchmarks: N(0, 1) values appended to
// layer 0 of a cache or store in blocks, positions first..first+n-1.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "cache/kv_cache.h"
#include "core/status.h"

namespace hqekv::bench {

// One layer of the attention benchmarks' shape, room for n tokens and the
// decode query after them.
inline KvGeometry OneLayer(int n, int n_q_heads, int n_kv_heads, int head_dim) {
  KvGeometry g;
  g.n_layers = 1;
  g.n_q_heads = n_q_heads;
  g.n_kv_heads = n_kv_heads;
  g.head_dim = head_dim;
  g.max_ctx = n + 1;
  return g;
}

// Appends n tokens of `width` floats (KV heads x head_dim) for K and for V,
// `block` tokens per Append call; every block's buffers are refilled whole
// (K first, then V) from nd(rng), so the caller's generator continues after.
// Cache: anything with Status Append(int layer, const float* k,
// const float* v, const int32_t* pos, int n).
template <class Cache>
Status AppendRandomTokens(Cache& c, int n, int block, size_t width, std::mt19937& rng,
                          std::normal_distribution<float>& nd, int32_t first = 0) {
  std::vector<float> k(static_cast<size_t>(block) * width), v(k.size());
  std::vector<int32_t> pos(block);
  for (int b = 0; b < n; b += block) {
    const int m = std::min(block, n - b);
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    for (int i = 0; i < m; ++i) pos[i] = first + b + i;
    if (Status s = c.Append(0, k.data(), v.data(), pos.data(), m); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace hqekv::bench
