// Test harness for the policies: drives a KvCache like the engine does
// (append + attend per layer, then EndBatch) with random or hand-built rows,
// and computes the naive reference: every kept token dequantized to fp64,
// causal softmax attention in fp64.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "policy/factory.h"
#include "policy/store_cache.h"

namespace hqekv::policy::testing {

inline KvGeometry SmallGeometry(int layers = 2, int hq = 4, int hk = 2, int d = 32) {
  KvGeometry g;
  g.n_layers = layers;
  g.n_q_heads = hq;
  g.n_kv_heads = hk;
  g.head_dim = d;
  g.max_ctx = 1 << 16;
  return g;
}

// The bundled stories260K's heads: 8 query heads, 4 KV heads of D = 8 (it has 5 layers).
inline KvGeometry StoriesGeometry(int layers = 5) { return SmallGeometry(layers, 8, 4, 8); }

inline std::unique_ptr<KvCache> MustMake(const std::string& spec, const KvGeometry& g) {
  auto c = MakeKvCache(spec, g);
  EXPECT_TRUE(c.ok()) << spec << ": " << (c.ok() ? "" : c.message());
  return c.ok() ? std::move(c).value() : nullptr;
}

// Naive reference over what the cache keeps: out [n][Hq][D] in fp64.
inline std::vector<double> ReferenceAttention(const StoreBackedCache& c, int layer,
                                              const std::vector<float>& q,
                                              const std::vector<int32_t>& q_pos) {
  const KvGeometry& g = c.geometry();
  const int D = g.head_dim, Hq = g.n_q_heads, group = g.n_q_heads / g.n_kv_heads;
  const int n = static_cast<int>(q_pos.size());
  std::vector<double> out(static_cast<size_t>(n) * Hq * D, 0.0);
  for (int kvh = 0; kvh < g.n_kv_heads; ++kvh) {
    const cache::KvStore& s = c.store();
    const int64_t T = s.KeptTokens(layer, kvh);
    std::vector<float> k(T * D), v(T * D);
    std::vector<int32_t> pos;
    s.DequantizeKept(layer, kvh, k.data(), v.data());
    s.KeptPositions(layer, kvh, &pos);
    for (int i = 0; i < n; ++i) {
      for (int hh = 0; hh < group; ++hh) {
        const int h = kvh * group + hh;
        const float* qh = &q[(static_cast<size_t>(i) * Hq + h) * D];
        std::vector<double> sc(T, -INFINITY);
        double mx = -INFINITY;
        for (int64_t t = 0; t < T; ++t) {
          if (pos[t] > q_pos[i]) continue;
          double d = 0;
          for (int e = 0; e < D; ++e) d += static_cast<double>(qh[e]) * k[t * D + e];
          sc[t] = d / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, sc[t]);
        }
        double z = 0;
        for (int64_t t = 0; t < T; ++t) z += sc[t] == -INFINITY ? 0.0 : std::exp(sc[t] - mx);
        double* o = &out[(static_cast<size_t>(i) * Hq + h) * D];
        for (int64_t t = 0; t < T; ++t) {
          if (sc[t] == -INFINITY) continue;
          const double w = std::exp(sc[t] - mx) / z;
          for (int e = 0; e < D; ++e) o[e] += w * v[t * D + e];
        }
      }
    }
  }
  return out;
}

// Feeds batches of random tokens; optionally checks every Attend output
// against ReferenceAttention taken just before the call's compression event.
class Driver {
 public:
  Driver(KvCache* cache, uint32_t seed) : c_(cache), rng_(seed) {}

  // Returns the max |out - reference| over the batch's attention outputs (all
  // layers) when check is true. Rows: N(0,1) K/V, queries N(0, 1).
  double Step(int n, bool is_prefill, bool check) {
    const KvGeometry& g = c_->geometry();
    const int D = g.head_dim;
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<int32_t> pos(n);
    for (int i = 0; i < n; ++i) pos[i] = next_pos_++;
    double worst = 0;
    for (int l = 0; l < g.n_layers; ++l) {
      std::vector<float> k(static_cast<size_t>(n) * g.n_kv_heads * D), v(k.size()),
          q(static_cast<size_t>(n) * g.n_q_heads * D), out(q.size());
      for (auto& x : k) x = nd(rng_);
      for (auto& x : v) x = nd(rng_);
      for (auto& x : q) x = nd(rng_);
      Fill(l, pos, &k, &v, &q);
      EXPECT_TRUE(c_->Append(l, k.data(), v.data(), pos.data(), n).ok());
      const Status s = c_->Attend(l, q.data(), pos.data(), n, out.data());
      EXPECT_TRUE(s.ok()) << s.message();
      if (check) {
        auto* sc = dynamic_cast<StoreBackedCache*>(c_);
        EXPECT_NE(sc, nullptr);
        if (sc) {
          const auto ref = ReferenceAttention(*sc, l, q, pos);
          for (size_t i = 0; i < ref.size(); ++i)
            worst = std::max(worst, std::fabs(ref[i] - out[i]));
        }
      }
      last_out_.insert(last_out_.end(), out.begin(), out.end());
    }
    const Status e = c_->EndBatch(n, is_prefill);
    EXPECT_TRUE(e.ok()) << e.message();
    last_status_ = e;
    return worst;
  }

  // Decodes `steps` single tokens; returns the most true bits per original
  // element the cache held, now or after any of those steps (a budget held
  // at every step is peak <= B).
  double DecodePeakBits(int steps) {
    double peak = c_->Stats().bits_per_original();
    for (int i = 0; i < steps; ++i) {
      Step(1, false, false);
      peak = std::max(peak, c_->Stats().bits_per_original());
    }
    return peak;
  }

  // Hook for hand-built patterns: called with each layer's fresh rows.
  std::function<void(int layer, const std::vector<int32_t>& pos, std::vector<float>* k,
                     std::vector<float>* v, std::vector<float>* q)>
      fill;

  std::vector<float> last_out_;  // every Attend output so far, concatenated
  Status last_status_;
  int32_t next_pos_ = 0;

 private:
  void Fill(int l, const std::vector<int32_t>& pos, std::vector<float>* k, std::vector<float>* v,
            std::vector<float>* q) {
    if (fill) fill(l, pos, k, v, q);
  }
  KvCache* c_;
  std::mt19937 rng_;
};

}  // namespace hqekv::policy::testing
