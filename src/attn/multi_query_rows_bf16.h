// bf16 decode-attention kernels over fp8 chunks (E4M3 and E5M2): the fp8
// counterpart of attn/multi_query_rows_q16.h (int8).
//
// fp8 per chunk (Kind::kFp8E4M3 / kFp8E5M2, quant/README.md): x̂[t][d] =
// s·v(c[t][d]), s the chunk's fp16 scale, v the code's value (codes above the
// largest finite one decode to it, as Fp8DecodeTable). Every fp8 value is a
// bf16 exactly (3 or 2 mantissa bits, exponents inside bf16's range), so the
// kernels widen the codes to bf16 by byte-table lookups (vpermi2b) and dot
// them with vdpbf16ps: 32 exact bf16 products per instruction, summed in fp32.
// The fp32 side is rounded to bf16 once (nearest even; a bf16 whose exponent
// field is 0 counts as 0, as vdpbf16ps reads it):
//   scores[h][t] = s · sum_d bf16(q[h][d]) · v(c[t][d])
//   acc[h][d]   += sum_t bf16(w[h][t]·s) · v(c[t][d])
// Against the fp32 kernels (DotChunkMulti / AxpyChunkMulti) a result moves by
// at most 2^-8 · sum |x·v| (x = q·s or w·s) plus fp32 rounding: a relative
// error per query / weight entry 16x below fp8's own (E4M3: 2^-4). Splitting the
// fp32 side into two bf16 halves would keep ~2^-17 but doubles the
// vdpbf16ps count, and on Zen 5 that made K slower than the fp32 kernel
// (kernel alone); refmodel-4l moved by mean KL 2.7e-5 (fp8
// against fp16: 1.4e-3).
// Why not int16 as for int8: fp8 values span 2^-9 .. 448 (E4M3), so an int16
// value times an int16 query row overflows an int32 sum after a few terms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "quant/format.h"

namespace hqekv::attn {

// Kind::kFp8E4M3 / kFp8E5M2, D a multiple of 64 in [64, 512]; K: 1 <= T <= 64;
// V: T even in [2, 64].
bool Bf16QueryRowsApply(const quant::Format& f, int T, int D);
bool Bf16WeightsRowsApply(const quant::Format& f, int T, int D);

// The scores above for rows h in [0, m) (row h of q at q + h·q_stride, score
// t of row h at scores + h·s_stride + t). Returns false, writing nothing, when
// this CPU has no such kernel (AVX-512 VBMI + BF16, GCC builds), the format /
// shape does not apply, m <= 0, or some q is not finite or |q| >= 2^126 (its
// bf16 could round to inf). Oracle: ref::DotRowsBf16Query (the same bf16
// inputs and exact products; sums in double, so equal within fp32 summation).
bool DotRowsBf16Query(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                      int D, const float* q, size_t q_stride, int m, float* scores,
                      size_t s_stride);

// The query rows rounded and reordered once (a decode step scores every chunk
// of a KV head with the same rows; preparing 4 rows per chunk cost ~100 ns, a
// third of the kernel). words: the kernel's layout; m == 0 when not prepared.
struct Bf16Query {
  std::vector<uint16_t> words;
  int m = 0, D = 0;
};
// False (out->m = 0) when this CPU has no kernel, D is not a multiple of 64
// in [64, 512], m <= 0, or some q is not finite or |q| >= 2^126.
bool PrepareBf16Query(const float* q, size_t q_stride, int m, int D, Bf16Query* out);
// DotRowsBf16Query with rows prepared by PrepareBf16Query (D = q.D, m = q.m);
// false, writing nothing, when q is not prepared or f / T / D do not apply.
bool DotRowsBf16Prepared(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                         const Bf16Query& q, float* scores, size_t s_stride);

// acc[h][d] += the sums above for rows h in [0, m), m <= 16. Declines (false,
// nothing written) as DotRowsBf16Query, for w·s instead of q. Oracle:
// ref::AxpyRowsBf16Weights.
bool AxpyRowsBf16Weights(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                         int D, const float* w, size_t w_stride, int m, float* acc,
                         size_t a_stride);

// Whether a decode walk should take the kernels above for fp8 chunks on this
// CPU rather than the fp32 row kernels (DotChunkMulti / AxpyChunkMulti). Both
// are correct wherever they run; which is faster depends on how the core
// issues vdpbf16ps and vpermi2b. AMD (Zen 5, the tuning machine): the bf16
// kernels, 464 -> 315 ns per chunk (kernel alone). Intel
// Xeon with AVX512_BF16 and AMX (DecodeAttention/fp8): the fp32 row kernels, decode step
// 0.87-0.88x of the bf16 kernels' time at 4K and 0.92-0.93x at 32K. Decided by
// the CPU's vendor, never by a timing at run time, so that one CPU always
// gives the same bits. False where the kernels decline anyway.
bool Bf16RowsPreferred();

// bf16 bits of the 256 fp8 codes' values (Fp8DecodeTable, exact).
const uint16_t* Fp8Bf16Table(bool e4m3);
// x rounded to bf16 (nearest even), as bits; x finite with |x| < 2^126.
uint16_t RoundBf16(float x);
// The value of bf16 bits b, 0 when the exponent field is 0 (vdpbf16ps reads
// such inputs as 0).
float Bf16Value(uint16_t b);

namespace ref {
bool DotRowsBf16Query(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                      int D, const float* q, size_t q_stride, int m, float* scores,
                      size_t s_stride);
bool AxpyRowsBf16Weights(const quant::Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                         int D, const float* w, size_t w_stride, int m, float* acc,
                         size_t a_stride);
}  // namespace ref

}  // namespace hqekv::attn
