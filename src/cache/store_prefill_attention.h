// Prefill (many-query) attention over a compressed KvStore: each KV head's
// kept tokens are decoded ONCE per call into fp32 rows (quant::DequantizeChunk:
// per-channel K / per-token V codes, Hadamard rotation undone; evicted slots
// and tombstones dropped; the fp16 residual widened), then the tiled kernel of
// cache/prefill_attention.h runs over them, rows = (query, query head of the
// GQA group) pairs, split over (KV head × block of rows) on the pool. The
// per-query path (store_attention.cc) instead decodes every chunk again for
// each query.
//
// Same contract as StoreAttention (q, out: [n][n_q_heads][D] fp32, q_pos[n];
// query i sees the kept tokens of position <= q_pos[i]; out = 0 when it sees
// none), within attn::AttendRows' tolerance of the per-query path (the
// scores are q · dequant(k) instead of the fused rotated-domain dot: fp32
// rounding only). No weight rows come out: queries whose rows a policy
// records (an AttentionSink) stay on the per-query path, so what those
// policies see is bit-identical to before (StorePrefillQueries); a policy that
// only sums the rows per kept token (H2O, SnapKV) gets the sums from the
// tiled kernel instead (AttentionColumnSink below).
#pragma once

#include <cstdint>
#include <functional>

#include "cache/kv_store.h"
#include "cache/store_attention.h"

namespace hqekv::cache {

// How many leading queries of a StoreAttention call take the tiled path: all
// n when no sink is attached, the ones before options.first_sink_query when
// one is; 0 when that batch is too small for tiles to pay off (fewer than
// 16 rows per KV head, cache::UsePrefillAttention) or options.tiled_prefill
// is off.
int StorePrefillQueries(const KvStore& store, int n_q_heads, int n, const AttentionSink* sink,
                        const StoreAttentionOptions& options);

// Per KV head, the attention weights of the recorded queries summed over
// those queries and the query heads of the group, per kept token in walk order
// (what AttentionSum makes of the per-query rows; all a policy that only adds
// rows up needs: H2O's accumulated attention, SnapKV's window votes). Valid
// only during the call.
struct AttentionColumns {
  int kv_head = 0;
  int n_kept = 0;                      // KeptTokens(layer, kv_head)
  int queries = 0;                     // recorded queries summed
  const float* sums = nullptr;         // [n_kept]
  const int32_t* positions = nullptr;  // [n_kept]
};
// Called once per KV head, on the calling thread.
using AttentionColumnSink = std::function<void(const AttentionColumns&)>;

// The tiled attention of queries [0, n) (arguments already checked by
// StoreAttention: valid layer, n_q_heads a positive multiple of n_kv_heads,
// non-null pointers, n > 0). KV heads are decoded a batch at a time so the
// fp32 copy stays under ~64 MiB. With `columns`, the weights of queries
// [first_summed, n) go to it summed per kept token (within
// attn::AttendRows' column-sum tolerance of AttentionSum over the per-query
// path's rows; independent of the thread count).
void StorePrefillAttention(const KvStore& store, int layer, int n_q_heads, const float* q,
                           const int32_t* q_pos, int n, float* out,
                           const AttentionColumnSink* columns = nullptr, int first_summed = 0);

}  // namespace hqekv::cache
