// KvStores of random tokens sealed into the tier layouts of the store
// attention benchmarks (bench/store_attention_bench.cc; the ggml side-by-side
// harness bench/ggml_side/anchors.cc builds the same stores). Layouts:
//   f16        every chunk K f16 / V f16 (the SIMD fp16 baseline)
//   u4, u2     K uB per-channel, V uB per-token groups of 32 (KIVI)
//   hqekv2     HqeKV bits=2 tiers: 2 fp16 chunks, then per chunk u4 / u2 /
//              n1 / evicted with the built-in ratios .0315/.9221/.0299/.0165
//   hqekv3.2   the same with .6373/.3068/.0374/.0186
//   q8_0, q4_0, q5_1, q8_0-q4_0   llama.cpp cache types (K-V), policy `llama`
#pragma once

#include <memory>
#include <random>
#include <string>
#include <utility>

#include "bench_kv.h"
#include "cache/kv_store.h"
#include "quant/format.h"

namespace hqekv::bench {

struct StoreTier {
  quant::Format k, v;
  bool evict = false;
};

// Tier of chunk c of a layout (deterministic: the same tiers in every run).
inline StoreTier TierOf(const std::string& layout, int c, std::mt19937& rng) {
  namespace q = quant;
  const StoreTier f16{q::F16(), q::F16()};
  const StoreTier u4{q::Uniform(4, q::Grouping::kPerChannel),
                     q::Uniform(4, q::Grouping::kPerToken, 32)};
  const StoreTier u2{q::Uniform(2, q::Grouping::kPerChannel),
                     q::Uniform(2, q::Grouping::kPerToken, 32)};
  const StoreTier n1{q::Normal(1, q::Grouping::kPerChannel),
                     q::Normal(1, q::Grouping::kPerToken, 32)};
  if (layout == "f16") return f16;
  if (layout == "u4") return u4;
  if (layout == "u2") return u2;
  // llama.cpp cache types (policy llama:ctk=..,ctv=..), per token blocks of 32.
  if (layout == "q8_0-q4_0") return {q::GgmlBlock(q::Kind::kQ8_0), q::GgmlBlock(q::Kind::kQ4_0)};
  for (auto [name, kind] : {std::pair{"q8_0", q::Kind::kQ8_0}, std::pair{"q4_0", q::Kind::kQ4_0},
                            std::pair{"q5_1", q::Kind::kQ5_1}}) {
    if (layout == name) return {q::GgmlBlock(kind), q::GgmlBlock(kind)};
  }
  if (c < 2) return f16;  // HqeKV keeps the top-2 chunks in fp16
  const double r4 = layout == "hqekv2" ? 0.0315 : 0.6373;
  const double r2 = layout == "hqekv2" ? 0.9221 : 0.3068;
  const double r1 = layout == "hqekv2" ? 0.0299 : 0.0374;
  const double x = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  if (x < r4) return u4;
  if (x < r4 + r2) return u2;
  if (x < r4 + r2 + r1) return n1;
  StoreTier e = u2;
  e.evict = true;
  return e;
}

// One layer of n random tokens (`n_kv_heads` x `head_dim`), every whole chunk
// but the newest `residual` tokens sealed into its tier (nullptr on error).
inline std::unique_ptr<cache::KvStore> BuildStore(const std::string& layout, int n, int n_kv_heads,
                                                  int head_dim, int residual) {
  cache::KvStoreConfig cfg;
  cfg.n_layers = 1;
  cfg.n_kv_heads = n_kv_heads;
  cfg.head_dim = head_dim;
  auto made = cache::KvStore::Create(cfg);
  if (!made.ok()) return nullptr;
  std::unique_ptr<cache::KvStore> s = std::move(made).value();
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  if (!AppendRandomTokens(*s, n, 1024, static_cast<size_t>(n_kv_heads) * head_dim, rng, nd).ok())
    return nullptr;
  const int chunks = (n - residual) / 32;
  std::mt19937 tier_rng(77);
  for (int c = 0; c < chunks; ++c) {
    const StoreTier t = TierOf(layout, c, tier_rng);
    if (!s->Seal(0, cache::kAllHeads, 32, t.k, t.v).ok()) return nullptr;
    if (t.evict && !s->EvictChunk(0, cache::kAllHeads, c).ok()) return nullptr;
  }
  return s;
}

}  // namespace hqekv::bench
