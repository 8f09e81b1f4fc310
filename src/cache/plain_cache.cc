#include "cache/plain_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "attn/prefetch.h"
#include "cache/prefill_attention.h"
#include "core/parallel.h"
#include "quant/format.h"
#include "attn/multi_query.h"

namespace hqekv {
namespace {

// Attention over fp16 rows goes through quant's fused f16 kernels (SIMD with
// a scalar reference as their oracle), one page (kBlock tokens) per call.
constexpr int64_t kBlock = PlainKvCache::kPageTokens;
const quant::Format kF16Rows = quant::F16();
// fp16 decode attends page j while the pages kPagesAhead later are requested
// (attn/prefetch.h; 2, 3, 4 and 6 measured alike at 32K, 1 and 8 a little
// slower; bench_store_attention PlainFp16Decode).
constexpr int64_t kPagesAhead = 3;
// Tokens per kernel call, each preceded by its share of the later page's line
// requests (attn/prefetch.h).
constexpr int kPieceTokens = attn::kF16PieceTokens;

// Stores row[0..D) as row r of head h in page p ([H][kBlock][D] values),
// allocating the page at its full size when it is new.
template <class T>
void StoreRow(cache::CountedVector<cache::CountedVector<T>>& pages, int64_t p, int h, int64_t r,
              int H, int D, const float* row) {
  if (pages.size() <= static_cast<size_t>(p)) {
    pages.emplace_back(pages.get_allocator());
    pages.back().resize(static_cast<size_t>(kBlock * H * D));  // one exact allocation
  }
  T* dst = pages[p].data() + (h * kBlock + r) * D;
  if constexpr (std::is_same_v<T, f16_t>) {
    for (int d = 0; d < D; ++d) dst[d] = F32ToF16(row[d]);
  } else {
    std::copy(row, row + D, dst);
  }
}

}  // namespace

Result<std::unique_ptr<PlainKvCache>> PlainKvCache::Create(const KvGeometry& g, PlainPrecision p) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  return std::unique_ptr<PlainKvCache>(new PlainKvCache(g, p));
}

PlainKvCache::PlainKvCache(const KvGeometry& g, PlainPrecision p) : g_(g), prec_(p) { Reset(); }

void PlainKvCache::Reset() {
  layers_.clear();
  for (int l = 0; l < g_.n_layers; ++l) layers_.push_back(std::make_unique<Layer>());
}

Status PlainKvCache::Append(int layer, const float* k, const float* v, const int32_t* pos, int n) {
  if (layer < 0 || layer >= g_.n_layers) {
    return MakeError("KV cache Append: layer " + std::to_string(layer) + " out of range [0, " +
                     std::to_string(g_.n_layers) + ")");
  }
  if (n < 0) return MakeError("KV cache Append: negative token count");
  Layer& L = *layers_[layer];
  int32_t last = L.pos.empty() ? -1 : L.pos.back();
  for (int i = 0; i < n; ++i) {
    if (pos[i] <= last || pos[i] >= g_.max_ctx) {
      return MakeError("KV cache Append: position " + std::to_string(pos[i]) +
                       " is not increasing or not below max_ctx " + std::to_string(g_.max_ctx));
    }
    last = pos[i];
  }
  const int H = g_.n_kv_heads, D = g_.head_dim;
  const int64_t t0 = static_cast<int64_t>(L.pos.size());
  for (int i = 0; i < n; ++i) {
    const int64_t p = (t0 + i) / kBlock, r = (t0 + i) % kBlock;
    for (int h = 0; h < H; ++h) {
      const float* kr = k + (static_cast<int64_t>(i) * H + h) * D;
      const float* vr = v + (static_cast<int64_t>(i) * H + h) * D;
      if (prec_ == PlainPrecision::kF16) {
        StoreRow(L.k16, p, h, r, H, D, kr);
        StoreRow(L.v16, p, h, r, H, D, vr);
      } else {
        StoreRow(L.k32, p, h, r, H, D, kr);
        StoreRow(L.v32, p, h, r, H, D, vr);
      }
    }
  }
  // Positions grow with the pages (capacity = pages × kBlock), so their
  // slack is bounded by the same partly filled page.
  const size_t open_pages = static_cast<size_t>((t0 + n + kBlock - 1) / kBlock);
  L.pos.reserve(open_pages * kBlock);
  L.pos.insert(L.pos.end(), pos, pos + n);
  return Status::Ok();
}

void PlainKvCache::Scores(const Layer& L, int kvh, const float* q, int64_t t, float* scores) const {
  const int D = g_.head_dim;
  for (int64_t j = 0; j < t; j += kBlock) {
    const int T = static_cast<int>(std::min<int64_t>(kBlock, t - j));
    const size_t page = static_cast<size_t>(j / kBlock),
                 head = static_cast<size_t>(kvh) * kBlock * D;
    if (prec_ == PlainPrecision::kF16) {
      // A head's rows in a page are laid out exactly like quant's f16 chunk
      // ([tokens][D], no metadata), so the SIMD fused dot kernels apply.
      quant::DotChunk(kF16Rows, reinterpret_cast<const uint8_t*>(L.k16[page].data() + head),
                      nullptr, T, D, q, scores + j);
    } else {
      const float* K = L.k32[page].data() + head;
      for (int r = 0; r < T; ++r) {
        const float* kr = K + static_cast<int64_t>(r) * D;
        float s = 0.f;
        for (int d = 0; d < D; ++d) s += q[d] * kr[d];
        scores[j + r] = s;
      }
    }
  }
}

void PlainKvCache::Mix(const Layer& L, int kvh, const float* w, int64_t t, float* out) const {
  const int D = g_.head_dim;
  std::fill(out, out + D, 0.f);
  for (int64_t j = 0; j < t; j += kBlock) {
    const int T = static_cast<int>(std::min<int64_t>(kBlock, t - j));
    const size_t page = static_cast<size_t>(j / kBlock),
                 head = static_cast<size_t>(kvh) * kBlock * D;
    if (prec_ == PlainPrecision::kF16) {
      quant::AxpyChunk(kF16Rows, reinterpret_cast<const uint8_t*>(L.v16[page].data() + head),
                       nullptr, T, D, w + j, out);
    } else {
      const float* V = L.v32[page].data() + head;
      for (int r = 0; r < T; ++r) {
        const float* vr = V + static_cast<int64_t>(r) * D;
        const float wj = w[j + r];
        for (int d = 0; d < D; ++d) out[d] += wj * vr[d];
      }
    }
  }
}

Status PlainKvCache::Attend(int layer, const float* q, const int32_t* q_pos, int n, float* out) {
  if (layer < 0 || layer >= g_.n_layers) {
    return MakeError("KV cache Attend: layer " + std::to_string(layer) + " out of range");
  }
  if (!cache::UsePrefillAttention(g_, n)) return AttendPerQuery(layer, q, q_pos, n, out);
  // Prefill: tiled over (block of query rows × page), GQA rows sharing each
  // page (cache/prefill_attention.h). A head's rows in a page are one tile.
  const Layer& L = *layers_[layer];
  const int H = g_.n_kv_heads, D = g_.head_dim;
  const size_t pages = (L.pos.size() + kBlock - 1) / kBlock;
  std::vector<const void*> kp(pages * H), vp(pages * H);
  for (int h = 0; h < H; ++h) {
    const size_t head = static_cast<size_t>(h) * kBlock * D;
    for (size_t p = 0; p < pages; ++p) {
      if (prec_ == PlainPrecision::kF16) {
        kp[h * pages + p] = L.k16[p].data() + head;
        vp[h * pages + p] = L.v16[p].data() + head;
      } else {
        kp[h * pages + p] = L.k32[p].data() + head;
        vp[h * pages + p] = L.v32[p].data() + head;
      }
    }
  }
  std::vector<attn::KvTiles> tiles(H);
  for (int h = 0; h < H; ++h) {
    attn::KvTiles& t = tiles[h];
    t.type = prec_ == PlainPrecision::kF16 ? attn::KvRowType::kF16 : attn::KvRowType::kF32;
    t.D = D;
    t.tile_tokens = static_cast<int>(kBlock);
    t.tokens = static_cast<int64_t>(L.pos.size());
    t.k = kp.data() + h * pages;
    t.v = vp.data() + h * pages;
  }
  cache::PrefillAttention(g_, tiles, L.pos.data(), q, q_pos, n, out);
  return Status::Ok();
}

Status PlainKvCache::AttendPerQuery(int layer, const float* q, const int32_t* q_pos, int n,
                                    float* out) const {
  if (layer < 0 || layer >= g_.n_layers) {
    return MakeError("KV cache Attend: layer " + std::to_string(layer) + " out of range");
  }
  const Layer& L = *layers_[layer];
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
  // fp16: one task per (query, KV head); the `group` query heads sharing the
  // KV head read each page once (quant's multi-query kernels, one score row
  // per query head) and take the SIMD softmax.
  auto group_range = [&](int64_t b, int64_t e) {
    thread_local std::vector<float> w, qs;
    const int H = g_.n_kv_heads;
    for (int64_t task = b; task < e; ++task) {
      const int i = static_cast<int>(task / H), kvh = static_cast<int>(task % H);
      const int64_t t = std::upper_bound(L.pos.begin(), L.pos.end(), q_pos[i]) - L.pos.begin();
      const size_t first = (static_cast<size_t>(i) * HQ + static_cast<size_t>(kvh) * group) * D;
      float* o = out + first;
      std::fill(o, o + static_cast<size_t>(group) * D, 0.f);
      if (t == 0) continue;  // nothing visible: attention over an empty set is defined as zero
      // Score rows `ss` apart, padded off powers of two (cache-set conflicts).
      const size_t ss = (static_cast<size_t>(t) + 7) / 8 * 8 + 8;
      w.resize(ss * group);
      qs.resize(static_cast<size_t>(group) * D);
      for (size_t e2 = 0; e2 < qs.size(); ++e2) qs[e2] = q[first + e2] * scale;
      const size_t head = static_cast<size_t>(kvh) * kBlock * D;
      // Walks this head's rows of K or V page by page (kernel(rows, T, j):
      // tokens [j, j + T)), in pieces of kPieceTokens, while the rows of the
      // page kPagesAhead later are requested: its 4 KiB pages touched before
      // the first piece, then a piece's share of its lines before each piece
      // (a head's pages lie 64 KiB and more apart, which the hardware
      // prefetchers do not follow; spread this way the requests overlap the
      // kernels' arithmetic instead of waiting in one burst).
      const size_t head_bytes = sizeof(f16_t) * static_cast<size_t>(kBlock) * D;
      const size_t piece_bytes = sizeof(f16_t) * static_cast<size_t>(kPieceTokens) * D;
      auto walk = [&](const auto& pages, const auto& kernel) {
        auto rows = [&](int64_t page) {
          return reinterpret_cast<const uint8_t*>(pages[page].data() + head);
        };
        for (int64_t pa = 0; pa < kPagesAhead && pa * kBlock < t; ++pa)
          attn::PrefetchBytes(rows(pa), head_bytes);
        for (int64_t j = 0; j < t; j += kBlock) {
          const int64_t pa = j / kBlock + kPagesAhead;
          const uint8_t* later = pa * kBlock < t ? rows(pa) : nullptr;
          if (later) attn::TouchPages(later, head_bytes);
          const int T = static_cast<int>(std::min<int64_t>(kBlock, t - j));
          for (int a = 0; a < T; a += kPieceTokens) {
            if (later) attn::PrefetchRange(later + a / kPieceTokens * piece_bytes, piece_bytes);
            kernel(rows(j / kBlock) + sizeof(f16_t) * static_cast<size_t>(a) * D,
                   std::min(kPieceTokens, T - a), j + a);
          }
        }
      };
      walk(L.k16, [&](const uint8_t* rows, int T, int64_t j) {
        attn::DotChunkMulti(kF16Rows, rows, nullptr, T, D, qs.data(), D, group, w.data() + j, ss);
      });
      for (int hh = 0; hh < group; ++hh) attn::SoftmaxRow(w.data() + hh * ss, static_cast<int>(t));
      walk(L.v16, [&](const uint8_t* rows, int T, int64_t j) {
        attn::AxpyChunkMulti(kF16Rows, rows, nullptr, T, D, w.data() + j, ss, group, o, D);
      });
    }
  };
  // Small attention (decode over a short context) runs on the caller: waking
  // the pool would cost more than the work.
  if (prec_ == PlainPrecision::kF16) {
    const int64_t tasks = static_cast<int64_t>(n) * g_.n_kv_heads;
    const int64_t work = tasks * group * static_cast<int64_t>(L.pos.size()) * D;
    if (work < (1 << 15)) {
      group_range(0, tasks);
    } else {
      ParallelFor(tasks, group_range);
    }
    return Status::Ok();
  }
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
  const int64_t page_bytes = kBlock * g_.n_kv_heads * g_.head_dim * elem;
  for (const auto& Lp : layers_) {
    const Layer& L = *Lp;
    KvLayerStats ls;
    const int64_t tok = static_cast<int64_t>(L.pos.size());
    const int64_t cells = tok * g_.n_kv_heads;
    // Structural count (the pages `tok` tokens need), checked
    // against the allocator's count by the tests.
    const int64_t pages = (tok + kBlock - 1) / kBlock;
    ls.bytes.payload = pages * page_bytes * 2;
    ls.bytes.bookkeeping = cache::CapacityBytes(L.pos) + cache::CapacityBytes(L.k16) +
                           cache::CapacityBytes(L.v16) + cache::CapacityBytes(L.k32) +
                           cache::CapacityBytes(L.v32) + static_cast<int64_t>(sizeof(Layer));
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

int64_t PlainKvCache::LayerHeldBytes(int layer) const {
  return layers_[layer]->counter + static_cast<int64_t>(sizeof(Layer));
}

}  // namespace hqekv
