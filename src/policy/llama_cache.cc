#include "policy/llama_cache.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "cache/page_pool.h"
#include "cache/state_io.h"
#include "core/half.h"
#include "core/parallel.h"
#include "policy/quant_cache.h"
#include "policy/store_cache.h"
#include "policy/true_bits.h"

namespace hqekv::policy {
namespace {

// The earlier variant's fp16 residual (residual=32): tokens wait in fp16
// until a whole 32-token chunk can be sealed.
constexpr int kLegacyResidual = 32;
// Tokens per page of the per-token cache (the last page is kept at its exact
// size, so no page holds empty slots).
constexpr int64_t kLlamaPage = 32;
// llama.cpp's CPU flash attention takes its tiled fp32 path (Q kept in fp32,
// fp32 accumulators) for f16 K and V when a batch has at least this many
// queries (ggml-cpu's GGML_FA_TILE_Q).
constexpr int kTiledMinQueries = 64;
// bits= holds the budget at every token count from this many on (or from
// the full context when it is shorter).
constexpr int64_t kBudgetFromTokens = 64;

quant::Format TypeFormat(const std::string& name) {
  if (name == "f16") return quant::F16();
  // The table's choices are exactly these names (LlamaCacheTypes).
  auto f = quant::ParseFormat(name);
  return f.ok() ? *f : quant::F16();
}

bool IsQuantized(const quant::Format& f) { return f.kind != quant::Kind::kF16; }

int64_t RowBytes(const quant::Format& f, int D) {
  return static_cast<int64_t>(quant::CodeBytes(f, 1, D) + quant::MetaBytes(f, 1, D));
}

using PageVec = cache::CountedVector<uint8_t>;

// Mean KL (nats per position) of llama.cpp's own cache types against its f16
// run, measured with the real llama.cpp (node-llama-cpp 3.22.1, CPU build)
// on refmodel-4l (head_dim 64), WikiText-2 test, `--ctx 2048 --prefill 1536
// --max-tokens 2048`, rotation on, 512 scored positions
// (bench/llamacpp_side/pair_table.mjs, docs/results/llamacpp-side/). Only the
// order matters: bits= takes the first pair that fits. K's type matters more
// than V's (q8_0/q4_0 6.7e-3, q4_0/q8_0 1.4e-2).
struct PairKl {
  const char* k;
  const char* v;
  double kl;
};
constexpr PairKl kMeasuredPairs[] = {
    {"f16", "f16", 0.0},  // the reference itself
    {"f16", "q8_0", 3.420e-5},  {"q8_0", "f16", 6.907e-5},  {"q8_0", "q8_0", 9.406e-5},
    {"q8_0", "q5_1", 1.436e-3}, {"f16", "q5_1", 1.520e-3},  {"f16", "q5_0", 1.659e-3},
    {"q8_0", "q5_0", 1.832e-3}, {"q5_1", "q8_0", 3.171e-3}, {"q5_1", "f16", 3.180e-3},
    {"q5_0", "f16", 3.825e-3},  {"q5_0", "q8_0", 4.273e-3}, {"q5_0", "q5_1", 4.443e-3},
    {"q5_1", "q5_1", 4.535e-3}, {"q5_1", "q5_0", 5.172e-3}, {"q5_0", "q5_0", 5.755e-3},
    {"f16", "q4_0", 6.590e-3},  {"q8_0", "q4_0", 6.739e-3}, {"q8_0", "q4_1", 6.746e-3},
    {"f16", "q4_1", 6.965e-3},  {"q5_1", "q4_1", 8.250e-3}, {"q5_0", "q4_0", 9.624e-3},
    {"q5_1", "q4_0", 1.003e-2}, {"q5_0", "q4_1", 1.068e-2}, {"q4_0", "q5_0", 1.343e-2},
    {"q4_0", "f16", 1.367e-2},  {"q4_0", "q8_0", 1.375e-2}, {"q4_0", "q5_1", 1.384e-2},
    {"q4_1", "q8_0", 1.967e-2}, {"q4_1", "f16", 1.986e-2},  {"q4_1", "q5_0", 2.054e-2},
    {"q4_1", "q5_1", 2.151e-2}, {"q4_0", "q4_1", 2.196e-2}, {"q4_0", "q4_0", 2.231e-2},
    {"q4_1", "q4_1", 2.488e-2}, {"q4_1", "q4_0", 2.782e-2},
};

// One layer of the per-token cache: records of (int32 position, H K rows,
// H V rows) in pages of kLlamaPage tokens; every allocation goes through
// `counter` (declared first: the allocators point at it).
struct LlamaLayer {
  LlamaLayer() : pages(cache::CountedAllocator<PageVec>(&counter)) {}
  LlamaLayer(const LlamaLayer&) = delete;
  LlamaLayer& operator=(const LlamaLayer&) = delete;
  int64_t counter = 0;
  cache::CountedVector<PageVec> pages;
  int64_t tokens = 0;
};

class LlamaTokenCache final : public KvCache {
 public:
  LlamaTokenCache(const KvGeometry& g, std::string describe, quant::Format kf, quant::Format vf,
                  bool rot)
      : g_(g), describe_(std::move(describe)), kf_(kf), vf_(vf) {
    krot_ = rot && IsQuantized(kf) ? LlamaRotationBlock(g.head_dim, true) : 0;
    vrot_ = rot && IsQuantized(vf) ? LlamaRotationBlock(g.head_dim, false) : 0;
    kb_ = RowBytes(kf, g.head_dim);
    vb_ = RowBytes(vf, g.head_dim);
    rec_ = 4 + g.n_kv_heads * (kb_ + vb_);
    Reset();
  }

  const KvGeometry& geometry() const override { return g_; }
  std::string Describe() const override { return describe_; }
  void Reset() override {
    layers_.clear();
    for (int l = 0; l < g_.n_layers; ++l) layers_.push_back(std::make_unique<LlamaLayer>());
  }

  Status Append(int layer, const float* k, const float* v, const int32_t* pos, int n) override;
  Status Attend(int layer, const float* q, const int32_t* q_pos, int n, float* out) override;
  Status EndBatch(int, bool) override { return Status::Ok(); }
  KvStats Stats() const override;
  int64_t LayerAllocatedBytes(int layer) const override {
    return layers_[layer]->counter + static_cast<int64_t>(sizeof(LlamaLayer));
  }
  Status SaveState(std::string* out) const override;
  Status LoadState(std::string_view in) override;

 private:
  const uint8_t* Record(const LlamaLayer& L, int64_t t) const {
    return L.pages[t / kLlamaPage].data() + (t % kLlamaPage) * rec_;
  }
  // Grows L by n records (page table capacity a power of two, last page
  // exact); returns nothing: the caller fills records [L.tokens, +n).
  void Grow(LlamaLayer& L, int64_t n);

  KvGeometry g_;
  std::string describe_;
  quant::Format kf_, vf_;
  int krot_ = 0, vrot_ = 0;
  int64_t kb_ = 0, vb_ = 0, rec_ = 0;
  std::vector<std::unique_ptr<LlamaLayer>> layers_;
};

void LlamaTokenCache::Grow(LlamaLayer& L, int64_t n) {
  const int64_t total = L.tokens + n;
  const size_t need = static_cast<size_t>((total + kLlamaPage - 1) / kLlamaPage);
  if (need > L.pages.capacity()) L.pages.reserve(std::bit_ceil(need));
  for (size_t p = 0; p < need; ++p) {
    const int64_t in_page =
        std::min<int64_t>(kLlamaPage, total - static_cast<int64_t>(p) * kLlamaPage);
    const size_t bytes = static_cast<size_t>(in_page * rec_);
    if (p < L.pages.size()) {
      if (L.pages[p].size() == bytes) continue;
      // The open page grows to its exact size (copy of < kLlamaPage records).
      PageVec bigger(bytes, 0, L.pages.get_allocator());
      std::memcpy(bigger.data(), L.pages[p].data(), L.pages[p].size());
      L.pages[p].swap(bigger);
    } else {
      L.pages.emplace_back(bytes, 0, L.pages.get_allocator());
    }
  }
  L.tokens = total;
}

Status LlamaTokenCache::Append(int layer, const float* k, const float* v, const int32_t* pos,
                               int n) {
  if (layer < 0 || layer >= g_.n_layers) {
    return MakeError("KV cache Append: layer " + std::to_string(layer) + " out of range [0, " +
                     std::to_string(g_.n_layers) + ")");
  }
  if (n < 0) return MakeError("KV cache Append: negative token count");
  LlamaLayer& L = *layers_[layer];
  int32_t last = -1;
  if (L.tokens > 0) std::memcpy(&last, Record(L, L.tokens - 1), 4);
  for (int i = 0; i < n; ++i) {
    if (pos[i] <= last || pos[i] >= g_.max_ctx) {
      return MakeError("KV cache Append: position " + std::to_string(pos[i]) +
                       " is not increasing or not below max_ctx " + std::to_string(g_.max_ctx));
    }
    last = pos[i];
  }
  const int H = g_.n_kv_heads, D = g_.head_dim;
  const int64_t t0 = L.tokens;
  Grow(L, n);
  const size_t kc = quant::CodeBytes(kf_, 1, D), vc = quant::CodeBytes(vf_, 1, D);
  std::vector<float> row(D);
  for (int i = 0; i < n; ++i) {
    uint8_t* r = const_cast<uint8_t*>(Record(L, t0 + i));
    std::memcpy(r, &pos[i], 4);
    uint8_t* kr = r + 4;
    uint8_t* vr = kr + H * kb_;
    for (int h = 0; h < H; ++h) {
      const float* ks = k + (static_cast<int64_t>(i) * H + h) * D;
      const float* vs = v + (static_cast<int64_t>(i) * H + h) * D;
      std::copy(ks, ks + D, row.begin());
      if (krot_) LlamaRotate(row.data(), D, krot_);
      quant::QuantizeChunk(kf_, row.data(), 1, D, kr + h * kb_, kr + h * kb_ + kc);
      std::copy(vs, vs + D, row.begin());
      if (vrot_) LlamaRotate(row.data(), D, vrot_);
      quant::QuantizeChunk(vf_, row.data(), 1, D, vr + h * vb_, vr + h * vb_ + vc);
    }
  }
  return Status::Ok();
}

Status LlamaTokenCache::Attend(int layer, const float* q, const int32_t* q_pos, int n, float* out) {
  if (layer < 0 || layer >= g_.n_layers) {
    return MakeError("KV cache Attend: layer " + std::to_string(layer) + " out of range");
  }
  const LlamaLayer& L = *layers_[layer];
  const int H = g_.n_kv_heads, D = g_.head_dim, QH = g_.n_q_heads, group = QH / H;
  const int64_t T = L.tokens;
  // The stored rows of one KV head as the kernel reads them: K and V
  // dequantized to fp32, [T][D] each (still in the rotated basis when
  // rotated); one head at a time keeps the scratch at 2 T D floats.
  std::vector<float> kx(static_cast<size_t>(T * D)), vx(kx.size());
  std::vector<int32_t> kpos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) std::memcpy(&kpos[t], Record(L, t), 4);
  const size_t kc = quant::CodeBytes(kf_, 1, D), vc = quant::CodeBytes(vf_, 1, D);
  const bool tiled = !IsQuantized(kf_) && !IsQuantized(vf_) && n >= kTiledMinQueries;
  const bool v_f16_acc = !IsQuantized(vf_) && !tiled;
  const quant::Format q8 = quant::GgmlBlock(quant::Kind::kQ8_0);
  const size_t q8c = quant::CodeBytes(q8, 1, D), q8m = quant::MetaBytes(q8, 1, D);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (int kvh = 0; kvh < H; ++kvh) {
    ParallelFor(T, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const uint8_t* kr = Record(L, t) + 4 + kvh * kb_;
        const uint8_t* vr = Record(L, t) + 4 + H * kb_ + kvh * vb_;
        quant::DequantizeChunk(kf_, kr, kr + kc, 1, D, kx.data() + t * D);
        quant::DequantizeChunk(vf_, vr, vr + vc, 1, D, vx.data() + t * D);
      }
    });
    // The query heads of this KV head, for every query of the batch.
    ParallelFor(static_cast<int64_t>(n) * group, [&](int64_t b, int64_t e) {
      std::vector<float> qv(D), acc(D);
      std::vector<f16_t> acc16(D);
      std::vector<uint8_t> qcodes(q8c + q8m);
      for (int64_t job = b; job < e; ++job) {
        const int i = static_cast<int>(job / group),
                  h = kvh * group + static_cast<int>(job % group);
        const float* qs = q + (static_cast<int64_t>(i) * QH + h) * D;
        std::copy(qs, qs + D, qv.begin());
        if (krot_) LlamaRotate(qv.data(), D, krot_);
        if (IsQuantized(kf_)) {
          // Q in K's dot type: q8_0 (q8_1 for the _1 types holds the same values).
          quant::QuantizeChunk(q8, qv.data(), 1, D, qcodes.data(), qcodes.data() + q8c);
          quant::DequantizeChunk(q8, qcodes.data(), qcodes.data() + q8c, 1, D, qv.data());
        } else if (!tiled) {
          for (float& x : qv) x = F16ToF32(F32ToF16(x));
        }
        float M = -std::numeric_limits<float>::infinity(), S = 0.f;
        std::fill(acc.begin(), acc.end(), 0.f);
        std::fill(acc16.begin(), acc16.end(), f16_t{0});
        for (int64_t t = 0; t < T; ++t) {
          if (kpos[t] > q_pos[i]) continue;
          const float* kr = kx.data() + t * D;
          const float* vr = vx.data() + t * D;
          float s = 0.f;
          for (int d = 0; d < D; ++d) s += qv[d] * kr[d];
          s *= scale;
          float ms = 1.f, vs = 1.f;
          if (s > M) {
            const float old = M;
            M = s;
            ms = std::exp(old - M);
          } else {
            vs = std::exp(s - M);
          }
          if (v_f16_acc) {
            // ggml's fp16 accumulator: every update rounded to fp16.
            if (ms != 1.f)
              for (int d = 0; d < D; ++d) acc16[d] = F32ToF16(F16ToF32(acc16[d]) * ms);
            for (int d = 0; d < D; ++d) acc16[d] = F32ToF16(F16ToF32(acc16[d]) + vr[d] * vs);
          } else {
            if (ms != 1.f)
              for (int d = 0; d < D; ++d) acc[d] *= ms;
            for (int d = 0; d < D; ++d) acc[d] += vr[d] * vs;
          }
          S = S * ms + vs;
        }
        if (v_f16_acc)
          for (int d = 0; d < D; ++d) acc[d] = F16ToF32(acc16[d]);
        const float inv = S == 0.f ? 0.f : 1.f / S;
        float* o = out + (static_cast<int64_t>(i) * QH + h) * D;
        for (int d = 0; d < D; ++d) o[d] = acc[d] * inv;
        if (vrot_) LlamaRotate(o, D, vrot_);
      }
    });
  }
  return Status::Ok();
}

KvStats LlamaTokenCache::Stats() const {
  KvStats s;
  const int H = g_.n_kv_heads, D = g_.head_dim;
  const int64_t codes =
      static_cast<int64_t>(quant::CodeBytes(kf_, 1, D) + quant::CodeBytes(vf_, 1, D));
  const int64_t meta =
      static_cast<int64_t>(quant::MetaBytes(kf_, 1, D) + quant::MetaBytes(vf_, 1, D));
  const std::string kt = ShortTierName(quant::FormatName(kf_)),
                    vt = ShortTierName(quant::FormatName(vf_));
  for (const auto& Lp : layers_) {
    const LlamaLayer& L = *Lp;
    KvLayerStats ls;
    ls.bytes.payload = L.tokens * H * codes;
    ls.bytes.metadata = L.tokens * H * meta;
    int64_t page_bytes = 0;
    for (const PageVec& p : L.pages) page_bytes += cache::CapacityBytes(p);
    // Page capacities beyond the records (none while pages are exact) count
    // as bookkeeping, with the positions, the page table and the layer.
    ls.bytes.bookkeeping = page_bytes - L.tokens * H * (codes + meta) +
                           cache::CapacityBytes(L.pages) + static_cast<int64_t>(sizeof(LlamaLayer));
    ls.kept_tokens = L.tokens * H;
    if (L.tokens) {
      ls.k_tiers[kt] += L.tokens * H;
      ls.v_tiers[vt] += L.tokens * H;
    }
    s.kept_elements += L.tokens * H * D * 2;
    s.original_elements += L.tokens * H * D * 2;
    s.bytes += ls.bytes;
    s.layers.push_back(std::move(ls));
  }
  return s;
}

Status LlamaTokenCache::SaveState(std::string* out) const {
  out->clear();
  cache::StateWriter w(out);
  w.PutString(describe_);
  for (const auto& Lp : layers_) {
    w.Put<int64_t>(Lp->tokens);
    for (const PageVec& p : Lp->pages) w.PutArray(p.data(), p.size());
  }
  return Status::Ok();
}

Status LlamaTokenCache::LoadState(std::string_view in) {
  cache::StateReader r(in);
  std::string describe;
  if (!r.GetString(&describe, 4096) || describe != describe_) {
    return MakeError("KV state: not a state of '" + describe_ + "' (it holds '" + describe + "')");
  }
  std::vector<std::unique_ptr<LlamaLayer>> layers;
  for (int l = 0; l < g_.n_layers; ++l) {
    const std::string where = "KV state of " + describe_ + ", layer " + std::to_string(l);
    auto L = std::make_unique<LlamaLayer>();
    int64_t n = 0;
    if (!r.Get(&n) || n < 0 || n > g_.max_ctx) return MakeError(where + ": bad token count");
    Grow(*L, n);
    for (PageVec& p : L->pages) {
      if (!r.GetArray(p.data(), p.size())) return MakeError(where + ": truncated");
    }
    int32_t last = -1;
    for (int64_t t = 0; t < n; ++t) {
      int32_t pos;
      std::memcpy(&pos, Record(*L, t), 4);
      if (pos <= last || pos >= g_.max_ctx)
        return MakeError(where + ": positions not increasing within the context");
      last = pos;
    }
    layers.push_back(std::move(L));
  }
  if (!r.done()) return MakeError("KV state of " + describe_ + ": trailing bytes");
  layers_ = std::move(layers);
  return Status::Ok();
}

// Worst true bits of the per-token cache over the token counts bits= holds.
double PairBits(const KvGeometry& g, const quant::Format& kf, const quant::Format& vf) {
  const LayerLayout l{g.n_kv_heads, g.head_dim};
  double worst = 0;
  for (int64_t n = std::min<int64_t>(kBudgetFromTokens, g.max_ctx); n <= g.max_ctx; ++n)
    worst = std::max(worst, LayerBits(l, LlamaLayerBytes(g, kf, vf, n), n));
  return worst;
}

}  // namespace

const std::vector<std::string>& LlamaCacheTypes() {
  static const std::vector<std::string> types = {"f16",  "q8_0", "q5_1",  "q5_0",
                                                 "q4_1", "q4_0", "iq4_nl"};
  return types;
}

int64_t LlamaLayerBytes(const KvGeometry& g, const quant::Format& kf, const quant::Format& vf,
                        int64_t n) {
  const int64_t rec = 4 + g.n_kv_heads * (RowBytes(kf, g.head_dim) + RowBytes(vf, g.head_dim));
  const int64_t pages = (n + kLlamaPage - 1) / kLlamaPage;
  const int64_t table =
      pages ? static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(pages)) * sizeof(PageVec))
            : 0;
  return n * rec + table + static_cast<int64_t>(sizeof(LlamaLayer));
}

int LlamaRotationBlock(int head_dim, bool key) {
  if (head_dim <= 0 || head_dim % 64 != 0) return 0;
  if (!key) return 64;
  int b = 64;
  while (head_dim % (2 * b) == 0) b *= 2;
  return b;
}

void LlamaRotate(float* x, int D, int block) {
  for (int b = 0; b + block <= D; b += block) quant::HadamardRotate(x + b, block);
}

Result<std::pair<quant::Format, quant::Format>> LlamaTypesForBudget(const PolicySpec& spec,
                                                                    const KvGeometry& g) {
  const double budget = spec.Num("bits");
  // Ranked: the measured pairs by KL, then the rest widest first.
  std::vector<std::pair<std::string, std::string>> order;
  for (const PairKl& p : kMeasuredPairs) order.emplace_back(p.k, p.v);
  for (const std::string& k : LlamaCacheTypes()) {
    for (const std::string& v : LlamaCacheTypes()) {
      if (std::find(order.begin(), order.end(), std::make_pair(k, v)) == order.end())
        order.emplace_back(k, v);
    }
  }
  double lo = 1e30, hi = 0;
  for (const auto& [k, v] : order) {
    const quant::Format kf = TypeFormat(k), vf = TypeFormat(v);
    const double b = PairBits(g, kf, vf);
    lo = std::min(lo, b);
    hi = std::max(hi, b);
    if (b <= budget) return std::make_pair(kf, vf);
  }
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "budget %s true bits per element is below the cheapest llama.cpp cache types: "
                "the K/V pairs hold %s (q4_0/q4_0 .. f16/f16, positions and page table "
                "included, worst over %lld.. tokens); give bits >= %.3f or name the types with "
                "ctk= / ctv=",
                spec.Text("bits").c_str(), AchievableRange(lo, hi, g.max_ctx).c_str(),
                static_cast<long long>(std::min<int64_t>(kBudgetFromTokens, g.max_ctx)), lo);
  return MakeError("KV policy '" + spec.Canonical() + "': " + buf);
}

Result<std::unique_ptr<KvCache>> CreateLlamaCache(const PolicySpec& spec, const KvGeometry& g,
                                                  const CacheContext&) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  quant::Format kf = TypeFormat(spec.Text("ctk")), vf = TypeFormat(spec.Text("ctv"));
  const bool legacy = spec.Int("residual") > 0;
  if (legacy && spec.Text("rot") == "on" && spec.Given("rot")) {
    return MakeError("KV policy '" + spec.Canonical() +
                     "': rot=on needs residual=0 (the residual=32 variant has no rotation)");
  }
  std::string describe = spec.Canonical();
  if (spec.Given("bits")) {
    if (legacy) {
      return MakeError("KV policy '" + spec.Canonical() +
                       "': bits= selects among the per-token caches (residual=0); name the "
                       "types with ctk= / ctv= for residual=32");
    }
    HQEKV_ASSIGN_OR_RETURN(auto pair, LlamaTypesForBudget(spec, g));
    kf = pair.first;
    vf = pair.second;
    describe += " (ctk=" + quant::FormatName(kf) + ",ctv=" + quant::FormatName(vf) + ")";
  }
  for (const quant::Format& f : {kf, vf}) {
    if (Status s = quant::Validate(f, kLegacyResidual, g.head_dim); !s.ok()) {
      return MakeError("KV policy '" + spec.Canonical() + "': " + s.message() +
                       " (llama.cpp's quantized cache types need head_dim % 32 == 0; f16 works "
                       "for any head_dim)");
    }
  }
  if (legacy) return QuantCache::Make(g, std::move(describe), kf, vf, kLegacyResidual);
  return std::unique_ptr<KvCache>(
      new LlamaTokenCache(g, std::move(describe), kf, vf, spec.Text("rot") != "off"));
}

}  // namespace hqekv::policy
