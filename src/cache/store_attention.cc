#include "cache/store_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attn/kernel_set.h"
#include "attn/prefetch.h"
#include "cache/store_prefill_attention.h"
#include "core/parallel.h"
#include "quant/format.h"
#include "attn/multi_query.h"
#include "attn/prefetch.h"

namespace hqekv::cache {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();
constexpr int kResidualPiece = 64;  // tokens

using attn::PrefetchBytes;

// Starts loading the bytes of the next chunk into the cache while this one is
// computed: one stream's chunks lie on different pages (decode-time seals
// place the KV heads of a layer in turn; a multi-chunk seal places each
// plane of a stream in consecutive units, but pages are separate
// allocations), which the hardware prefetchers do not follow. Blocks of at
// least a page (the 8-bit tiers' 32 x 128 code blocks, fp16 chunks) also get
// their pages touched (fp16: prefetched, below; attn/prefetch.h): without it
// a prefetch that missed the TLB did not hide the miss (int8 / fp8 at 32K:
// 8.0-10.7 -> 6.7-8.2 ms per step). For the 2/4-bit tiers' smaller blocks the
// same loads cost 20-45% (kivi-2 at 32K 4.7-4.8 -> 6.0-7.0 ms; bench_attention
// DecodeAttention).
// The int8 and q8_0 row kernels take the line prefetches of a later code
// block (attn/prefetch.h) and spread them over their loops: issued as
// one burst here they cost 10-23% of an int8 decode step at 16K-32K (q8_0:
// 0-4%; DecodeAttention/int8, /q8_0). The fp8 kernels gained nothing
// that way and keep the burst.
// fp16 chunks take them a piece at a time (attn/kernel_set.h, candidate 5),
// as the plain cache's walk does: DecodeAttention/fp16 at 16K / 32K 0.82 / 0.94 of
// the time of one burst, one binary switched by the environment.
// A code block: its pages touched (fp16: prefetched, PrefetchPages) and the
// block handed to the kernels through *ahead when they take lines (and it is
// a page or more), else prefetched at once.
void PrefetchCodes(const quant::Format& f, bool takes_lines, const uint8_t* p, size_t n,
                   attn::PrefetchLines* ahead) {
  if (n >= attn::kTouchBytes && takes_lines) {
    if (f.kind == quant::Kind::kF16) {
      attn::PrefetchPages(p, n);
    } else {
      attn::TouchPages(p, n);
    }
    ahead->Set(p, n);
    return;
  }
  PrefetchBytes(p, n);
}
// Chunks of a KV head lie on different pages (decode-time seals place the
// heads of a layer in turn), which the hardware prefetchers do not follow: while the kernels
// read chunk ci, chunk ci + kPrefetchAhead is requested (8 measured 3-5%
// faster than 1 for the 2/4-bit tiers at 16K: each first touch of a page
// walks the page table; bench_attention DecodeAttention at 16K).
constexpr size_t kPrefetchAhead = 8;

// The kernels of one layer's formats (attn/kernel_set.h), indexed by a
// chunk's format index (ChunkView::k_fmt / v_fmt): resolved once per call.
using LayerKernels = std::vector<const attn::ChunkKernels*>;

void PrefetchK(const ChunkView& c, int D, const LayerKernels& lk, attn::PrefetchLines* ahead) {
  PrefetchBytes(c.k_meta, quant::MetaBytes(c.k_format, c.T, D));
  PrefetchCodes(c.k_format, lk[c.k_fmt]->takes_lines, c.k_codes,
                quant::CodeBytes(c.k_format, c.T, D), ahead);
}
void PrefetchV(const ChunkView& c, int D, const LayerKernels& lk, attn::PrefetchLines* ahead) {
  PrefetchBytes(c.v_meta, quant::MetaBytes(c.v_format, c.T, D));
  PrefetchCodes(c.v_format, lk[c.v_fmt]->takes_lines, c.v_codes,
                quant::CodeBytes(c.v_format, c.T, D), ahead);
}
attn::ChunkRef KRef(const ChunkView& c, int D) {
  return attn::ChunkRef{c.k_format, c.k_codes, c.k_meta, c.T, D};
}
attn::ChunkRef VRef(const ChunkView& c, int D) {
  return attn::ChunkRef{c.v_format, c.v_codes, c.v_meta, c.T, D};
}

// Everything one KV head needs, gathered once per call.
struct HeadPlan {
  std::vector<ChunkView> chunks;  // live chunks only, walk order
  // Kept slots of each chunk, counted once here (the passes below would
  // count every chunk 2-3 times).
  std::vector<int> kept;
  ResidualView residual;
  int n_kept = 0;
  // [n_kept], only when a sink will see the rows: walking every kept slot
  // costs ~3% of a decode step at 32K (a push_back per token).
  std::vector<int32_t> positions;
  bool k_hadamard = false, v_hadamard = false;
  int max_T = 0;
};

HeadPlan Plan(const KvStore& store, int layer, int g, bool with_positions) {
  HeadPlan p;
  for (int c = 0; c < store.NumChunks(layer, g); ++c) {
    ChunkView v = store.Chunk(layer, g, c);
    if (!v.live()) continue;
    p.k_hadamard = p.k_hadamard || v.k_format.hadamard;
    p.v_hadamard = p.v_hadamard || v.v_format.hadamard;
    p.max_T = std::max(p.max_T, v.T);
    p.chunks.push_back(v);
    p.kept.push_back(v.KeptCount());
  }
  p.residual = store.Residual(layer, g);
  // A rotated residual format reads the rotated query and accumulates V in
  // the rotated domain, as rotated chunks do.
  p.k_hadamard = p.k_hadamard || p.residual.format.hadamard;
  p.v_hadamard = p.v_hadamard || p.residual.format.hadamard;
  p.n_kept = static_cast<int>(store.KeptTokens(layer, g));
  if (with_positions) store.KeptPositions(layer, g, &p.positions);
  return p;
}

// A part of one KV head's walk: live chunks [c0, c1) of its plan, the first
// kept token of c0 at walk index j0, and the residual when `residual`.
struct Span {
  size_t c0 = 0, c1 = 0;
  int j0 = 0;
  bool residual = true;
};
Span WholeHead(const HeadPlan& p) { return Span{0, p.chunks.size(), 0, true}; }

// What one span of a split head gives (one query): per query head, the
// output normalized over the span's visible tokens ([group][D]), their max
// score and sum of exp(score - max) (-inf / 0: none visible).
struct SpanResult {
  float* out = nullptr;
  float* max = nullptr;
  float* sum = nullptr;
};

// Row stride of a score buffer over n_kept tokens: padded so that the rows of
// one group do not sit a power of two apart (cache-set conflicts).
size_t ScoreStride(int n_kept) { return (static_cast<size_t>(n_kept) + 7) / 8 * 8 + 8; }

// Attention for every query head of KV head g. The `group` query heads that
// share the KV head are processed together: each chunk's codes are decoded
// once for all of them (attn::DotChunkMulti / AxpyChunkMulti), with one fp32
// score row per query head in a [group][stride] buffer.
//
// Split decode (part != nullptr, n == 1): only `span` is walked, into the
// caller's score rows `shared_scores` ([group][ScoreStride(n_kept)], the
// span's columns), its softmax normalized over the span; the span's output and
// softmax statistics go to *part, and neither out nor the sink is touched
// (StoreAttention merges the spans).
void AttendHead(const KvStore& store, const HeadPlan& p, const LayerKernels& lk, int g, int group,
                int n_q_heads, const float* q, const int32_t* q_pos, int n, float* out,
                const AttentionSink* sink, int first_sink_query, float softcap,
                const Span& span = {}, float* shared_scores = nullptr,
                const SpanResult* part = nullptr) {
  const int D = store.head_dim();
  const int n_kept = p.n_kept;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const ResidualView& r = p.residual;
  const quant::Format res_format = r.format;
  // Quantized residual rows ([codes][metadata] per token) are read one token
  // at a time; fp16 rows in pieces of kResidualPiece.
  const int res_piece = r.quantized() ? 1 : kResidualPiece;
  const size_t res_code_bytes = quant::CodeBytes(res_format, 1, D);
  auto res_rows = [&](bool is_k, int a) -> std::pair<const uint8_t*, const uint8_t*> {
    if (!r.quantized()) {
      return {reinterpret_cast<const uint8_t*>((is_k ? r.k : r.v) + static_cast<size_t>(a) * D),
              nullptr};
    }
    const uint8_t* row = (is_k ? r.k_rows : r.v_rows) + static_cast<size_t>(a) * r.row_bytes;
    return {row, row + res_code_bytes};
  };
  const int res_start = n_kept - r.n;  // walk index of the first residual token
  const size_t ss = ScoreStride(n_kept);
  const int max_T = std::max(p.max_T, 1);
  const Span whole = WholeHead(p);
  const Span& sp = part ? span : whole;

  // Per-thread buffers: kept across calls (a decode step calls this once per
  // layer and KV head; reallocating ~n_kept·group floats each time costs page
  // faults).
  thread_local std::vector<float> qs, qr, own_scores, tmp, acc, acc_rot, row_sum;
  thread_local attn::PreparedQuery pq;
  attn::PrefetchLines ahead;  // a later chunk's code block, requested by the kernels
  row_sum.resize(group);
  qs.resize(static_cast<size_t>(group) * D);
  qr.resize(qs.size());
  acc.resize(qs.size());
  acc_rot.resize(qs.size());
  if (!shared_scores) own_scores.resize(ss * group);
  float* const scores_base = shared_scores ? shared_scores : own_scores.data();
  tmp.resize(static_cast<size_t>(group) * max_T);

  for (int i = 0; i < n; ++i) {
    const int32_t qp = q_pos[i];
    // Residual tokens visible to this query: a prefix (positions ascend).
    const int r_vis =
        static_cast<int>(std::upper_bound(r.positions, r.positions + r.n, qp) - r.positions);
    const float* qg = q + (static_cast<size_t>(i) * n_q_heads + static_cast<size_t>(g) * group) * D;
    for (size_t e = 0; e < qs.size(); ++e) qs[e] = qg[e] * scale;
    pq.Forget();  // qs / qr hold this query's rows now
    if (p.k_hadamard) {
      qr = qs;
      for (int hh = 0; hh < group; ++hh)
        quant::HadamardRotate(qr.data() + static_cast<size_t>(hh) * D, D);
    }
    auto fill_masked = [&](int j, int len) {
      for (int hh = 0; hh < group; ++hh) {
        float* row = scores_base + hh * ss + j;
        std::fill(row, row + len, kMasked);
      }
    };
    // Scores, walk order, one row per query head.
    int j = sp.j0;
    const size_t n_chunks = sp.c1;
    const int r_span = sp.residual ? r_vis : 0;  // residual tokens this span reads
    for (size_t ci = sp.c0; ci < std::min(n_chunks, sp.c0 + kPrefetchAhead); ++ci)
      PrefetchK(p.chunks[ci], D, lk, &ahead);
    for (size_t ci = sp.c0; ci < n_chunks; ++ci) {
      const ChunkView& c = p.chunks[ci];
      if (ci + kPrefetchAhead < n_chunks) PrefetchK(p.chunks[ci + kPrefetchAhead], D, lk, &ahead);
      if (ci + 1 == n_chunks && sp.residual) {  // the residual comes next
        PrefetchBytes(res_rows(true, 0).first, r.row_bytes * r_vis);
      }
      const int kept = p.kept[ci];
      if (c.pos0 > qp) {  // pos0 is the chunk's smallest position: nothing visible
        fill_masked(j, kept);
        j += kept;
        continue;
      }
      const float* qk = c.k_format.hadamard ? qr.data() : qs.data();
      if (kept == c.T && c.Position(c.T - 1) <= qp) {  // every slot kept and visible: in place
        lk[c.k_fmt]->dot_k(KRef(c, D), qk, group, scores_base + j, ss, pq, &ahead);
        j += kept;
        continue;
      }
      lk[c.k_fmt]->dot_k(KRef(c, D), qk, group, tmp.data(), c.T, pq, &ahead);
      for (int hh = 0; hh < group; ++hh) {
        const float* src = tmp.data() + static_cast<size_t>(hh) * c.T;
        float* row = scores_base + hh * ss;
        int jj = j;
        for (int t = 0; t < c.T; ++t) {
          if (c.Kept(t)) row[jj++] = c.Position(t) <= qp ? src[t] : kMasked;
        }
      }
      j += kept;
    }
    // The residual is an f16 "chunk" of r_vis tokens, read in pieces so that
    // kernels that dequantize a piece first keep it in cache.
    for (int a = 0; a < r_span; a += res_piece) {
      const int len = std::min(res_piece, r_vis - a);
      const auto [codes, meta] = res_rows(true, a);
      attn::DotChunkMulti(res_format, codes, meta, len, D,
                          res_format.hadamard ? qr.data() : qs.data(), D, group,
                          scores_base + res_start + a, ss);
    }
    if (sp.residual) fill_masked(res_start + r_vis, r.n - r_vis);
    const int j_end = sp.residual ? n_kept : j;  // the span's columns: [sp.j0, j_end)
    if (softcap > 0) {
      // Gemma 2: scaled scores -> cap * tanh(s / cap); masked columns stay masked.
      for (int hh = 0; hh < group; ++hh) {
        float* row = scores_base + hh * ss;
        for (int jj = sp.j0; jj < j_end; ++jj) {
          if (row[jj] != kMasked) row[jj] = softcap * std::tanh(row[jj] / softcap);
        }
      }
    }

    // One fp32 softmax per query head over every visible kept token (of the
    // span, when split). Rows no sink reads stay unnormalized (exp(s - max)):
    // the output is scaled by 1 / sum once instead (one pass less per row).
    bool any = false;
    const bool recorded = sink && *sink && i >= first_sink_query;
    const bool unnormalized = !part && !recorded;
    for (int hh = 0; hh < group; ++hh) {
      if (part) {
        any = attn::SoftmaxRowStats(scores_base + hh * ss + sp.j0, j_end - sp.j0, part->max + hh,
                                    part->sum + hh) ||
              any;
      } else if (unnormalized) {
        any = attn::SoftmaxRowUnnormalized(scores_base + hh * ss, n_kept, &row_sum[hh]) || any;
      } else {
        any = attn::SoftmaxRow(scores_base + hh * ss, n_kept) || any;
      }
    }

    // Weighted sum of values, read from their tiers (rows with nothing
    // visible have all-zero weights and get out = 0).
    std::fill(acc.begin(), acc.end(), 0.0f);
    if (p.v_hadamard) std::fill(acc_rot.begin(), acc_rot.end(), 0.0f);
    j = sp.j0;
    for (size_t ci = sp.c0; any && ci < std::min(n_chunks, sp.c0 + kPrefetchAhead); ++ci)
      PrefetchV(p.chunks[ci], D, lk, &ahead);
    for (size_t ci = sp.c0; ci < n_chunks; ++ci) {
      const ChunkView& c = p.chunks[ci];
      if (any && ci + kPrefetchAhead < n_chunks)
        PrefetchV(p.chunks[ci + kPrefetchAhead], D, lk, &ahead);
      if (any && ci + 1 == n_chunks && sp.residual) {
        PrefetchBytes(res_rows(false, 0).first, r.row_bytes * r_vis);
      }
      const int kept = p.kept[ci];
      if (!any || c.pos0 > qp) {
        j += kept;
        continue;
      }
      float* a = c.v_format.hadamard ? acc_rot.data() : acc.data();
      if (kept == c.T) {  // weights in place (invisible slots have weight 0)
        lk[c.v_fmt]->axpy_v(VRef(c, D), scores_base + j, ss, group, a, &ahead);
        j += kept;
        continue;
      }
      for (int hh = 0; hh < group; ++hh) {
        const float* row = scores_base + hh * ss;
        float* wt = tmp.data() + static_cast<size_t>(hh) * c.T;
        int jj = j;
        for (int t = 0; t < c.T; ++t) wt[t] = c.Kept(t) ? row[jj++] : 0.0f;
      }
      lk[c.v_fmt]->axpy_v(VRef(c, D), tmp.data(), c.T, group, a, &ahead);
      j += kept;
    }
    for (int a = 0; any && a < r_span; a += res_piece) {
      const int len = std::min(res_piece, r_vis - a);
      const auto [codes, meta] = res_rows(false, a);
      attn::AxpyChunkMulti(res_format, codes, meta, len, D, scores_base + res_start + a, ss, group,
                           res_format.hadamard ? acc_rot.data() : acc.data(), D);
    }
    for (int hh = 0; hh < group; ++hh) {
      float* ah = acc.data() + static_cast<size_t>(hh) * D;
      if (p.v_hadamard) {
        float* rh = acc_rot.data() + static_cast<size_t>(hh) * D;
        quant::HadamardRotate(rh, D);
        for (int d = 0; d < D; ++d) ah[d] += rh[d];
      }
      if (part) {
        std::copy(ah, ah + D, part->out + static_cast<size_t>(hh) * D);
        continue;
      }
      const int h = g * group + hh;
      float* oh = out + (static_cast<size_t>(i) * n_q_heads + h) * D;
      if (unnormalized) {
        const float inv = row_sum[hh] > 0.0f ? 1.0f / row_sum[hh] : 0.0f;
        for (int d = 0; d < D; ++d) oh[d] = ah[d] * inv;
      } else {
        std::copy(ah, ah + D, oh);
      }
      if (recorded) {
        AttentionRow row;
        row.kv_head = g;
        row.query = i;
        row.q_head = h;
        row.q_pos = qp;
        row.n_kept = n_kept;
        row.weights = scores_base + hh * ss;
        row.positions = p.positions.data();
        (*sink)(row);
      }
    }
  }
}

// Spans per KV head for one StoreAttention call: 1 (no split) unless it is a
// single decode query with too few KV heads to keep every thread busy (or the
// options ask for a count). WantedSpans decides from counts alone (no plans
// needed when it says 1); SpansPerHead then limits it by the plans' live
// chunks: each span keeps >= kMinSpanChunks chunks.
constexpr size_t kMinSpanChunks = 8;
int WantedSpans(int H, int n, int64_t work, const StoreAttentionOptions& o) {
  if (n != 1) return 1;
  if (o.spans_per_head > 0) return o.spans_per_head;
  const int threads = NumThreads();
  if (threads <= 1 || work < o.parallel_min_work) return 1;
  return (4 * threads + H - 1) / H;  // >= 4 tasks per thread: balance
}
int SpansPerHead(const std::vector<HeadPlan>& plans, int want, const StoreAttentionOptions& o) {
  size_t max_chunks = 0;
  for (const HeadPlan& p : plans) max_chunks = std::max(max_chunks, p.chunks.size());
  if (o.spans_per_head <= 0) {
    want = std::min<int>(want, static_cast<int>(max_chunks / kMinSpanChunks));
  }
  return std::clamp<int>(want, 1, static_cast<int>(max_chunks) + 1);
}

// One decode query (n == 1) over KV heads × spans of chunks, in parallel; the
// spans' softmaxes merged exactly: with m_s, l_s the max and exp-sum of span
// s and M = max_s m_s, span s weighs c_s = l_s e^(m_s - M) / sum_r l_r
// e^(m_r - M); out = sum_s c_s out_s, and span s's weights (normalized over
// the span) are scaled by c_s before the sink sees the row.
void AttendSplit(const KvStore& store, const std::vector<HeadPlan>& plans, const LayerKernels& lk,
                 int spans, int group, int n_q_heads, const float* q, const int32_t* q_pos,
                 float* out, const AttentionSink* sink, const StoreAttentionOptions& o,
                 bool parallel) {
  const int H = static_cast<int>(plans.size());
  const int D = store.head_dim();
  const int tasks = H * spans;
  std::vector<Span> sp(tasks);
  std::vector<size_t> row0(H + 1, 0);  // score rows of head g at row0[g]
  for (int g = 0; g < H; ++g) {
    const HeadPlan& p = plans[g];
    const size_t nc = p.chunks.size();
    size_t c = 0;
    int j = 0;
    for (int s = 0; s < spans; ++s) {
      Span& x = sp[g * spans + s];
      x.c0 = nc * s / spans;
      x.c1 = nc * (s + 1) / spans;
      for (; c < x.c0; ++c) j += p.kept[c];
      x.j0 = j;
      x.residual = s == spans - 1;
    }
    row0[g + 1] = row0[g] + group * ScoreStride(p.n_kept);
  }
  // Per call, on the calling thread: score rows, and per task the span's
  // output [group][D], max [group] and sum [group].
  // (Lambdas naming a thread_local see the running thread's copy: the
  // workers use these pointers.)
  thread_local std::vector<float> score_buf, part_buf;
  score_buf.resize(row0[H]);
  const size_t part_floats = static_cast<size_t>(group) * (D + 2);
  part_buf.resize(part_floats * tasks);
  float* const scores = score_buf.data();
  float* const parts = part_buf.data();
  auto result = [&](int t) {
    float* b = parts + part_floats * t;
    return SpanResult{b, b + static_cast<size_t>(group) * D,
                      b + static_cast<size_t>(group) * D + group};
  };
  auto run = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int g = static_cast<int>(t) / spans;
      const SpanResult r = result(static_cast<int>(t));
      AttendHead(store, plans[g], lk, g, group, n_q_heads, q, q_pos, 1, out, sink,
                 o.first_sink_query, o.softcap, sp[t], scores + row0[g], &r);
    }
  };
  if (parallel) {
    ParallelFor(tasks, run);
  } else {
    run(0, tasks);
  }
  const float neg_inf = -std::numeric_limits<float>::infinity();
  std::vector<float> c(spans);
  for (int g = 0; g < H; ++g) {
    const HeadPlan& p = plans[g];
    const int n_kept = p.n_kept;
    const size_t ss = ScoreStride(n_kept);
    for (int hh = 0; hh < group; ++hh) {
      float mx = neg_inf;
      for (int s = 0; s < spans; ++s) {
        const SpanResult r = result(g * spans + s);
        if (r.sum[hh] > 0.0f) mx = std::max(mx, r.max[hh]);
      }
      float total = 0.0f;
      for (int s = 0; s < spans; ++s) {
        const SpanResult r = result(g * spans + s);
        c[s] = r.sum[hh] > 0.0f ? r.sum[hh] * std::exp(r.max[hh] - mx) : 0.0f;
        total += c[s];
      }
      const int h = g * group + hh;
      float* oh = out + static_cast<size_t>(h) * D;
      std::fill(oh, oh + D, 0.0f);
      float* row = scores + row0[g] + hh * ss;
      for (int s = 0; s < spans; ++s) {
        const float cs = total > 0.0f ? c[s] / total : 0.0f;
        const float* os = result(g * spans + s).out + static_cast<size_t>(hh) * D;
        for (int d = 0; d < D; ++d) oh[d] += cs * os[d];
        const int j1 = s + 1 < spans ? sp[g * spans + s + 1].j0 : n_kept;
        for (int j = sp[g * spans + s].j0; j < j1; ++j) row[j] *= cs;
      }
      if (sink && *sink && 0 >= o.first_sink_query) {
        AttentionRow ar;
        ar.kv_head = g;
        ar.query = 0;
        ar.q_head = h;
        ar.q_pos = q_pos[0];
        ar.n_kept = n_kept;
        ar.weights = row;
        ar.positions = p.positions.data();
        (*sink)(ar);
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
  if (const int t = StorePrefillQueries(store, n_q_heads, n, sink, options); t > 0) {
    StorePrefillAttention(store, layer, n_q_heads, q, q_pos, t, out);
    if (t == n) return Status::Ok();
    // The rest (queries the sink records) per query, exactly as before: batch
    // indices shifted back for the sink, and no split-decode of a lone query.
    const size_t skip = static_cast<size_t>(t) * n_q_heads * store.head_dim();
    const AttentionSink shifted = [sink, t](const AttentionRow& r) {
      AttentionRow s = r;
      s.query += t;
      (*sink)(s);
    };
    StoreAttentionOptions rest = options;
    rest.first_sink_query = 0;
    rest.spans_per_head = 1;
    return StoreAttention(store, layer, n_q_heads, q + skip, q_pos + t, n - t, out + skip, &shifted,
                          rest);
  }
  const int group = n_q_heads / H;
  // Int8 query on decode steps only: prefill batches keep the fp32-query
  // kernels (the per-query path is the tiled prefill's oracle).
  StoreAttentionOptions opts = options;
  opts.rounded_query = options.rounded_query && n == 1;
  opts.rounded_weights = options.rounded_weights && n == 1;
  const attn::KernelOptions ko{opts.rounded_query, opts.rounded_weights};
  LayerKernels lk(store.NumFormats(layer));
  for (size_t i = 0; i < lk.size(); ++i) {
    lk[i] =
        &attn::CachedKernels(store.LayerFormat(layer, static_cast<int>(i)), store.head_dim(), ko);
  }
  int64_t work = 0;
  for (int g = 0; g < H; ++g) {
    work += store.KeptTokens(layer, g) * n * group * store.head_dim();  // = the plan's n_kept
  }
  std::vector<HeadPlan> plans(H);
  const int want = WantedSpans(H, n, work, options);
  const bool planned = want > 1;
  if (planned) {
    for (int g = 0; g < H; ++g) plans[g] = Plan(store, layer, g, sink && *sink);
    const int spans = SpansPerHead(plans, want, options);
    if (spans > 1) {
      AttendSplit(store, plans, lk, spans, group, n_q_heads, q, q_pos, out, sink, opts,
                  work >= options.parallel_min_work);
      return Status::Ok();
    }
  }
  // Unsplit: each task plans its own heads (the plans of a 32K decode step
  // are ~5% of its time; on the calling thread alone they were serial).
  auto run = [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g) {
      if (!planned) plans[g] = Plan(store, layer, static_cast<int>(g), sink && *sink);
      AttendHead(store, plans[g], lk, static_cast<int>(g), group, n_q_heads, q, q_pos, n, out, sink,
                 options.first_sink_query, options.softcap);
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
