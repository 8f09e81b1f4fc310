// Attention of one layer's queries over the kept tokens of a KvStore, read
// directly from their tiers: scores through attn::DotChunkMulti and the
// weighted sum of values through attn::AxpyChunkMulti (fused dequantize-and-
// dot / -accumulate over all query heads of a GQA group at once, so each
// chunk is decoded once per KV head and query, not once per query head; no
// fp16 copy of the cache is materialized). Softmax: attn::SoftmaxRow (SIMD
// exp), one fp32 row per query head.
//
// For KV head g and each query head h with h / (n_q_heads / n_kv_heads) == g
// (GQA): query i at position q_pos[i] sees every kept token of (layer, g)
// whose original position is <= q_pos[i]; scores are q·k / sqrt(D), one fp32
// softmax over all visible kept tokens (chunks and residual together), then
// out = sum_j w_j v_j. A query that sees no kept token gets out = 0.
// Hadamard formats: q is rotated once per query head for the chunks whose K
// format has `hadamard`, and the accumulator of chunks whose V format has it
// is rotated back once at the end.
//
// KV heads run in parallel (core/parallel.h) when the work is large enough; a
// single decode query with fewer KV heads than that needs is also split
// across spans of chunks (StoreAttentionOptions::spans_per_head).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "cache/kv_store.h"
#include "core/status.h"

namespace hqekv::cache {

// One row of attention weights, handed to the sink per (query, query head).
// weights[j] and positions[j] are in the walk order of (layer, kv_head) (see
// kv_store.h): j indexes the kept tokens, ascending by original position.
// Tokens the query cannot see (position > q_pos) have weight 0. The visible
// weights sum to 1 (or all are 0 when none is visible). Pointers are valid
// only during the call.
struct AttentionRow {
  int kv_head = 0;
  int query = 0;   // index in the batch, 0..n-1
  int q_head = 0;  // absolute query head, 0..n_q_heads-1
  int32_t q_pos = 0;
  int n_kept = 0;                      // KeptTokens(layer, kv_head)
  const float* weights = nullptr;      // [n_kept]
  const int32_t* positions = nullptr;  // [n_kept]
};

// Receives every AttentionRow of a call. Called concurrently for different
// KV heads (never for the same KV head at once): write into per-KV-head state.
using AttentionSink = std::function<void(const AttentionRow&)>;

struct StoreAttentionOptions {
  // Queries with index < first_sink_query are not reported to the sink (e.g.
  // n - window for SnapKV's observation window, n - 20 for HqeKV); their
  // attention output is computed as usual.
  int first_sink_query = 0;
  // Minimum number of (query head × kept token × D) multiply-adds before the
  // KV heads are spread over threads.
  int64_t parallel_min_work = int64_t{1} << 16;
  // A single decode query (n == 1) may be split across (KV head × span of
  // chunks) tasks, each a softmax over its span, merged exactly (within fp32
  // rounding) afterwards: 0 = automatic (only when the KV heads alone cannot
  // keep NumThreads() busy: about 4 tasks per thread, >= 8 chunks per span),
  // >= 1 = this many spans per head (1: never split; tests use > 1).
  int spans_per_head = 0;
  // Prefill batches (>= 16 rows per KV head) without recorded weights take
  // the tiled path of cache/store_prefill_attention.h; false keeps every
  // query on the per-query path (its oracle in the tests and benchmarks).
  bool tiled_prefill = true;
  // Decode steps (n == 1): the query rounded once to a narrower type for the
  // K scores, where this CPU has the kernel; false: the fp32-query kernels
  // everywhere (the oracle path). Batches of n > 1 queries always use fp32.
  // - Per-channel K chunks with integer levels (KIVI / HqeKV tiers: u1/u2/
  //   u3/u4, n1): attn::DotChunkMultiInt16Query; int8 K chunks:
  //   attn::DotRowsInt16Query (attn/multi_query_rows_q16.h). The query is
  //   rounded to int16 per chunk, VNNI dots; a score moves by at most half a
  //   query step per code (attn/multi_query.h).
  // - fp8 K chunks: attn::DotRowsBf16Prepared (attn/multi_query_rows_bf16.h),
  //   the query rounded to bf16 once per query and KV head; each score within
  //   2^-8 of sum |q·k|.
  bool rounded_query = true;
  // Decode steps (n == 1): the softmax weights (times the chunk's scales)
  // rounded to a narrower type for the V sums, where this CPU has the kernel;
  // false: the fp32-weight kernels (the oracle path). Batches of n > 1 queries
  // always use fp32.
  // - Per-token V chunks with integer levels (KIVI / HqeKV tiers: u1/u2/u4/u8,
  //   n1; T a multiple of 16): attn::AxpyChunkMultiInt16Weights; int8 V
  //   chunks: attn::AxpyRowsInt16Weights (attn/multi_query_rows_q16.h). Each
  //   weight row times the group multiplier rounded to int16 per chunk and
  //   group, VNNI dots over token pairs; an output moves by at most half a
  //   weight step per code (attn/multi_query.h).
  // - fp8 V chunks: attn::AxpyRowsBf16Weights (attn/multi_query_rows_bf16.h),
  //   w·s rounded to bf16.
  bool rounded_weights = true;
  // Gemma 2's attention soft-cap (KvGeometry::attn_softcap): each scaled
  // score s -> cap * tanh(s / cap) before the softmax; 0: none. The tiled
  // prefill path has no cap, so a cap keeps every query on the per-query path.
  float softcap = 0;
};

// q: [n][n_q_heads][D] fp32 (RoPE applied); q_pos: [n]; out: [n][n_q_heads][D].
// n_q_heads must be a positive multiple of store.n_kv_heads(). sink may be
// null. Errors (bad layer, head counts, null pointers) leave out untouched.
Status StoreAttention(const KvStore& store, int layer, int n_q_heads, const float* q,
                      const int32_t* q_pos, int n, float* out, const AttentionSink* sink = nullptr,
                      const StoreAttentionOptions& options = {});

// A ready-made sink: per KV head, the sum of the reported weights over query
// heads and queries (H2O's accumulated attention of one step, HqeKV's sum
// over query heads, SnapKV's window votes before pooling), indexed in the
// walk order of that call, with the matching positions. A row whose kept
// positions differ from the ones being summed (the store changed between
// calls) restarts that head's sum; to accumulate across decode steps, merge
// sums(g) by positions(g) into the policy's own state and Clear(). Safe under
// the sink contract (one writer per KV head at a time).
class AttentionSum {
 public:
  explicit AttentionSum(int n_kv_heads) : sums_(n_kv_heads), pos_(n_kv_heads) {}
  AttentionSum(const AttentionSum&) = delete;  // sink() points at this object
  AttentionSum& operator=(const AttentionSum&) = delete;
  // The callback to pass to StoreAttention; valid while this object lives.
  const AttentionSink& sink() const { return sink_; }
  // [n_kept] sums and positions of KV head g (empty before any row).
  const std::vector<float>& sums(int g) const { return sums_[g]; }
  const std::vector<int32_t>& positions(int g) const { return pos_[g]; }
  int rows(int g) const { return rows_.empty() ? 0 : rows_[g]; }
  // Forget the sums (e.g. before the next layer or step).
  void Clear();

 private:
  std::vector<std::vector<float>> sums_;
  std::vector<std::vector<int32_t>> pos_;
  std::vector<int> rows_ = std::vector<int>(sums_.size(), 0);
  AttentionSink sink_ = [this](const AttentionRow& r) { Add(r); };
  void Add(const AttentionRow& r);
};

}  // namespace hqekv::cache
