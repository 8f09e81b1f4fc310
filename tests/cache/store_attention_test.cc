#include "cache/store_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <vector>

#include "hadamard_format.h"
#include "core/parallel.h"
#include "quant/format.h"
#include "attn/multi_query.h"
#include "attn/multi_query_rows_bf16.h"
#include "attn/multi_query_rows_q16.h"

namespace hqekv::cache {
namespace {

using quant::Format;
using quant::Grouping;

// Naive reference: dequantize every kept token of (layer, head) to fp64 (via
// quant::DequantizeChunk, not the fused kernels), causal mask by original
// position, softmax in fp64, weighted sum. out: [n][n_q_heads][D];
// weights[(i * n_q_heads + h)] = [n_kept] (0 for masked tokens).
void Reference(const KvStore& s, int layer, int n_q_heads, const std::vector<float>& q,
               const std::vector<int32_t>& q_pos, std::vector<double>* out,
               std::vector<std::vector<double>>* weights) {
  const int H = s.n_kv_heads(), D = s.head_dim(), group = n_q_heads / H;
  const int n = static_cast<int>(q_pos.size());
  out->assign(static_cast<size_t>(n) * n_q_heads * D, 0.0);
  weights->assign(static_cast<size_t>(n) * n_q_heads, {});
  for (int g = 0; g < H; ++g) {
    const int64_t m = s.KeptTokens(layer, g);
    std::vector<float> k(m * D), v(m * D);
    s.DequantizeKept(layer, g, k.data(), v.data());
    std::vector<int32_t> pos;
    s.KeptPositions(layer, g, &pos);
    for (int i = 0; i < n; ++i) {
      for (int hh = 0; hh < group; ++hh) {
        const int h = g * group + hh;
        const float* qh = &q[(static_cast<size_t>(i) * n_q_heads + h) * D];
        std::vector<double> sc(m, -INFINITY);
        double mx = -INFINITY;
        for (int64_t j = 0; j < m; ++j) {
          if (pos[j] > q_pos[i]) continue;
          double d = 0;
          for (int c = 0; c < D; ++c) d += static_cast<double>(qh[c]) * k[j * D + c];
          sc[j] = d / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, sc[j]);
        }
        std::vector<double> w(m, 0.0);
        double sum = 0;
        for (int64_t j = 0; j < m; ++j) {
          if (sc[j] == -INFINITY) continue;
          w[j] = std::exp(sc[j] - mx);
          sum += w[j];
        }
        double* o = &(*out)[(static_cast<size_t>(i) * n_q_heads + h) * D];
        for (int64_t j = 0; j < m; ++j) {
          if (sum > 0) w[j] /= sum;
          for (int c = 0; c < D; ++c) o[c] += w[j] * v[j * D + c];
        }
        (*weights)[static_cast<size_t>(i) * n_q_heads + h] = w;
      }
    }
  }
}

std::vector<float> Gaussian(size_t n, std::mt19937& rng, float sd = 1.0f) {
  std::normal_distribution<float> N(0.0f, sd);
  std::vector<float> x(n);
  for (float& v : x) v = N(rng);
  return x;
}

struct Mix {
  const char* name;
  std::vector<std::pair<Format, Format>> tiers;  // (K, V) per sealed chunk, cycled
};

using test_util::Had;

// Builds a store with chunks in the given tiers, some evicted chunks and
// tokens, and a residual; runs attention for a prefill-like batch of queries
// at mixed positions and compares against the reference.
// D, G: head dim and chunk tokens.
void CheckMix(const Mix& mix, int n_q_heads, int H, unsigned seed, int D = 32, int G = 8) {
  SCOPED_TRACE(mix.name);
  const int L = 2, layer = 1;
  KvStoreConfig cfg;
  cfg.n_layers = L;
  cfg.n_kv_heads = H;
  cfg.head_dim = D;
  cfg.chunk = G;
  auto s = std::move(KvStore::Create(cfg)).value();
  std::mt19937 rng(seed);
  const int n_tok = 61;
  std::vector<int32_t> pos(n_tok);
  for (int i = 0; i < n_tok; ++i) pos[i] = 3 + 2 * i;  // gaps: positions are not indices
  const auto k = Gaussian(static_cast<size_t>(n_tok) * H * D, rng);
  const auto v = Gaussian(k.size(), rng);
  ASSERT_TRUE(s->Append(layer, k.data(), v.data(), pos.data(), n_tok).ok());
  ASSERT_TRUE(s->Seal(layer, kAllHeads, 48, quant::F16(), quant::F16()).ok());
  for (int c = 0; c < s->NumChunks(layer, 0); ++c) {
    const auto& t = mix.tiers[c % mix.tiers.size()];
    ASSERT_TRUE(s->SetChunkFormat(layer, kAllHeads, c, t.first, t.second).ok());
  }
  ASSERT_TRUE(s->EvictChunk(layer, 0, 2).ok());                  // one head only
  const std::vector<int32_t> gone = {pos[1], pos[30], pos[55]};  // chunk, chunk, residual
  ASSERT_TRUE(s->EvictTokens(layer, H - 1, gone.data(), 3).ok());
  // Queries: one before every kept token, some in the middle, the last ones.
  const std::vector<int32_t> q_pos = {0, pos[10], pos[29] + 1, pos[47], pos[58], pos[60]};
  const int n = static_cast<int>(q_pos.size());
  const auto q = Gaussian(static_cast<size_t>(n) * n_q_heads * D, rng, 2.0f);

  std::vector<float> out(static_cast<size_t>(n) * n_q_heads * D, -7.0f);
  std::map<std::pair<int, int>, std::vector<float>> got_w;  // (query, q head) -> weights
  std::vector<std::vector<int32_t>> sink_pos(H);
  std::mutex mu;
  AttentionSink sink = [&](const AttentionRow& r) {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(r.kv_head, r.q_head / (n_q_heads / H));  // GQA mapping
    EXPECT_EQ(r.q_pos, q_pos[r.query]);
    got_w[{r.query, r.q_head}].assign(r.weights, r.weights + r.n_kept);
    sink_pos[r.kv_head].assign(r.positions, r.positions + r.n_kept);
  };
  ASSERT_TRUE(
      StoreAttention(*s, layer, n_q_heads, q.data(), q_pos.data(), n, out.data(), &sink).ok());

  std::vector<double> ref;
  std::vector<std::vector<double>> ref_w;
  Reference(*s, layer, n_q_heads, q, q_pos, &ref, &ref_w);
  // Tolerance: fp32 scores/softmax/accumulation over <= 61 tokens of O(1)
  // values, against fp64 over the same dequantized values.
  const double tol = 2e-5;
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], ref[i], tol * (1.0 + std::abs(ref[i]))) << "element " << i;
  }
  ASSERT_EQ(got_w.size(), static_cast<size_t>(n) * n_q_heads);
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < n_q_heads; ++h) {
      const auto& w = got_w[{i, h}];
      const auto& rw = ref_w[static_cast<size_t>(i) * n_q_heads + h];
      ASSERT_EQ(w.size(), rw.size());
      for (size_t j = 0; j < w.size(); ++j) ASSERT_NEAR(w[j], rw[j], 1e-5);
    }
  }
  for (int g = 0; g < H; ++g) {
    std::vector<int32_t> kp;
    s->KeptPositions(layer, g, &kp);
    EXPECT_EQ(sink_pos[g], kp);
  }
  // The first query sees nothing: output 0.
  for (int d = 0; d < D; ++d) EXPECT_EQ(out[d], 0.0f);

  // Decode queries one at a time, split across spans of chunks (2 .. 7 per
  // head: some spans empty, the residual in the last one; serial and on 2
  // threads) == unsplit within fp32 rounding, outputs and sink weights.
  const int saved_threads = NumThreads();
  for (int i = 0; i < n; ++i) {
    const float* qi = q.data() + static_cast<size_t>(i) * n_q_heads * D;
    auto run = [&](int spans, bool parallel, std::vector<float>* o,
                   std::vector<std::vector<float>>* w) {
      SetNumThreads(parallel ? 2 : 1);
      StoreAttentionOptions opt;
      opt.spans_per_head = spans;
      opt.parallel_min_work = parallel ? 0 : INT64_MAX;
      o->assign(static_cast<size_t>(n_q_heads) * D, -7.0f);
      w->assign(n_q_heads, {});
      AttentionSink rows = [&](const AttentionRow& r) {
        std::lock_guard<std::mutex> lock(mu);
        (*w)[r.q_head].assign(r.weights, r.weights + r.n_kept);
      };
      ASSERT_TRUE(
          StoreAttention(*s, layer, n_q_heads, qi, &q_pos[i], 1, o->data(), &rows, opt).ok());
    };
    std::vector<float> base_o, split_o;
    std::vector<std::vector<float>> base_w, split_w;
    run(1, false, &base_o, &base_w);
    for (int spans : {2, 3, 7}) {
      for (bool parallel : {false, true}) {
        SCOPED_TRACE("query " + std::to_string(i) + " spans " + std::to_string(spans) +
                     (parallel ? " parallel" : " serial"));
        run(spans, parallel, &split_o, &split_w);
        for (size_t e = 0; e < base_o.size(); ++e)
          ASSERT_NEAR(split_o[e], base_o[e], 1e-5 * (1.0 + std::abs(base_o[e]))) << e;
        for (int h = 0; h < n_q_heads; ++h) {
          ASSERT_EQ(split_w[h].size(), base_w[h].size());
          for (size_t j = 0; j < base_w[h].size(); ++j)
            ASSERT_NEAR(split_w[h][j], base_w[h][j], 1e-6 + 1e-5 * base_w[h][j]) << h << " " << j;
        }
      }
    }
  }

  // No sink: the walk that keeps its weights unnormalized (exp(s - max),
  // the output scaled by 1 / sum once). The batch on the per-query path
  // (tiled prefill off, fp32 kernels) against the reference with the
  // tolerance above; then each query alone, whole and split into spans,
  // serial and on 2 threads: with the fp32 kernels against the reference,
  // and with the decode defaults (int16 / bf16 kernels where they apply)
  // against the same query with a sink (normalized weights), within fp32
  // rounding as above.
  StoreAttentionOptions per_query;
  per_query.tiled_prefill = false;
  std::vector<float> no_sink(out.size(), -7.0f);
  ASSERT_TRUE(StoreAttention(*s, layer, n_q_heads, q.data(), q_pos.data(), n, no_sink.data(),
                             nullptr, per_query)
                  .ok());
  for (size_t e = 0; e < out.size(); ++e) {
    ASSERT_NEAR(no_sink[e], ref[e], tol * (1.0 + std::abs(ref[e]))) << "element " << e;
  }
  const AttentionSink ignore = [](const AttentionRow&) {};
  for (int i = 0; i < n; ++i) {
    const size_t base = static_cast<size_t>(i) * n_q_heads * D;
    for (int spans : {1, 2, 3, 7}) {
      for (bool parallel : {false, true}) {
        SCOPED_TRACE("no-sink query " + std::to_string(i) + " spans " + std::to_string(spans) +
                     (parallel ? " parallel" : " serial"));
        SetNumThreads(parallel ? 2 : 1);
        StoreAttentionOptions opt;
        opt.spans_per_head = spans;
        opt.parallel_min_work = parallel ? 0 : INT64_MAX;
        auto run = [&](const StoreAttentionOptions& o, const AttentionSink* sk) {
          std::vector<float> r(static_cast<size_t>(n_q_heads) * D, -7.0f);
          EXPECT_TRUE(
              StoreAttention(*s, layer, n_q_heads, q.data() + base, &q_pos[i], 1, r.data(), sk, o)
                  .ok());
          return r;
        };
        const std::vector<float> fast = run(opt, nullptr), sunk = run(opt, &ignore);
        for (size_t e = 0; e < fast.size(); ++e) {
          ASSERT_NEAR(fast[e], sunk[e], 1e-5 * (1.0 + std::abs(sunk[e]))) << e;
        }
        StoreAttentionOptions fp32 = opt;
        fp32.rounded_query = fp32.rounded_weights = false;
        const std::vector<float> exact = run(fp32, nullptr);
        for (size_t e = 0; e < exact.size(); ++e) {
          ASSERT_NEAR(exact[e], ref[base + e], tol * (1.0 + std::abs(ref[base + e]))) << e;
        }
      }
    }
  }
  SetNumThreads(saved_threads);
}

const std::vector<Mix>& Mixes() {
  static const std::vector<Mix> mixes = {
      {"fp16", {{quant::F16(), quant::F16()}}},
      {"fp32", {{quant::F32(), quant::F32()}}},
      {"fp8+int8",
       {{quant::Fp8E4M3(), quant::Int8PerToken()}, {quant::Int8PerToken(), quant::Fp8E5M2()}}},
      {"hqekv tiers",
       {{quant::F16(), quant::F16()},
        {quant::Uniform(4, Grouping::kPerChannel), quant::Uniform(4, Grouping::kPerToken, 16)},
        {quant::Uniform(2, Grouping::kPerChannel), quant::Uniform(2, Grouping::kPerToken, 16)},
        {quant::Normal(1, Grouping::kPerChannel), quant::Normal(1, Grouping::kPerToken, 16)},
        {quant::Uniform(1, Grouping::kPerChannel), quant::Normal(2, Grouping::kPerToken, 32)}}},
      {"hadamard",
       {{Had(quant::Uniform(4, Grouping::kPerToken, 32)),
         Had(quant::Uniform(2, Grouping::kPerToken, 32))},
        {quant::F16(), Had(quant::Fp8E4M3())},
        {Had(quant::Int8PerToken()), quant::Uniform(4, Grouping::kPerToken, 32)}}},
  };
  return mixes;
}

TEST(StoreAttention, MatchesReferenceForEveryTierMix) {
  for (const Mix& m : Mixes()) CheckMix(m, /*n_q_heads=*/8, /*H=*/2, 11);
}

// 12-token chunks of 256 dims: fp16 blocks of 6 KiB (a page or more: the walk
// prefetches their pages and reads them in 8 + 4-token pieces with a later
// block's lines spread over them, store_attention.cc PrefetchCodes /
// FromAheadInPieces) beside int8 blocks of 3 KiB (under a page: prefetched
// only), with an evicted chunk and evicted tokens, as in the mixes above.
TEST(StoreAttention, PageSizedChunksMatchReference) {
  const Mix fp16{"fp16 6 KiB", {{quant::F16(), quant::F16()}}};
  CheckMix(fp16, /*n_q_heads=*/8, /*H=*/2, 12, /*D=*/256, /*G=*/12);
  const Mix mixed{"fp16 + int8",
                  {{quant::F16(), quant::F16()}, {quant::Int8PerToken(), quant::Int8PerToken()}}};
  CheckMix(mixed, /*n_q_heads=*/4, /*H=*/2, 13, /*D=*/256, /*G=*/12);
}

TEST(StoreAttention, MhaAndMqaAndParallelHeads) {
  const Mix& m = Mixes()[3];
  CheckMix(m, 3, 3, 5);  // MHA: group 1
  CheckMix(m, 4, 1, 6);  // MQA: every query head reads KV head 0
  CheckMix(m, 8, 4, 7);  // GQA: 2 query heads per KV head
}

TEST(StoreAttention, ParallelAndSerialAgreeExactly) {
  const int D = 64, H = 4, nq = 8;
  KvStoreConfig cfg;
  cfg.n_layers = 1;
  cfg.n_kv_heads = H;
  cfg.head_dim = D;
  auto s = std::move(KvStore::Create(cfg)).value();
  std::mt19937 rng(3);
  const int n = 100;
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = i;
  const auto k = Gaussian(static_cast<size_t>(n) * H * D, rng), v = Gaussian(k.size(), rng);
  ASSERT_TRUE(s->Append(0, k.data(), v.data(), pos.data(), n).ok());
  ASSERT_TRUE(s->Seal(0, kAllHeads, 64, quant::Uniform(2, Grouping::kPerChannel),
                      quant::Uniform(2, Grouping::kPerToken))
                  .ok());
  const auto q = Gaussian(static_cast<size_t>(n) * nq * D, rng);
  std::vector<float> a(q.size()), b(q.size());
  StoreAttentionOptions serial, parallel;
  serial.parallel_min_work = INT64_MAX;
  parallel.parallel_min_work = 0;
  const int saved = NumThreads();
  SetNumThreads(2);
  ASSERT_TRUE(StoreAttention(*s, 0, nq, q.data(), pos.data(), n, a.data(), nullptr, serial).ok());
  ASSERT_TRUE(StoreAttention(*s, 0, nq, q.data(), pos.data(), n, b.data(), nullptr, parallel).ok());
  SetNumThreads(saved);
  EXPECT_EQ(a, b);
}

// Prefill: every prompt token queries the whole (long, unsealed) residual.
TEST(StoreAttention, PrefillOverLongResidualMatchesReference) {
  const int D = 16, H = 2, nq = 4, n = 150;
  KvStoreConfig cfg;
  cfg.n_layers = 1;
  cfg.n_kv_heads = H;
  cfg.head_dim = D;
  auto s = std::move(KvStore::Create(cfg)).value();
  std::mt19937 rng(9);
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = i;
  const auto k = Gaussian(static_cast<size_t>(n) * H * D, rng), v = Gaussian(k.size(), rng);
  ASSERT_TRUE(s->Append(0, k.data(), v.data(), pos.data(), n).ok());
  const auto q = Gaussian(static_cast<size_t>(n) * nq * D, rng);
  std::vector<float> out(q.size());
  ASSERT_TRUE(StoreAttention(*s, 0, nq, q.data(), pos.data(), n, out.data()).ok());
  std::vector<double> ref;
  std::vector<std::vector<double>> ref_w;
  Reference(*s, 0, nq, q, pos, &ref, &ref_w);
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_NEAR(out[i], ref[i], 2e-5 * (1 + std::abs(ref[i])));
}

// A residual of quantized rows (KvStoreConfig::residual_format) is read as
// its reconstruction: decode and prefill match the fp64 reference over
// DequantizeKept, chunks sealed from those rows included; a rotated format
// reads the rotated query and accumulates V in the rotated domain.
TEST(StoreAttention, QuantizedResidualMatchesReference) {
  const int D = 64, H = 2, nq = 4, n = 90;
  quant::Format q4had = quant::GgmlBlock(quant::Kind::kQ4_0);
  q4had.hadamard = true;
  for (const quant::Format& rf :
       {quant::GgmlBlock(quant::Kind::kQ8_0), quant::GgmlBlock(quant::Kind::kQ4_1), q4had}) {
    SCOPED_TRACE(quant::FormatName(rf));
    KvStoreConfig cfg;
    cfg.n_layers = 1;
    cfg.n_kv_heads = H;
    cfg.head_dim = D;
    cfg.residual_reserve = 0;
    cfg.residual_format = rf;
    auto s = std::move(KvStore::Create(cfg)).value();
    std::mt19937 rng(21);
    std::vector<int32_t> pos(n);
    for (int i = 0; i < n; ++i) pos[i] = i;
    const auto k = Gaussian(static_cast<size_t>(n) * H * D, rng), v = Gaussian(k.size(), rng);
    ASSERT_TRUE(s->Append(0, k.data(), v.data(), pos.data(), n).ok());
    // The prompt attends over its own quantized rows (as llama.cpp's cache).
    const auto q = Gaussian(static_cast<size_t>(n) * nq * D, rng);
    std::vector<float> out(q.size());
    StoreAttentionOptions per_query;
    per_query.tiled_prefill = false;
    per_query.rounded_query = false;  // the fp32 query (the int16 one has its own tests)
    ASSERT_TRUE(
        StoreAttention(*s, 0, nq, q.data(), pos.data(), n, out.data(), nullptr, per_query).ok());
    std::vector<double> ref;
    std::vector<std::vector<double>> ref_w;
    Reference(*s, 0, nq, q, pos, &ref, &ref_w);
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], ref[i], 5e-5 * (1 + std::abs(ref[i]))) << i;
    // Two chunks sealed (u4 K per channel, q8_0 V), 26 rows left: one decode query.
    ASSERT_TRUE(s->Seal(0, kAllHeads, 64, quant::Uniform(4, quant::Grouping::kPerChannel, 32),
                        quant::GgmlBlock(quant::Kind::kQ8_0))
                    .ok());
    const std::vector<float> q1(q.end() - nq * D, q.end());
    const std::vector<int32_t> p1 = {n - 1};
    std::vector<float> o1(q1.size());
    ASSERT_TRUE(
        StoreAttention(*s, 0, nq, q1.data(), p1.data(), 1, o1.data(), nullptr, per_query).ok());
    Reference(*s, 0, nq, q1, p1, &ref, &ref_w);
    for (size_t i = 0; i < o1.size(); ++i)
      ASSERT_NEAR(o1[i], ref[i], 5e-5 * (1 + std::abs(ref[i]))) << i;
  }
}

// One layer of H KV heads x D holding n Gaussian tokens at positions 0..n-1,
// nothing sealed yet (the int16 decode tests below); null if Append fails.
std::unique_ptr<KvStore> RandomStore(int D, int H, int n, std::mt19937& rng) {
  KvStoreConfig cfg;
  cfg.n_layers = 1;
  cfg.n_kv_heads = H;
  cfg.head_dim = D;
  auto s = std::move(KvStore::Create(cfg)).value();
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = i;
  const auto k = Gaussian(static_cast<size_t>(n) * H * D, rng), v = Gaussian(k.size(), rng);
  if (!s->Append(0, k.data(), v.data(), pos.data(), n).ok()) return nullptr;
  return s;
}

// The largest |v| among layer 0's kept values as stored (dequantized): the
// scale of the int16 paths' error bounds.
float MaxKeptValue(const KvStore& s, int D, int H) {
  float max_v = 0.0f;
  for (int g = 0; g < H; ++g) {
    const int64_t m = s.KeptTokens(0, g);
    std::vector<float> kk(m * D), vv(m * D);
    s.DequantizeKept(0, g, kk.data(), vv.data());
    for (float x : vv) max_v = std::max(max_v, std::abs(x));
  }
  return max_v;
}

// Decode steps score per-channel K chunks with an int16 query
// (StoreAttentionOptions::rounded_query, attn::DotChunkMultiInt16Query) where
// the CPU has the kernel. With it off, decode matches the fp64 reference as
// before; with it on, outputs stay close to the fp32-query ones (empirical
// bound: 2e-4 of max|v̂| here, measured 1.5e-5; each score moves by a sum of D
// independent query roundings of at most half a step; the model-level check
// is in docs/performance.md) and prefill batches are unchanged.
TEST(StoreAttention, DecodeInt16QueryStaysCloseToTheFp32Query) {
  const int D = 128, H = 2, nq = 8, n = 32 * 10 + 5;
  std::mt19937 rng(21);
  auto s = RandomStore(D, H, n, rng);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Seal(0, kAllHeads, 32 * 10, quant::F16(), quant::F16()).ok());
  const Format kf[] = {
      quant::Uniform(2, Grouping::kPerChannel), quant::Uniform(4, Grouping::kPerChannel),
      quant::Uniform3(Grouping::kPerChannel),   quant::Normal(1, Grouping::kPerChannel),
      quant::Uniform(1, Grouping::kPerChannel), Had(quant::Uniform(2, Grouping::kPerChannel))};
  for (int c = 0; c < s->NumChunks(0, 0); ++c) {
    ASSERT_TRUE(
        s->SetChunkFormat(0, kAllHeads, c, kf[c % 6], quant::Uniform(2, Grouping::kPerToken, 32))
            .ok());
  }
  const float max_v = MaxKeptValue(*s, D, H);
  const auto q = Gaussian(static_cast<size_t>(nq) * D, rng);
  const int32_t qp = n;
  StoreAttentionOptions on, off;
  off.rounded_query = false;
  on.rounded_weights = off.rounded_weights = false;  // values: DecodeInt16Weights... below
  std::vector<float> a(q.size()), b(q.size());
  ASSERT_TRUE(StoreAttention(*s, 0, nq, q.data(), &qp, 1, a.data(), nullptr, on).ok());
  ASSERT_TRUE(StoreAttention(*s, 0, nq, q.data(), &qp, 1, b.data(), nullptr, off).ok());
  std::vector<double> ref;
  std::vector<std::vector<double>> ref_w;
  Reference(*s, 0, nq, q, {qp}, &ref, &ref_w);
  float worst = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(b[i], ref[i], 2e-5 * (1 + std::abs(ref[i]))) << i;
    ASSERT_NEAR(a[i], b[i], 2e-4f * max_v) << i;
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  if (attn::DotChunkMultiInt16Query(kf[0], s->Chunk(0, 0, 0).k_codes, s->Chunk(0, 0, 0).k_meta, 32,
                                    D, q.data(), D, 1, a.data(), 32)) {
    EXPECT_GT(worst, 0.0f) << "the int16 query never ran";
  }
  // A batch of 2 queries keeps the fp32 query: bit-identical either way.
  const std::vector<int32_t> qp2 = {n - 1, n};
  const auto q2 = Gaussian(static_cast<size_t>(2) * nq * D, rng);
  std::vector<float> a2(q2.size()), b2(q2.size());
  ASSERT_TRUE(StoreAttention(*s, 0, nq, q2.data(), qp2.data(), 2, a2.data(), nullptr, on).ok());
  ASSERT_TRUE(StoreAttention(*s, 0, nq, q2.data(), qp2.data(), 2, b2.data(), nullptr, off).ok());
  EXPECT_EQ(a2, b2);
}

// Decode steps accumulate per-token V chunks with int16 weights
// (StoreAttentionOptions::rounded_weights, attn::AxpyChunkMultiInt16Weights)
// where the CPU has the kernel. With it off, decode matches the fp64
// reference as before; with it on, outputs stay close to the fp32-weight
// ones (empirical bound 2e-4 of max|v̂|: each output moves by at most half a
// weight step per code and chunk, weights <= 1; the model-level check is in
// docs/performance.md), for whole heads, split spans and with a sink
// (normalized weights), and prefill batches are unchanged.
TEST(StoreAttention, DecodeInt16WeightsStayCloseToTheFp32Weights) {
  const int D = 128, H = 2, nq = 8, n = 32 * 12 + 5;
  std::mt19937 rng(23);
  auto s = RandomStore(D, H, n, rng);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Seal(0, kAllHeads, 32 * 12, quant::F16(), quant::F16()).ok());
  const Format vf[] = {
      quant::Uniform(2, Grouping::kPerToken, 32),  quant::Uniform(4, Grouping::kPerToken, 32),
      quant::Uniform(1, Grouping::kPerToken, 32),  quant::Normal(1, Grouping::kPerToken, 32),
      quant::Uniform(8, Grouping::kPerToken, 128), Had(quant::Uniform(2, Grouping::kPerToken, 64))};
  for (int c = 0; c < s->NumChunks(0, 0); ++c) {
    ASSERT_TRUE(
        s->SetChunkFormat(0, kAllHeads, c, quant::Uniform(2, Grouping::kPerChannel), vf[c % 6])
            .ok());
  }
  const float max_v = MaxKeptValue(*s, D, H);
  const auto q = Gaussian(static_cast<size_t>(nq) * D, rng);
  const int32_t qp = n;
  std::vector<double> ref;
  std::vector<std::vector<double>> ref_w;
  Reference(*s, 0, nq, q, {qp}, &ref, &ref_w);
  float worst = 0.0f;
  for (int spans : {1, 3}) {
    for (bool with_sink : {false, true}) {
      SCOPED_TRACE("spans=" + std::to_string(spans) + " sink=" + std::to_string(with_sink));
      StoreAttentionOptions on, off;
      on.rounded_query = off.rounded_query = false;  // scores: the fp32 query
      off.rounded_weights = false;
      on.spans_per_head = off.spans_per_head = spans;
      AttentionSum sum_on(H), sum_off(H);
      const AttentionSink* sink_on = with_sink ? &sum_on.sink() : nullptr;
      const AttentionSink* sink_off = with_sink ? &sum_off.sink() : nullptr;
      std::vector<float> a(q.size()), b(q.size());
      ASSERT_TRUE(StoreAttention(*s, 0, nq, q.data(), &qp, 1, a.data(), sink_on, on).ok());
      ASSERT_TRUE(StoreAttention(*s, 0, nq, q.data(), &qp, 1, b.data(), sink_off, off).ok());
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(b[i], ref[i], 2e-5 * (1 + std::abs(ref[i]))) << i;
        ASSERT_NEAR(a[i], b[i], 2e-4f * max_v) << i;
        worst = std::max(worst, std::abs(a[i] - b[i]));
      }
    }
  }
  std::vector<float> probe(D, 0.0f);
  const std::vector<float> w(32, 0.5f);
  if (attn::AxpyChunkMultiInt16Weights(vf[0], s->Chunk(0, 0, 0).v_codes, s->Chunk(0, 0, 0).v_meta,
                                       32, D, w.data(), 32, 1, probe.data(), D)) {
    EXPECT_GT(worst, 0.0f) << "the int16 weights never ran";
  }
  // A batch of 2 queries keeps the fp32 weights: bit-identical either way.
  StoreAttentionOptions on, off;
  off.rounded_weights = false;
  const std::vector<int32_t> qp2 = {n - 1, n};
  const auto q2 = Gaussian(static_cast<size_t>(2) * nq * D, rng);
  std::vector<float> a2(q2.size()), b2(q2.size());
  ASSERT_TRUE(StoreAttention(*s, 0, nq, q2.data(), qp2.data(), 2, a2.data(), nullptr, on).ok());
  ASSERT_TRUE(StoreAttention(*s, 0, nq, q2.data(), qp2.data(), 2, b2.data(), nullptr, off).ok());
  EXPECT_EQ(a2, b2);
}

// Decode steps over fp8 chunks use the bf16 kernels (attn/multi_query_rows_bf16.h)
// under the same options where the CPU has them: the query rows are prepared
// once per query and KV head (Hadamard chunks read the rotated rows, plain ones
// the others) and w·s rounded to bf16. Outputs stay close to the fp32 path
// (empirical bound 2e-3 of max|v̂| here, measured 2.5e-4: each score moves by at most 2^-8 of
// sum |q·k| / sqrt(D); the model-level check is in docs/performance.md), for
// whole heads, split spans and with a sink, and prefill batches are unchanged.
TEST(StoreAttention, DecodeFp8Bf16StaysCloseToTheFp32Kernels) {
  const int D = 128, H = 2, nq = 8, n = 32 * 10 + 5;
  std::mt19937 rng(29);
  auto s = RandomStore(D, H, n, rng);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Seal(0, kAllHeads, 32 * 10, quant::F16(), quant::F16()).ok());
  const Format ff[] = {quant::Fp8E4M3(), quant::Fp8E5M2(), Had(quant::Fp8E4M3())};
  for (int c = 0; c < s->NumChunks(0, 0); ++c) {
    ASSERT_TRUE(s->SetChunkFormat(0, kAllHeads, c, ff[c % 3], ff[(c + 1) % 3]).ok());
  }
  const float max_v = MaxKeptValue(*s, D, H);
  const auto q = Gaussian(static_cast<size_t>(nq) * D, rng);
  const int32_t qp = n;
  std::vector<double> ref;
  std::vector<std::vector<double>> ref_w;
  Reference(*s, 0, nq, q, {qp}, &ref, &ref_w);
  float worst = 0.0f;
  for (int spans : {1, 3}) {
    for (bool with_sink : {false, true}) {
      SCOPED_TRACE("spans=" + std::to_string(spans) + " sink=" + std::to_string(with_sink));
      StoreAttentionOptions on, off;
      off.rounded_query = off.rounded_weights = false;
      on.spans_per_head = off.spans_per_head = spans;
      AttentionSum sum_on(H), sum_off(H);
      const AttentionSink* sink_on = with_sink ? &sum_on.sink() : nullptr;
      const AttentionSink* sink_off = with_sink ? &sum_off.sink() : nullptr;
      std::vector<float> a(q.size()), b(q.size());
      ASSERT_TRUE(StoreAttention(*s, 0, nq, q.data(), &qp, 1, a.data(), sink_on, on).ok());
      ASSERT_TRUE(StoreAttention(*s, 0, nq, q.data(), &qp, 1, b.data(), sink_off, off).ok());
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(b[i], ref[i], 2e-5 * (1 + std::abs(ref[i]))) << i;
        ASSERT_NEAR(a[i], b[i], 2e-3f * max_v) << i;
        worst = std::max(worst, std::abs(a[i] - b[i]));
      }
    }
  }
  // The walk takes the bf16 kernels where this CPU prefers them
  // (attn::Bf16RowsPreferred: AVX512_BF16, not Intel); elsewhere the
  // rounded options change nothing for fp8 chunks.
  if (attn::Bf16RowsPreferred()) {
    EXPECT_GT(worst, 0.0f) << "the bf16 kernels never ran";
  } else {
    EXPECT_EQ(worst, 0.0f) << "fp8 chunks left the fp32 kernels where they are preferred";
  }
  // A batch of 2 queries keeps the fp32 kernels: bit-identical either way.
  StoreAttentionOptions on, off;
  off.rounded_query = off.rounded_weights = false;
  const std::vector<int32_t> qp2 = {n - 1, n};
  const auto q2 = Gaussian(static_cast<size_t>(2) * nq * D, rng);
  std::vector<float> a2(q2.size()), b2(q2.size());
  ASSERT_TRUE(StoreAttention(*s, 0, nq, q2.data(), qp2.data(), 2, a2.data(), nullptr, on).ok());
  ASSERT_TRUE(StoreAttention(*s, 0, nq, q2.data(), qp2.data(), 2, b2.data(), nullptr, off).ok());
  EXPECT_EQ(a2, b2);
}

// Decode steps over llama.cpp q8_0 chunks use the int16 kernels of
// attn/multi_query_rows_q16.h under the same options where the CPU has them:
// the query rows rounded to int16 and laid out once per query and KV head
// (Hadamard chunks read the rotated rows, plain ones the others; fp8 chunks
// in between prepare their own bf16 rows), and w·d rounded to int16 per
// (token, block). Outputs stay close to the fp32 path (empirical bound 2e-4
// of max|v̂|, as the int16 tests above; the model-level check is in
// docs/performance.md), for whole heads, split spans and with a sink, and
// prefill batches are unchanged.
TEST(StoreAttention, DecodeQ8_0Int16StaysCloseToTheFp32Kernels) {
  const int D = 128, H = 2, nq = 8, n = 32 * 10 + 5;
  std::mt19937 rng(31);
  auto s = RandomStore(D, H, n, rng);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Seal(0, kAllHeads, 32 * 10, quant::F16(), quant::F16()).ok());
  const Format q8 = quant::GgmlBlock(quant::Kind::kQ8_0);
  const Format ff[] = {q8, Had(q8), quant::Fp8E4M3(), q8, quant::Int8PerToken()};
  for (int c = 0; c < s->NumChunks(0, 0); ++c) {
    ASSERT_TRUE(s->SetChunkFormat(0, kAllHeads, c, ff[c % 5], ff[(c + 1) % 5]).ok());
  }
  const float max_v = MaxKeptValue(*s, D, H);
  const auto q = Gaussian(static_cast<size_t>(nq) * D, rng);
  const int32_t qp = n;
  std::vector<double> ref;
  std::vector<std::vector<double>> ref_w;
  Reference(*s, 0, nq, q, {qp}, &ref, &ref_w);
  float worst = 0.0f;
  for (int spans : {1, 3}) {
    for (bool with_sink : {false, true}) {
      SCOPED_TRACE("spans=" + std::to_string(spans) + " sink=" + std::to_string(with_sink));
      StoreAttentionOptions on, off;
      off.rounded_query = off.rounded_weights = false;
      on.spans_per_head = off.spans_per_head = spans;
      AttentionSum sum_on(H), sum_off(H);
      const AttentionSink* sink_on = with_sink ? &sum_on.sink() : nullptr;
      const AttentionSink* sink_off = with_sink ? &sum_off.sink() : nullptr;
      std::vector<float> a(q.size()), b(q.size());
      ASSERT_TRUE(StoreAttention(*s, 0, nq, q.data(), &qp, 1, a.data(), sink_on, on).ok());
      ASSERT_TRUE(StoreAttention(*s, 0, nq, q.data(), &qp, 1, b.data(), sink_off, off).ok());
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(b[i], ref[i], 2e-5 * (1 + std::abs(ref[i]))) << i;
        ASSERT_NEAR(a[i], b[i], 2e-4f * max_v) << i;
        worst = std::max(worst, std::abs(a[i] - b[i]));
      }
    }
  }
  attn::Q8_0Query probe;
  if (attn::PrepareQ8_0Query(q.data(), D, 1, D, &probe)) {
    EXPECT_GT(worst, 0.0f) << "the q8_0 int16 kernels never ran";
  }
  // A batch of 2 queries keeps the fp32 kernels: bit-identical either way.
  StoreAttentionOptions on, off;
  off.rounded_query = off.rounded_weights = false;
  const std::vector<int32_t> qp2 = {n - 1, n};
  const auto q2 = Gaussian(static_cast<size_t>(2) * nq * D, rng);
  std::vector<float> a2(q2.size()), b2(q2.size());
  ASSERT_TRUE(StoreAttention(*s, 0, nq, q2.data(), qp2.data(), 2, a2.data(), nullptr, on).ok());
  ASSERT_TRUE(StoreAttention(*s, 0, nq, q2.data(), qp2.data(), 2, b2.data(), nullptr, off).ok());
  EXPECT_EQ(a2, b2);
}

TEST(StoreAttention, SinkSkipsEarlyQueries) {
  KvStoreConfig cfg;
  cfg.n_layers = 1;
  cfg.n_kv_heads = 1;
  cfg.head_dim = 8;
  auto s = std::move(KvStore::Create(cfg)).value();
  std::vector<float> k(5 * 8, 0.25f), v(5 * 8, 1.0f);
  std::vector<int32_t> pos = {0, 1, 2, 3, 4};
  ASSERT_TRUE(s->Append(0, k.data(), v.data(), pos.data(), 5).ok());
  std::vector<float> q(5 * 2 * 8, 0.5f), out(q.size());
  int calls = 0;
  AttentionSink sink = [&](const AttentionRow& r) {
    EXPECT_GE(r.query, 3);
    ++calls;
    // Equal keys: uniform weights over the visible tokens.
    for (int j = 0; j < r.n_kept; ++j) {
      EXPECT_FLOAT_EQ(r.weights[j], j <= r.q_pos ? 1.0f / (r.q_pos + 1) : 0.0f);
    }
  };
  StoreAttentionOptions opt;
  opt.first_sink_query = 3;
  ASSERT_TRUE(StoreAttention(*s, 0, 2, q.data(), pos.data(), 5, out.data(), &sink, opt).ok());
  EXPECT_EQ(calls, 2 * 2);
  for (float o : out) EXPECT_FLOAT_EQ(o, 1.0f);  // every V row is 1
}

TEST(StoreAttention, AttentionSumAddsRowsPerKvHead) {
  KvStoreConfig cfg;
  cfg.n_layers = 1;
  cfg.n_kv_heads = 2;
  cfg.head_dim = 8;
  auto s = std::move(KvStore::Create(cfg)).value();
  std::vector<float> k(4 * 2 * 8, 0.0f), v(k.size(), 1.0f);  // equal keys: uniform weights
  std::vector<int32_t> pos = {10, 11, 12, 13};
  ASSERT_TRUE(s->Append(0, k.data(), v.data(), pos.data(), 4).ok());
  const int32_t gone = 11;
  ASSERT_TRUE(s->EvictTokens(0, 1, &gone, 1).ok());
  AttentionSum sum(2);
  std::vector<float> q(4 * 4 * 8, 1.0f), out(q.size());
  ASSERT_TRUE(StoreAttention(*s, 0, 4, q.data(), pos.data(), 4, out.data(), &sum.sink()).ok());
  // Head 0: kept 10..13; query at 10+i sees i+1 tokens; 2 query heads.
  EXPECT_EQ(sum.positions(0), (std::vector<int32_t>{10, 11, 12, 13}));
  EXPECT_EQ(sum.rows(0), 8);
  const float want0[] = {2 * (1 + 1.f / 2 + 1.f / 3 + 1.f / 4), 2 * (1.f / 2 + 1.f / 3 + 1.f / 4),
                         2 * (1.f / 3 + 1.f / 4), 2 * (1.f / 4)};
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(sum.sums(0)[j], want0[j], 1e-6);
  // Head 1: kept 10, 12, 13; queries at 10, 11 see 1 token, 12 sees 2, 13 sees 3.
  EXPECT_EQ(sum.positions(1), (std::vector<int32_t>{10, 12, 13}));
  const float want1[] = {2 * (1 + 1 + 1.f / 2 + 1.f / 3), 2 * (1.f / 2 + 1.f / 3), 2 * (1.f / 3)};
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(sum.sums(1)[j], want1[j], 1e-6);
  sum.Clear();
  EXPECT_TRUE(sum.sums(0).empty());
  EXPECT_EQ(sum.rows(1), 0);
}

TEST(StoreAttention, RejectsBadArguments) {
  KvStoreConfig cfg;
  cfg.n_layers = 1;
  cfg.n_kv_heads = 2;
  cfg.head_dim = 8;
  auto s = std::move(KvStore::Create(cfg)).value();
  std::vector<float> q(3 * 8), out(q.size(), 9.0f);
  const int32_t p = 0;
  EXPECT_FALSE(StoreAttention(*s, 0, 3, q.data(), &p, 1, out.data()).ok());  // 3 % 2 != 0
  EXPECT_FALSE(StoreAttention(*s, 1, 2, q.data(), &p, 1, out.data()).ok());  // bad layer
  EXPECT_FALSE(StoreAttention(*s, 0, 2, nullptr, &p, 1, out.data()).ok());
  EXPECT_EQ(out[0], 9.0f);
}

}  // namespace
}  // namespace hqekv::cache
