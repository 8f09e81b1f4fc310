// Int16 decode-attention kernels over the row-major 8-bit integer chunks:
// int8 (per-token scale) and llama.cpp q8_0 (per-block scale, second half of
// this header). The 8-bit row-major counterparts of attn/multi_query.h's
// DotChunkMultiInt16Query (which covers the per-channel KIVI / HqeKV layouts).
//
// int8 per token (Kind::kInt8, quant/README.md): x̂[t][d] = s[t]·c[t][d],
// s[t] the token's fp16 scale, c a signed byte; codes [T][D]. Row h of the
// query is rounded to int16 (once per call, or once per query and KV head
// through PrepareInt16Query; the per-token scale does not touch the query,
// so nothing per channel needs folding in):
//   amax = max_d |q[h][d]|, sq = amax / 32767,
//   qi[d] = round_half_even(q[h][d] · (32767 / amax))  (all 0 when amax == 0),
//   scores[h][t] = float(sum_d qi[d]·c[t][d]) · (sq · s[t])
// The integer sum is exact in int32 (|sum| <= 32767 · 128 · D < 2^31 for
// D <= 512); float() rounds it to nearest even. Against the fp32-query
// kernels (DotChunkMulti) a score moves by at most s[t] · sq/2 · sum_d
// |c[t][d]| (the query's rounding) plus fp32 rounding.
//
// Why int16 and not int8 (vpdpbusd): an int8 query moved refmodel-4l's
// next-token distributions by KL 1.7e-3 (hqekv ppl --kv int8 --ref fp16).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "quant/format.h"
#include "attn/prefetch.h"

namespace hqekv::attn {

// Kind::kInt8 (Hadamard or not: the caller rotates q, as for DotChunk),
// 1 <= T <= 64, D a multiple of 32 in [32, 512].
bool Int16QueryRowsApply(const quant::Format& f, int T, int D);

// The scores above for rows h in [0, m) (row h of q at q + h·q_stride,
// score t of row h at scores + h·s_stride + t). Returns false, writing
// nothing, when this CPU has no such kernel (AVX-512 VNNI, GCC builds), the
// format / shape does not apply, m <= 0, or some q is not finite: the caller
// then uses DotChunkMulti. Oracle: ref::DotRowsInt16Query (bit-identical:
// the same integer sums and the same two fp32 products).
bool DotRowsInt16Query(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                       int D, const float* q, size_t q_stride, int m, float* scores,
                       size_t s_stride);

// The query rows rounded once (qi, sq above): a decode step scores every
// chunk of a KV head with the same rows, and rounding them per chunk call
// cost ~4.5% of an int8 step at 32K (bench_attention DecodeAttention/int8). The
// rounding depends on the row only, so the scores are the same bits as
// DotRowsInt16Query's. m == 0: not prepared.
struct Int16Query {
  std::vector<int16_t> qi;  // [m][D], 64-byte aligned start (AlignedRows)
  std::vector<float> sq;    // [m] int16 steps
  int m = 0, D = 0;
};
// False (out->m = 0) when this CPU has no kernel (AVX-512 VNNI, GCC builds),
// D does not apply (a multiple of 32 in [32, 512]), m <= 0, or some q is not
// finite.
bool PrepareInt16Query(const float* q, size_t q_stride, int m, int D, Int16Query* out);
// DotRowsInt16Query's scores with rows prepared by PrepareInt16Query (D =
// q.D, m = q.m); false, writing nothing, when q is not prepared or f / T / D
// do not apply. Oracle: ref::DotRowsInt16Query (bit-identical).
//
// ahead (this and the other three kernels below; nullptr: none): bytes the
// caller reads later (attn/prefetch.h), requested a few lines per loop
// iteration of this call; ahead->next moves past what was requested (the
// whole of a 4 KiB block for a 32 x 128 chunk). No output depends on it.
bool DotRowsInt16Prepared(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                          const Int16Query& q, float* scores, size_t s_stride,
                          attn::PrefetchLines* ahead = nullptr);

// Int16-weight value accumulation over int8 V chunks (decode attention): per
// row h the weights times the token scales are rounded to int16 once per call:
//   u[t] = w[h][t]·s[t] (fp32), umax = max_t |u[t]|, su = umax / 32767,
//   ui[t] = round_half_even(u[t] · (32767 / umax))  (all 0 when umax == 0),
//   acc[h][d] = fma(float(sum_t ui[t]·c[t][d]), su, acc[h][d])
// (exact int32 sum: |sum| <= 32767 · 128 · 64). Two tokens' codes share an
// int32 lane (one vpermt2b + one vpsraw per 16 channels x 2 tokens), so one
// vpdpwssd does 32 multiply-adds. Against AxpyChunkMulti (fp32 weights) each
// output moves by at most su/2 · sum_t |c[t][d]| plus fp32 rounding.
// Applies to Kind::kInt8 with T even in [2, 64], D a multiple of 64 in
// [64, 512]; returns false, writing nothing, when this CPU has no such kernel,
// the format / shape does not apply, m <= 0 or m > 16, or some u is not
// finite. Oracle: ref::AxpyRowsInt16Weights (bit-identical).
bool Int16WeightsRowsApply(const quant::Format& f, int T, int D);
bool AxpyRowsInt16Weights(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                          int D, const float* w, size_t w_stride, int m, float* acc,
                          size_t a_stride, attn::PrefetchLines* ahead = nullptr);

// ---- llama.cpp q8_0 blocks (Kind::kQ8_0, quant/README.md): x̂ = c·d[k],
// block k = values [32k, 32k + 32) of the row-major chunk (token t's blocks
// k = t·D/32 .. t·D/32 + D/32 - 1), d[k] its fp16 scale.
//
// K: row h of the query rounded to int16 as for int8 (qi, sq above), then
//   S[k]     = sum_{j<32} qi[32·(k mod D/32) + j] · c[32k + j]   (exact int32)
//   P[k]     = float(S[k]) · d[k]                               (fp32)
//   scores[h][t] = sq · tree(P[t·D/32 .. t·D/32 + D/32))
// where tree sums adjacent pairs, then adjacent pairs of those, ... (D/32 a
// power of two). The kernel reads 16 consecutive blocks at a time (any
// tokens), transposes their codes so that lane i of every vector holds two
// codes of block i, and vpdpwssd then leaves the 16 block sums in the 16
// lanes: the per-block scale costs one conversion and one product per 16
// blocks, and the transpose is shared by up to 4 query rows. Against the
// fp32-query kernels a score moves by at most sq/2 · sum_d |d·c[t][d]| plus
// fp32 rounding.
// Applies to Kind::kQ8_0 (Hadamard or not: the caller rotates q), 1 <= T <=
// 64, D in {32, 64, 128, 256, 512}.
bool Q8_0QueryRowsApply(const quant::Format& f, int T, int D);

// The query rows rounded and laid out for the q8_0 kernel once (a decode
// step scores every chunk of a KV head with the same rows). m == 0: not
// prepared.
struct Q8_0Query {
  std::vector<int32_t> words;  // per row: 16 step vectors of 16 lanes, then the lane offsets
  std::vector<float> sq;       // [m] int16 steps
  int m = 0, D = 0;
};
// False (out->m = 0) when this CPU has no kernel (AVX-512 VNNI + VBMI, GCC
// builds), D does not apply, m <= 0, or some q is not finite.
bool PrepareQ8_0Query(const float* q, size_t q_stride, int m, int D, Q8_0Query* out);
// The scores above with rows prepared by PrepareQ8_0Query (D = q.D, m =
// q.m); false, writing nothing, when q is not prepared or f / T / D do not
// apply. Oracle: ref::DotRowsQ8_0Int16Query (bit-identical).
bool DotRowsQ8_0Prepared(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                         const Q8_0Query& q, float* scores, size_t s_stride,
                         attn::PrefetchLines* ahead = nullptr);
// Prepare + DotRowsQ8_0Prepared in one call (tests, one-off callers).
bool DotRowsQ8_0Int16Query(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                           int D, const float* q, size_t q_stride, int m, float* scores,
                           size_t s_stride);

// V: as AxpyRowsInt16Weights with one weight per (token, block) instead of
// per token: per row h
//   u[t][b] = w[h][t]·d[t·D/32 + b] (fp32), umax = max |u|, su = umax / 32767,
//   ui[t][b] = round_half_even(u[t][b] · (32767 / umax))  (all 0 when umax == 0),
//   acc[h][d] = fma(float(sum_t ui[t][d/32]·c[t][d]), su, acc[h][d])
// (the block scale folds into the weight, so the codes are summed as int8's).
// Against AxpyChunkMulti each output moves by at most su/2 · sum_t |c[t][d]|
// plus fp32 rounding. Kind::kQ8_0 with T even in [2, 64], D in {64, 128, 256,
// 512}; false, writing nothing, as AxpyRowsInt16Weights (m in [1, 16], every
// u finite). Oracle: ref::AxpyRowsQ8_0Int16Weights (bit-identical).
bool Q8_0WeightsRowsApply(const quant::Format& f, int T, int D);
bool AxpyRowsQ8_0Int16Weights(const quant::Format& f, const uint8_t* codes, const uint8_t* meta,
                              int T, int D, const float* w, size_t w_stride, int m, float* acc,
                              size_t a_stride, attn::PrefetchLines* ahead = nullptr);

namespace ref {
bool DotRowsQ8_0Int16Query(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                           int D, const float* q, size_t q_stride, int m, float* scores,
                           size_t s_stride);
bool AxpyRowsQ8_0Int16Weights(const quant::Format& f, const uint8_t* codes, const uint8_t* meta,
                              int T, int D, const float* w, size_t w_stride, int m, float* acc,
                              size_t a_stride);
bool AxpyRowsInt16Weights(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                          int D, const float* w, size_t w_stride, int m, float* acc,
                          size_t a_stride);
// The same math in scalar code (multi_query_rows_q16_ref.cc); false, writing
// nothing, in the same cases except "no kernel".
bool DotRowsInt16Query(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                       int D, const float* q, size_t q_stride, int m, float* scores,
                       size_t s_stride);
}  // namespace ref

}  // namespace hqekv::attn
