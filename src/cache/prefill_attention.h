// Prefill (many-query) causal attention over KV heads held as tiles of
// fp32 / fp16 rows (attn/flash_attention.h): the query heads of a GQA group
// become rows of one block, so every K/V tile a block reads serves all of
// them, and the work is split over (KV head × block of rows) on the
// core/parallel.h pool.
//
// Shapes: q and out are [n][n_q_heads][D] fp32 (RoPE applied, unscaled: the
// 1/sqrt(D) softmax scale is applied here); q_pos[n]; positions[tokens] are
// the original positions of the held tokens, strictly increasing (gaps
// allowed). Query i sees the held tokens with position <= q_pos[i]; a query
// that sees none gets out = 0. Results are within attn::AttendRows'
// tolerance of the per-query softmax, and independent of the thread count
// (each row is computed by one task, in a fixed order).
#pragma once

#include <cstdint>
#include <vector>

#include "cache/kv_cache.h"
#include "attn/flash_attention.h"

namespace hqekv::cache {

// kv[h] = the tiles of KV head h (kv.size() == g.n_kv_heads, each with
// tokens == positions' length and D == g.head_dim).
void PrefillAttention(const KvGeometry& g, const std::vector<attn::KvTiles>& kv,
                      const int32_t* positions, const float* q, const int32_t* q_pos, int n,
                      float* out);

// The same for KV heads [h0, h0 + kv.size()) of g only, each with its own
// held tokens: kv[i] and positions[i] (kv[i].tokens of them) belong to KV head
// h0 + i (a compressed store evicts per head). q and out keep the full
// [n][n_q_heads][D] layout; rows of other heads are not touched.
//
// With cols: cols->sums[i] ([kv[i].tokens] fp32, added to) also receives, per
// held token j of KV head h0 + i, the softmax weights of queries
// [cols->first_query, n) summed over those queries and the group's query
// heads (what cache::AttentionSum makes of the per-query rows: H2O's
// accumulated attention, SnapKV's window votes), within
// attn::AttendRows' column-sum tolerance. Each (head, block of rows) task
// sums into its own buffer; the buffers are added in block order, so the
// sums too are independent of the thread count.
struct HeadColumnSums {
  int first_query = 0;
  std::vector<float*> sums;  // [kv.size()]
  // Tasks run in waves whose per-task sum buffers stay under this many floats
  // (64 MiB; a long prompt would otherwise hold tasks × tokens floats). The
  // sums do not depend on it (buffers are added in task order).
  int64_t max_buffer_floats = int64_t{16} << 20;
};
void PrefillAttentionHeads(const KvGeometry& g, int h0, const std::vector<attn::KvTiles>& kv,
                           const std::vector<const int32_t*>& positions, const float* q,
                           const int32_t* q_pos, int n, float* out,
                           const HeadColumnSums* cols = nullptr);

// True when a batch of n queries is big enough for the tiled path to beat the
// per-query one (a block of rows is AttendRowsBlock() wide; fewer rows waste
// lanes).
bool UsePrefillAttention(const KvGeometry& g, int n);

}  // namespace hqekv::cache
