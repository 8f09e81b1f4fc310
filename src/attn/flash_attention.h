// Tiled causal attention of many query rows against one KV head (prefill):
// blocks of query rows × tiles of KV tokens with an online softmax (running
// max and sum per row), so each K/V tile is read once per block of rows
// instead of once per row.
//
// Shapes and units: a KV head's tokens lie in tiles of `tile_tokens`
// consecutive tokens; tile i holds K rows at k[i] and V rows at v[i], each
// [tile_tokens][D] values (fp32 or fp16 bits), row-major; every tile is full
// except possibly the last. Query rows are fp32 [R][D] `q_stride` floats
// apart, already multiplied by the softmax scale (1/sqrt(D)); row r sees the
// first visible[r] tokens (a causal prefix: the caller maps positions to a
// count, so positions with gaps cost nothing here).
//
//   out[r] = sum_{t < visible[r]} softmax_t(q[r] · k_t) v_t   (fp32 [R][D]),
//   out[r] = 0 when visible[r] == 0 (attention over an empty set).
//
// Highway kernel (runtime dispatch) with lanes over query rows: Q is
// transposed once per block of rows, K and V values are broadcast, so every
// FMA is useful (no horizontal sums) and the softmax state (max, sum, the
// rescale factor) is one vector per lane group; exp by Highway's polynomial
// (<= 1 ulp); fp16 tiles widened to fp32 once per (block, tile).
//
// Column sums (H2O's accumulated attention, SnapKV's window votes): when
// cols.sums is set, also
//
//   cols.sums[t] += sum_{first_row <= r < R} w_r(t),  w_r(t) = softmax weight
//                   row r gives token t (0 when t >= visible[r]),
//
// for t < max_r visible[r]. The kernel keeps every tile's numerators P and the
// running max they were taken against ([tiles][TT][rows of a block] fp32:
// 1 MiB per block at 4096 tokens, 64 rows) and, once a block's final max and
// sum are known, adds sum_r P[t][r] exp(m_tile[r] - m[r]) / l[r]: no second
// pass over K. Tolerance: |sums - ref| <= 1e-5 · (1 + max |q · k|) · |ref[t]|
// + 1e-30, ref[t] including what sums[t] held before the call (summation
// order and exp rounding; the oracle adds the rows one by one, in order).
//
// Tolerance against ref::AttendRows (the scalar two-pass oracle: all scores,
// std::exp softmax, then the weighted sum; asserted by
// tests/attn/flash_attention_test.cc on every compiled target):
// |out - ref| <= 4e-6 · max|v| · (1 + max_r,t |q_r · k_t|) per element
// (summation order, FMA and exp rounding only).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hqekv::attn {

enum class KvRowType { kF32, kF16 };

// One KV head's rows, tiled (see above).
struct KvTiles {
  KvRowType type = KvRowType::kF32;
  int D = 0;                       // head dim
  int tile_tokens = 0;             // tokens per full tile (> 0)
  int64_t tokens = 0;              // tokens held (>= every visible[r])
  const void* const* k = nullptr;  // [ceil(tokens / tile_tokens)] tile pointers
  const void* const* v = nullptr;  // same for V
};

// Where to add the column sums (see above); sums == nullptr: none.
struct ColumnSums {
  float* sums = nullptr;  // [max_r visible[r]] fp32, added to
  int first_row = 0;      // rows [first_row, R) are summed
};

// Query rows each block of the SIMD kernel takes at once on this CPU (lanes
// × row vectors): callers splitting rows into tasks use a multiple of it.
int AttendRowsBlock();

// out[r * out_stride + d] for r in [0, R), d in [0, D). Preconditions:
// 0 <= visible[r] <= kv.tokens, D > 0.
void AttendRows(const KvTiles& kv, const float* q, size_t q_stride, int R, const int64_t* visible,
                float* out, size_t out_stride, const ColumnSums& cols = {});

namespace ref {
// The scalar oracle (two passes per row: scores, std::exp softmax, sum; the
// normalized weights of rows >= cols.first_row added to cols.sums in row
// order).
void AttendRows(const KvTiles& kv, const float* q, size_t q_stride, int R, const int64_t* visible,
                float* out, size_t out_stride, const ColumnSums& cols = {});
}  // namespace ref

}  // namespace hqekv::attn
