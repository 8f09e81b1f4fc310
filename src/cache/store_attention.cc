#include "cache/store_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "quant/format.h"

namespace hqekv::cache {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();
constexpr int kResidualPiece = 64;  // tokens

// Everything one KV head needs, gathered once per call.
struct HeadPlan {
  std::vector<ChunkView> chunks;  // live chunks only, walk order
  ResidualView residual;
  std::vector<int32_t> positions; // [n_kept]
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

// Attention for every query head of KV head g.
void AttendHead(const KvStore& store, const HeadPlan& p, int g, int group, int n_q_heads,
                const float* q, const int32_t* q_pos, int n, float* out,
                const AttentionSink* sink, int first_sink_query) {
  const int D = store.head_dim();
  const int n_kept = static_cast<int>(p.positions.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const quant::Format res_format = quant::F16();
  const ResidualView& r = p.residual;
  const int res_start = n_kept - r.n;  // walk index of the first residual token

  std::vector<float> qs(D), qr(D), scores(std::max(n_kept, 1)), tmp(std::max(p.max_T, r.n) + 1);
  std::vector<float> wt(p.max_T + 1), acc(D), acc_rot(D);
  for (int i = 0; i < n; ++i) {
    const int32_t qp = q_pos[i];
    // Residual tokens visible to this query: a prefix (positions ascend).
    const int r_vis = static_cast<int>(std::upper_bound(r.positions, r.positions + r.n, qp) - r.positions);
    for (int hh = 0; hh < group; ++hh) {
      const int h = g * group + hh;
      const float* qh = q + (static_cast<size_t>(i) * n_q_heads + h) * D;
      for (int d = 0; d < D; ++d) qs[d] = qh[d] * scale;
      if (p.k_hadamard) {
        qr = qs;
        quant::HadamardRotate(qr.data(), D);
      }
      // Scores, walk order.
      int j = 0;
      for (const ChunkView& c : p.chunks) {
        const int kept = c.KeptCount();
        if (c.pos0 > qp) {  // pos0 is the chunk's smallest position: nothing visible
          std::fill(scores.begin() + j, scores.begin() + j + kept, kMasked);
          j += kept;
          continue;
        }
        quant::DotChunk(c.k_format, c.k_codes, c.k_meta, c.T, D,
                        c.k_format.hadamard ? qr.data() : qs.data(), tmp.data());
        for (int t = 0; t < c.T; ++t) {
          if (!c.Kept(t)) continue;
          scores[j++] = c.Position(t) <= qp ? tmp[t] : kMasked;
        }
      }
      // The residual is an f16 "chunk" of r_vis tokens, read in pieces so that
      // kernels that dequantize a piece first keep it in cache.
      for (int a = 0; a < r_vis; a += kResidualPiece) {
        const int len = std::min(kResidualPiece, r_vis - a);
        quant::DotChunk(res_format, reinterpret_cast<const uint8_t*>(r.k + static_cast<size_t>(a) * D),
                        nullptr, len, D, qs.data(), tmp.data() + a);
      }
      for (int t = 0; t < r.n; ++t) scores[res_start + t] = t < r_vis ? tmp[t] : kMasked;

      // One fp32 softmax over every visible kept token.
      float m = kMasked;
      for (int t = 0; t < n_kept; ++t) m = std::max(m, scores[t]);
      float* o = out + (static_cast<size_t>(i) * n_q_heads + h) * D;
      if (m == kMasked) {  // nothing visible
        std::fill(scores.begin(), scores.begin() + n_kept, 0.0f);
        std::fill(o, o + D, 0.0f);
      } else {
        float sum = 0.0f;
        for (int t = 0; t < n_kept; ++t) {
          const float e = scores[t] == kMasked ? 0.0f : std::exp(scores[t] - m);
          scores[t] = e;
          sum += e;
        }
        const float inv = 1.0f / sum;
        for (int t = 0; t < n_kept; ++t) scores[t] *= inv;

        // Weighted sum of values, read from their tiers.
        std::fill(acc.begin(), acc.end(), 0.0f);
        if (p.v_hadamard) std::fill(acc_rot.begin(), acc_rot.end(), 0.0f);
        j = 0;
        for (const ChunkView& c : p.chunks) {
          const int kept = c.KeptCount();
          if (c.pos0 > qp) {
            j += kept;
            continue;
          }
          for (int t = 0; t < c.T; ++t) wt[t] = c.Kept(t) ? scores[j++] : 0.0f;
          quant::AxpyChunk(c.v_format, c.v_codes, c.v_meta, c.T, D, wt.data(),
                           c.v_format.hadamard ? acc_rot.data() : acc.data());
        }
        for (int a = 0; a < r_vis; a += kResidualPiece) {
          const int len = std::min(kResidualPiece, r_vis - a);
          quant::AxpyChunk(res_format, reinterpret_cast<const uint8_t*>(r.v + static_cast<size_t>(a) * D),
                           nullptr, len, D, scores.data() + res_start + a, acc.data());
        }
        if (p.v_hadamard) {
          quant::HadamardRotate(acc_rot.data(), D);
          for (int d = 0; d < D; ++d) acc[d] += acc_rot[d];
        }
        std::copy(acc.begin(), acc.end(), o);
      }
      if (sink && *sink && i >= first_sink_query) {
        AttentionRow row;
        row.kv_head = g;
        row.query = i;
        row.q_head = h;
        row.q_pos = qp;
        row.n_kept = n_kept;
        row.weights = scores.data();
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
  if (p.size() != static_cast<size_t>(r.n_kept) ||
      !std::equal(p.begin(), p.end(), r.positions)) {
    p.assign(r.positions, r.positions + r.n_kept);
    s.assign(r.n_kept, 0.0f);
    rows_[r.kv_head] = 0;
  }
  for (int j = 0; j < r.n_kept; ++j) s[j] += r.weights[j];
  ++rows_[r.kv_head];
}

}  // namespace hqekv::cache
