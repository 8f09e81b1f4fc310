#include "cache/store_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "quant/format.h"
#include "quant/multi_query.h"

namespace hqekv::cache {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();
constexpr int kResidualPiece = 64;  // tokens

// Starts loading the bytes of the next chunk into the cache while this one is
// computed: one stream's chunks lie on different pages (the KV heads of a
// layer are sealed in turn), which the hardware prefetchers do not follow.
void PrefetchBytes(const uint8_t* p, size_t n) {
  for (size_t o = 0; o < n; o += 64) __builtin_prefetch(p + o);
}
void PrefetchK(const ChunkView& c, int D) {
  PrefetchBytes(c.k_meta, quant::MetaBytes(c.k_format, c.T, D));
  PrefetchBytes(c.k_codes, quant::CodeBytes(c.k_format, c.T, D));
}
void PrefetchV(const ChunkView& c, int D) {
  PrefetchBytes(c.v_meta, quant::MetaBytes(c.v_format, c.T, D));
  PrefetchBytes(c.v_codes, quant::CodeBytes(c.v_format, c.T, D));
}

// Everything one KV head needs, gathered once per call.
struct HeadPlan {
  std::vector<ChunkView> chunks;  // live chunks only, walk order
  ResidualView residual;
  std::vector<int32_t> positions;  // [n_kept]
  bool k_hadamard = false, v_hadamard = false;
  int max_T = 0;
};

HeadPlan Plan(const KvStore& store, int layer, int g) {
  HeadPlan p;
  for (int c = 0; c < store.NumChunks(layer, g); ++c) {
    ChunkView v = store.Chunk(layer, g, c);
    if (!v.live()) continue;
    p.k_hadamard = p.k_hadamard || v.k_format.hadamard;
    p.v_hadamard = p.v_hadamard || v.v_format.hadamard;
    p.max_T = std::max(p.max_T, v.T);
    p.chunks.push_back(v);
  }
  p.residual = store.Residual(layer, g);
  store.KeptPositions(layer, g, &p.positions);
  return p;
}

// Attention for every query head of KV head g. The `group` query heads that
// share the KV head are processed together: each chunk's codes are decoded
// once for all of them (quant::DotChunkMulti / AxpyChunkMulti), with one fp32
// score row per query head in a [group][stride] buffer.
void AttendHead(const KvStore& store, const HeadPlan& p, int g, int group, int n_q_heads,
                const float* q, const int32_t* q_pos, int n, float* out, const AttentionSink* sink,
                int first_sink_query) {
  const int D = store.head_dim();
  const int n_kept = static_cast<int>(p.positions.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const quant::Format res_format = quant::F16();
  const ResidualView& r = p.residual;
  const int res_start = n_kept - r.n;  // walk index of the first residual token
  // Row stride of the score buffer: padded so that the rows of one group do
  // not sit a power of two apart (cache-set conflicts).
  const size_t ss = (static_cast<size_t>(n_kept) + 7) / 8 * 8 + 8;
  const int max_T = std::max(p.max_T, 1);

  // Per-thread buffers: kept across calls (a decode step calls this once per
  // layer and KV head; reallocating ~n_kept·group floats each time costs page
  // faults).
  thread_local std::vector<float> qs, qr, scores, tmp, acc, acc_rot;
  qs.resize(static_cast<size_t>(group) * D);
  qr.resize(qs.size());
  acc.resize(qs.size());
  acc_rot.resize(qs.size());
  scores.resize(ss * group);
  tmp.resize(static_cast<size_t>(group) * max_T);

  for (int i = 0; i < n; ++i) {
    const int32_t qp = q_pos[i];
    // Residual tokens visible to this query: a prefix (positions ascend).
    const int r_vis =
        static_cast<int>(std::upper_bound(r.positions, r.positions + r.n, qp) - r.positions);
    const float* qg = q + (static_cast<size_t>(i) * n_q_heads + static_cast<size_t>(g) * group) * D;
    for (size_t e = 0; e < qs.size(); ++e) qs[e] = qg[e] * scale;
    if (p.k_hadamard) {
      qr = qs;
      for (int hh = 0; hh < group; ++hh)
        quant::HadamardRotate(qr.data() + static_cast<size_t>(hh) * D, D);
    }
    auto fill_masked = [&](int j, int len) {
      for (int hh = 0; hh < group; ++hh) {
        float* row = scores.data() + hh * ss + j;
        std::fill(row, row + len, kMasked);
      }
    };
    // Scores, walk order, one row per query head.
    int j = 0;
    const size_t n_chunks = p.chunks.size();
    if (n_chunks > 0) PrefetchK(p.chunks[0], D);
    for (size_t ci = 0; ci < n_chunks; ++ci) {
      const ChunkView& c = p.chunks[ci];
      if (ci + 1 < n_chunks) {
        PrefetchK(p.chunks[ci + 1], D);
      } else {  // the residual comes next
        PrefetchBytes(reinterpret_cast<const uint8_t*>(r.k), sizeof(f16_t) * r_vis * D);
      }
      const int kept = c.KeptCount();
      if (c.pos0 > qp) {  // pos0 is the chunk's smallest position: nothing visible
        fill_masked(j, kept);
        j += kept;
        continue;
      }
      const float* qk = c.k_format.hadamard ? qr.data() : qs.data();
      if (kept == c.T && c.Position(c.T - 1) <= qp) {  // every slot kept and visible: in place
        quant::DotChunkMulti(c.k_format, c.k_codes, c.k_meta, c.T, D, qk, D, group,
                             scores.data() + j, ss);
        j += kept;
        continue;
      }
      quant::DotChunkMulti(c.k_format, c.k_codes, c.k_meta, c.T, D, qk, D, group, tmp.data(), c.T);
      for (int hh = 0; hh < group; ++hh) {
        const float* src = tmp.data() + static_cast<size_t>(hh) * c.T;
        float* row = scores.data() + hh * ss;
        int jj = j;
        for (int t = 0; t < c.T; ++t) {
          if (c.Kept(t)) row[jj++] = c.Position(t) <= qp ? src[t] : kMasked;
        }
      }
      j += kept;
    }
    // The residual is an f16 "chunk" of r_vis tokens, read in pieces so that
    // kernels that dequantize a piece first keep it in cache.
    for (int a = 0; a < r_vis; a += kResidualPiece) {
      const int len = std::min(kResidualPiece, r_vis - a);
      quant::DotChunkMulti(res_format,
                           reinterpret_cast<const uint8_t*>(r.k + static_cast<size_t>(a) * D),
                           nullptr, len, D, qs.data(), D, group, scores.data() + res_start + a, ss);
    }
    fill_masked(res_start + r_vis, r.n - r_vis);

    // One fp32 softmax per query head over every visible kept token.
    bool any = false;
    for (int hh = 0; hh < group; ++hh)
      any = quant::SoftmaxRow(scores.data() + hh * ss, n_kept) || any;

    // Weighted sum of values, read from their tiers (rows with nothing
    // visible have all-zero weights and get out = 0).
    std::fill(acc.begin(), acc.end(), 0.0f);
    if (p.v_hadamard) std::fill(acc_rot.begin(), acc_rot.end(), 0.0f);
    j = 0;
    if (any && n_chunks > 0) PrefetchV(p.chunks[0], D);
    for (size_t ci = 0; ci < n_chunks; ++ci) {
      const ChunkView& c = p.chunks[ci];
      if (any && ci + 1 < n_chunks) {
        PrefetchV(p.chunks[ci + 1], D);
      } else if (any) {
        PrefetchBytes(reinterpret_cast<const uint8_t*>(r.v), sizeof(f16_t) * r_vis * D);
      }
      const int kept = c.KeptCount();
      if (!any || c.pos0 > qp) {
        j += kept;
        continue;
      }
      float* a = c.v_format.hadamard ? acc_rot.data() : acc.data();
      if (kept == c.T) {  // weights in place (invisible slots have weight 0)
        quant::AxpyChunkMulti(c.v_format, c.v_codes, c.v_meta, c.T, D, scores.data() + j, ss, group,
                              a, D);
        j += kept;
        continue;
      }
      for (int hh = 0; hh < group; ++hh) {
        const float* row = scores.data() + hh * ss;
        float* wt = tmp.data() + static_cast<size_t>(hh) * c.T;
        int jj = j;
        for (int t = 0; t < c.T; ++t) wt[t] = c.Kept(t) ? row[jj++] : 0.0f;
      }
      quant::AxpyChunkMulti(c.v_format, c.v_codes, c.v_meta, c.T, D, tmp.data(), c.T, group, a, D);
      j += kept;
    }
    for (int a = 0; any && a < r_vis; a += kResidualPiece) {
      const int len = std::min(kResidualPiece, r_vis - a);
      quant::AxpyChunkMulti(
          res_format, reinterpret_cast<const uint8_t*>(r.v + static_cast<size_t>(a) * D), nullptr,
          len, D, scores.data() + res_start + a, ss, group, acc.data(), D);
    }
    for (int hh = 0; hh < group; ++hh) {
      float* ah = acc.data() + static_cast<size_t>(hh) * D;
      if (p.v_hadamard) {
        float* rh = acc_rot.data() + static_cast<size_t>(hh) * D;
        quant::HadamardRotate(rh, D);
        for (int d = 0; d < D; ++d) ah[d] += rh[d];
      }
      const int h = g * group + hh;
      std::copy(ah, ah + D, out + (static_cast<size_t>(i) * n_q_heads + h) * D);
      if (sink && *sink && i >= first_sink_query) {
        AttentionRow row;
        row.kv_head = g;
        row.query = i;
        row.q_head = h;
        row.q_pos = qp;
        row.n_kept = n_kept;
        row.weights = scores.data() + hh * ss;
        row.positions = p.positions.data();
        (*sink)(row);
      }
    }
  }
}

}  // namespace

Status StoreAttention(const KvStore& store, int layer, int n_q_heads, const float* q,
                      const int32_t* q_pos, int n, float* out, const AttentionSink* sink,
                      const StoreAttentionOptions& options) {
  const int H = store.n_kv_heads();
  if (layer < 0 || layer >= store.n_layers()) {
    return MakeError("StoreAttention: layer " + std::to_string(layer) + " out of range [0, " +
                     std::to_string(store.n_layers()) + ")");
  }
  if (n_q_heads <= 0 || n_q_heads % H != 0) {
    return MakeError("StoreAttention: n_q_heads = " + std::to_string(n_q_heads) +
                     " is not a positive multiple of n_kv_heads = " + std::to_string(H));
  }
  if (n < 0) return MakeError("StoreAttention: negative query count " + std::to_string(n));
  if (n == 0) return Status::Ok();
  if (!q || !q_pos || !out) return MakeError("StoreAttention: null q, q_pos or out");
  const int group = n_q_heads / H;
  std::vector<HeadPlan> plans(H);
  int64_t work = 0;
  for (int g = 0; g < H; ++g) {
    plans[g] = Plan(store, layer, g);
    work += static_cast<int64_t>(plans[g].positions.size()) * n * group * store.head_dim();
  }
  auto run = [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g) {
      AttendHead(store, plans[g], static_cast<int>(g), group, n_q_heads, q, q_pos, n, out, sink,
                 options.first_sink_query);
    }
  };
  if (H > 1 && work >= options.parallel_min_work) {
    ParallelFor(H, run);
  } else {
    run(0, H);
  }
  return Status::Ok();
}

void AttentionSum::Clear() {
  for (auto& v : sums_) v.clear();
  for (auto& v : pos_) v.clear();
  std::fill(rows_.begin(), rows_.end(), 0);
}

void AttentionSum::Add(const AttentionRow& r) {
  std::vector<float>& s = sums_[r.kv_head];
  std::vector<int32_t>& p = pos_[r.kv_head];
  // A new walk (first row, or the store changed since): start over.
  if (p.size() != static_cast<size_t>(r.n_kept) || !std::equal(p.begin(), p.end(), r.positions)) {
    p.assign(r.positions, r.positions + r.n_kept);
    s.assign(r.n_kept, 0.0f);
    rows_[r.kv_head] = 0;
  }
  for (int j = 0; j < r.n_kept; ++j) s[j] += r.weights[j];
  ++rows_[r.kv_head];
}

}  // namespace hqekv::cache
