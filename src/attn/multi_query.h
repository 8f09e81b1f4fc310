// Multi-query fused kernels for attention over quantized chunks: the query
// heads of a GQA group share one KV head, so each code group of a chunk is
// decoded once and applied to all m queries (the single-query DotChunk /
// AxpyChunk of quant/format.h decode the chunk again for every head).
//
// Shapes: a chunk is T tokens × D channels in format f (see format.h and
// quant/README.md). Row h of a multi-row operand starts at base + h * stride
// (strides in floats), so the caller can read queries from [n][n_q_heads][D]
// and write scores straight into a [m][n_kept] buffer.
//
// Highway kernels (runtime dispatch) exist for f16, int8, uniform / normal
// (bits <= 2 for normal) per-token with the group a multiple of the vector
// width, and per-channel with T == 32 and bits <= 4; every other format and
// shape runs the single-query entry points once per row (same results as
// those). On AVX2 / AVX-512 the KIVI / HqeKV layouts (per-channel K with
// T == 32 and bits 1/2/4; per-token V whose groups are whole vectors and
// whose vectors hold >= 32 code bits) run full-width kernels instead
// (attn/multi_query_wide-inl.h: 16 lanes on AVX-512, levels by one lane
// permutation), and int8, fp8 (E4M3 / E5M2) and the llama.cpp blocks (q8_0,
// q4_0, q4_1, q5_0, q5_1) run full-width row kernels with the token / chunk
// scale applied once per score and folded into the weights
// (attn/multi_query_rows-inl.h; the llama.cpp blocks otherwise fall back to
// quant/ggml_block_simd.cc's multi-query kernels). Hadamard formats work in the rotated domain
// exactly as DotChunk / AxpyChunk do: the caller rotates q, and rotates the accumulator back.
//
// Tolerance against the single-query scalar reference (ref::DotChunkMulti,
// the oracle; asserted by tests/attn/multi_query_test.cc): scores within
// 1e-5 · D · max|x̂| · max|q|, accumulators within 1e-5 · T · max|x̂| · max|w|
// (different summation order and FMA use only; same bound as format.h's
// SIMD kernels).
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/format.h"

namespace hqekv::attn {

// scores[h * s_stride + t] = sum_d q[h * q_stride + d] * x̂[t][d],
// for h in [0, m), t in [0, T). Precondition: Validate(f, T, D).ok(), m >= 0.
void DotChunkMulti(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   const float* q, size_t q_stride, int m, float* scores, size_t s_stride);

// acc[h * a_stride + d] += sum_t w[h * w_stride + t] * x̂[t][d],
// for h in [0, m), d in [0, D). Precondition as above.
void AxpyChunkMulti(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    const float* w, size_t w_stride, int m, float* acc, size_t a_stride);

// Int16-query scores (decode attention over KIVI / HqeKV K chunks): for
// per-channel chunks with T == 32 whose levels are the integer codes
// (uniform 1/2/4 bits, u3, normal-1; Int16QueryApplies), row h of the query
// times the chunk's per-channel multiplier a[d] is rounded to int16 once:
//   qa[d] = q[h][d]·a[d] (fp32), amax = max_d |qa[d]|, sq = amax / 32767,
//   qi[d] = round_half_even(qa[d] · (32767 / amax)) (all 0 when amax == 0),
//   scores[h][t] = fma(float(sum_d qi[d]·code[d][t]), sq, sum_d q[h][d]·b[d])
// (the integer sum is exact in int32, D <= 4096; float() rounds it to
// nearest even; b the per-channel offset). Returns false, writing
// nothing, when this CPU has no such kernel (AVX-512 VNNI + VBMI, GCC builds),
// the format / shape does not apply (also D not a multiple of 16), or some
// qa is not finite: the caller then uses DotChunkMulti.
// Oracle: ref::DotChunkMultiInt16Query, the same math in scalar code; they
// differ only in the order of the fp32 offset sum sum_d q·b (tolerance: 1e-6
// of sum_d |q·b| plus 1e-6 of |sq·sum|). Against DotChunkMulti (fp32 query) the
// scores move by at most sq/2 · sum_d code[d][t] (the query's rounding).
bool Int16QueryApplies(const quant::Format& f, int T, int D);
bool DotChunkMultiInt16Query(const quant::Format& f, const uint8_t* codes, const uint8_t* meta,
                             int T, int D, const float* q, size_t q_stride, int m, float* scores,
                             size_t s_stride);

// Int16-weight value accumulation (decode attention over KIVI / HqeKV V
// chunks): for per-token chunks whose levels are the integer codes (uniform
// 1/2/4/8 bits, normal-1; Int16WeightsApply: T a multiple of 16 up to 256,
// groups of whole 16-channel vectors), each row's weights times the group's
// multiplier are rounded to int16 once per chunk, row and group column g:
//   u[t] = w[h][t]·a[t][g] (fp32), umax = max_t |u[t]|, su = umax / 32767,
//   ui[t] = round_half_even(u[t] · (32767 / umax)) (all 0 when umax == 0),
//   acc[h][d] += fma(float(sum_t ui[t]·code[t][d]), su, sum_t w[h][t]·b[t][g])
// for d in group g (the integer sum is exact in int32: T <= 256, codes <=
// 255; b the group's offset). Two tokens' codes share an int32 lane, so one
// vpdpwssd does 32 multiply-adds where the fp32 kernel does 16, and the
// group's affine map leaves the per-token loop. Returns false, writing
// nothing, when this CPU has no such kernel (AVX-512 VNNI + VBMI, GCC
// builds), the format / shape does not apply, or some u is not finite: the
// caller then uses AxpyChunkMulti.
// Oracle: ref::AxpyChunkMultiInt16Weights (the same math, offset summed in
// double); they differ only in the order of the fp32 offset sum (tolerance
// 1e-6 of sum_t |w·b| plus 1e-6 of |su·sum|). Against AxpyChunkMulti (fp32
// weights) each accumulator moves by at most su/2 · sum_t code[t][d].
bool Int16WeightsApply(const quant::Format& f, int T, int D);
bool AxpyChunkMultiInt16Weights(const quant::Format& f, const uint8_t* codes, const uint8_t* meta,
                                int T, int D, const float* w, size_t w_stride, int m, float* acc,
                                size_t a_stride);

// Softmax of one row of n fp32 scores in place: entries equal to -inf are
// masked (weight exactly 0); the others get exp(x - max) / sum. Returns false
// (and writes all zeros) when every entry is masked. Highway exp (<= 1 ulp
// per element), so the weights match the std::exp reference within ~1e-6
// relative (ref::SoftmaxRow is the oracle).
bool SoftmaxRow(float* x, int n);
// The same, also returning the row's maximum and sum of exp(x - max) (before
// the normalization; -inf and 0 when every entry is masked): what a split
// softmax needs to merge rows normalized separately (store_attention.cc).
bool SoftmaxRowStats(float* x, int n, float* max, float* sum);
// The same without the normalization: x[i] = exp(x[i] - max) (0 where
// masked) and *sum their sum (0 when every entry is masked: returns false,
// all zeros). A caller that only needs sum_j w_j v_j scales that once by
// 1 / sum instead of every weight (store_attention.cc, no sink): one pass
// over the row less. Oracle: ref::SoftmaxRow times the sum.
bool SoftmaxRowUnnormalized(float* x, int n, float* sum);

// Attention-row sums in fp16 (HqeKV's importance window, 2 bytes per kept
// token): for j in [0, n),
//   sums[j] = F32ToF16(F16ToF32(sums[j]) + scale * w[j])
// (core/half.h: round to nearest even), bit-identical to that scalar loop
// (ref::AccumulateF16, the oracle): F16C conversions on AVX2 / AVX-512, the
// oracle on other targets. `scale` must be a power of two (scale * w[j] is
// then exact, so FMA or not gives the same sum).
void AccumulateF16(uint16_t* sums, const float* w, float scale, int n);

namespace ref {
// Oracles: the single-query scalar reference (quant::ref::DotChunk /
// AxpyChunk), called once per row.
void DotChunkMulti(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   const float* q, size_t q_stride, int m, float* scores, size_t s_stride);
void AxpyChunkMulti(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    const float* w, size_t w_stride, int m, float* acc, size_t a_stride);
// The int16-query math of DotChunkMultiInt16Query (scalar; offset summed in
// double). False, writing nothing, when !Int16QueryApplies or a qa is not
// finite.
bool DotChunkMultiInt16Query(const quant::Format& f, const uint8_t* codes, const uint8_t* meta,
                             int T, int D, const float* q, size_t q_stride, int m, float* scores,
                             size_t s_stride);
// The int16-weight math of AxpyChunkMultiInt16Weights (scalar; offset
// summed in double). False, writing nothing, when !Int16WeightsApply or a u
// is not finite.
bool AxpyChunkMultiInt16Weights(const quant::Format& f, const uint8_t* codes, const uint8_t* meta,
                                int T, int D, const float* w, size_t w_stride, int m, float* acc,
                                size_t a_stride);
// std::exp softmax with the same masking contract as attn::SoftmaxRow.
bool SoftmaxRow(float* x, int n);
// The scalar loop of attn::AccumulateF16.
void AccumulateF16(uint16_t* sums, const float* w, float scale, int n);
}  // namespace ref

}  // namespace hqekv::attn
