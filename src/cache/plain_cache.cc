#include "cache/plain_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "core/parallel.h"
#include "quant/format.h"

namespace hqekv {
namespace {

// Attention over fp16 rows goes through quant's fused f16 kernels (SIMD with
// a scalar reference as their oracle), kBlock tokens per call.
constexpr int64_t kBlock = 32;
const quant::Format kF16Rows = quant::F16();

}  // namespace

Result<std::unique_ptr<PlainKvCache>> PlainKvCache::Create(const KvGeometry& g, PlainPrecision p) {
  if (g.n_layers <= 0 || g.n_q_heads <= 0 || g.n_kv_heads <= 0 || g.head_dim <= 0 || g.max_ctx <= 0) {
    return MakeError("KV cache geometry: every size must be positive (layers " +
                     std::to_string(g.n_layers) + ", q heads " + std::to_string(g.n_q_heads) +
                     ", kv heads " + std::to_string(g.n_kv_heads) + ", head_dim " +
                     std::to_string(g.head_dim) + ", max_ctx " + std::to_string(g.max_ctx) + ")");
  }
  if (g.n_q_heads % g.n_kv_heads != 0) {
    return MakeError("KV cache geometry: n_q_heads " + std::to_string(g.n_q_heads) +
                     " is not a multiple of n_kv_heads " + std::to_string(g.n_kv_heads));
  }
  return std::unique_ptr<PlainKvCache>(new PlainKvCache(g, p));
}

PlainKvCache::PlainKvCache(const KvGeometry& g, PlainPrecision p) : g_(g), prec_(p) { Reset(); }

void PlainKvCache::Reset() {
  layers_.assign(g_.n_layers, Layer{});
  for (auto& L : layers_) {
    if (prec_ == PlainPrecision::kF16) {
      L.k16.resize(g_.n_kv_heads);
      L.v16.resize(g_.n_kv_heads);
    } else {
      L.k32.resize(g_.n_kv_heads);
      L.v32.resize(g_.n_kv_heads);
    }
  }
}

Status PlainKvCache::Append(int layer, const float* k, const float* v, const int32_t* pos, int n) {
  if (layer < 0 || layer >= g_.n_layers) {
    return MakeError("KV cache Append: layer " + std::to_string(layer) + " out of range [0, " +
                     std::to_string(g_.n_layers) + ")");
  }
  if (n < 0) return MakeError("KV cache Append: negative token count");
  Layer& L = layers_[layer];
  int32_t last = L.pos.empty() ? -1 : L.pos.back();
  for (int i = 0; i < n; ++i) {
    if (pos[i] <= last || pos[i] >= g_.max_ctx) {
      return MakeError("KV cache Append: position " + std::to_string(pos[i]) +
                       " is not increasing or not below max_ctx " + std::to_string(g_.max_ctx));
    }
    last = pos[i];
  }
  const int H = g_.n_kv_heads, D = g_.head_dim;
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < n; ++i) {
      const float* kr = k + (static_cast<int64_t>(i) * H + h) * D;
      const float* vr = v + (static_cast<int64_t>(i) * H + h) * D;
      if (prec_ == PlainPrecision::kF16) {
        for (int d = 0; d < D; ++d) L.k16[h].push_back(F32ToF16(kr[d]));
        for (int d = 0; d < D; ++d) L.v16[h].push_back(F32ToF16(vr[d]));
      } else {
        L.k32[h].insert(L.k32[h].end(), kr, kr + D);
        L.v32[h].insert(L.v32[h].end(), vr, vr + D);
      }
    }
  }
  L.pos.insert(L.pos.end(), pos, pos + n);
  return Status::Ok();
}

void PlainKvCache::Scores(const Layer& L, int kvh, const float* q, int64_t t, float* scores) const {
  const int D = g_.head_dim;
  if (prec_ == PlainPrecision::kF16) {
    // The fp16 rows of one head are laid out exactly like quant's f16 chunks
    // ([tokens][D], no metadata), so the SIMD fused dot kernels apply; blocks
    // of kBlock tokens keep each call within one chunk-sized working set.
    const f16_t* K = L.k16[kvh].data();
    for (int64_t j = 0; j < t; j += kBlock) {
      const int T = static_cast<int>(std::min<int64_t>(kBlock, t - j));
      quant::DotChunk(kF16Rows, reinterpret_cast<const uint8_t*>(K + j * D), nullptr, T, D, q, scores + j);
    }
  } else {
    const float* K = L.k32[kvh].data();
    for (int64_t j = 0; j < t; ++j) {
      const float* kr = K + j * D;
      float s = 0.f;
      for (int d = 0; d < D; ++d) s += q[d] * kr[d];
      scores[j] = s;
    }
  }
}

void PlainKvCache::Mix(const Layer& L, int kvh, const float* w, int64_t t, float* out) const {
  const int D = g_.head_dim;
  std::fill(out, out + D, 0.f);
  if (prec_ == PlainPrecision::kF16) {
    const f16_t* V = L.v16[kvh].data();
    for (int64_t j = 0; j < t; j += kBlock) {
      const int T = static_cast<int>(std::min<int64_t>(kBlock, t - j));
      quant::AxpyChunk(kF16Rows, reinterpret_cast<const uint8_t*>(V + j * D), nullptr, T, D, w + j, out);
    }
  } else {
    const float* V = L.v32[kvh].data();
    for (int64_t j = 0; j < t; ++j) {
      const float* vr = V + j * D;
      const float wj = w[j];
      for (int d = 0; d < D; ++d) out[d] += wj * vr[d];
    }
  }
}

Status PlainKvCache::Attend(int layer, const float* q, const int32_t* q_pos, int n, float* out) {
  if (layer < 0 || layer >= g_.n_layers) {
    return MakeError("KV cache Attend: layer " + std::to_string(layer) + " out of range");
  }
  const Layer& L = layers_[layer];
  const int HQ = g_.n_q_heads, D = g_.head_dim, group = g_.n_q_heads / g_.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  // One task per (query, query head); each sees the prefix of tokens whose
  // position <= its own (positions are strictly increasing).
  auto task_range = [&](int64_t b, int64_t e) {
    thread_local std::vector<float> w;
    for (int64_t task = b; task < e; ++task) {
      const int i = static_cast<int>(task / HQ), h = static_cast<int>(task % HQ);
      const int64_t t = std::upper_bound(L.pos.begin(), L.pos.end(), q_pos[i]) - L.pos.begin();
      float* o = out + task * D;
      if (t == 0) {  // nothing visible: attention over an empty set is defined as zero
        std::fill(o, o + D, 0.f);
        continue;
      }
      w.resize(t);
      Scores(L, h / group, q + task * D, t, w.data());
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < t; ++j) mx = std::max(mx, w[j] *= scale);
      float sum = 0.f;
      for (int64_t j = 0; j < t; ++j) sum += (w[j] = std::exp(w[j] - mx));
      const float inv = 1.0f / sum;
      for (int64_t j = 0; j < t; ++j) w[j] *= inv;
      Mix(L, h / group, w.data(), t, o);
    }
  };
  // Small attention (decode over a short context) runs on the caller: waking
  // the pool would cost more than the work.
  const int64_t tasks = static_cast<int64_t>(n) * HQ;
  const int64_t work = tasks * static_cast<int64_t>(L.pos.size()) * D;
  if (work < (1 << 15)) {
    task_range(0, tasks);
  } else {
    ParallelFor(tasks, task_range);
  }
  return Status::Ok();
}

KvStats PlainKvCache::Stats() const {
  KvStats s;
  const int64_t elem = prec_ == PlainPrecision::kF16 ? 2 : 4;
  const std::string tier = prec_ == PlainPrecision::kF16 ? "fp16" : "fp32";
  for (const Layer& L : layers_) {
    KvLayerStats ls;
    const int64_t tok = static_cast<int64_t>(L.pos.size());
    const int64_t cells = tok * g_.n_kv_heads;
    ls.bytes.payload = cells * g_.head_dim * 2 * elem;
    ls.bytes.bookkeeping = tok * static_cast<int64_t>(sizeof(int32_t));
    ls.kept_tokens = cells;
    if (cells) {
      ls.k_tiers[tier] = cells;
      ls.v_tiers[tier] = cells;
    }
    s.bytes += ls.bytes;
    s.kept_elements += cells * g_.head_dim * 2;
    s.original_elements += cells * g_.head_dim * 2;
    s.layers.push_back(std::move(ls));
  }
  return s;
}

}  // namespace hqekv
