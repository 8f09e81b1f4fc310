// Weight kernels of the forward pass: rows of a weight matrix stored in one
// of the GGUF (ggml) block formats, multiplied by fp32 activations.
//
// Block layouts (ggml, little-endian; "fp16" = IEEE binary16):
//   F32, F16, BF16 : one element per value.
//   Q8_0 (34 B / 32)  : fp16 d, int8 q[32];            x = d * q
//   Q4_0 (18 B / 32)  : fp16 d, uint8 qs[16];          x[j] = d * ((qs[j] & 15) - 8),
//                                                      x[j+16] = d * ((qs[j] >> 4) - 8)
//   Q4_K (144 B / 256): fp16 d, fp16 dmin, uint8 scales[12] (8 pairs of 6-bit scale/min),
//                       uint8 qs[128]; 4 groups of 64: low nibbles of qs[32g..32g+32) are
//                       sub-block 2g, high nibbles sub-block 2g+1; x = d*sc*q - dmin*m
//   Q6_K (210 B / 256): uint8 ql[128] (low 4 bits), uint8 qh[64] (high 2 bits),
//                       int8 scales[16] (one per 16 values), fp16 d; x = d*scale*(q - 32)
//
// Activations stay fp32: a SIMD kernel dequantizes weight blocks on the fly
// and accumulates fp32 products (no activation quantization, so the only
// difference to the scalar reference is fp32 summation order).
//
// Every SIMD entry point (Highway, runtime dispatch) has a scalar reference
// here (the *Ref functions) that is its test oracle.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/iq4_grid.h"
#include "core/status.h"
#include "io/gguf_types.h"

namespace hqekv::kernels {

// Weight types are the GGUF tensor types (io/gguf_types.h: TensorType,
// TensorTypeName, and the one block table BlockSize / BlockBytes).

// Bytes of a row of k values; k must be a multiple of BlockSize(t).
int64_t RowBytes(TensorType t, int64_t k);
// Error naming `what` unless k > 0 and k % BlockSize(t) == 0.
Status CheckRowLength(TensorType t, int64_t k, const std::string& what);

// A row-major weight matrix: n rows of k values, rows RowBytes(type, k) apart.
// W[r] multiplies an activation vector of length k (ggml ne[0] = k, ne[1] = n).
struct WeightMatrix {
  TensorType type = TensorType::kF32;
  const void* data = nullptr;
  int64_t n = 0;  // rows (outputs)
  int64_t k = 0;  // row length (inputs)
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + r * RowBytes(type, k);
  }
};

// ---- scalar references (oracles) ----
void DequantizeRowRef(TensorType t, const void* row, int64_t k, float* out);
// Dot of a weight row with x[k]; accumulates in double.
double DotRef(TensorType t, const void* row, const float* x, int64_t k);

// ---- SIMD (Highway, runtime dispatch) ----
float Dot(TensorType t, const void* row, const float* x, int64_t k);
void DequantizeRow(TensorType t, const void* row, int64_t k, float* out);

// y[n] = W x, x[k]; rows split across the thread pool.
void MatVec(const WeightMatrix& w, const float* x, float* y);
// ys[i] = ws[i] x for i < count, all matrices with the same row length, in
// ONE parallel pass over their rows (decode: q/k/v and gate/up share an
// input; one pool wake-up instead of several).
void MatVecMany(const WeightMatrix* const* ws, float* const* ys, int count, const float* x);
// Y[m][n] = X[m][k] W^T for m activation rows (batched prefill). m == 1
// falls back to MatVec; int8-path types see below; F16 / BF16 with m <= 32
// take a dot-form kernel; larger BF16 products on AVX-512 BF16 CPUs the
// bf16-activation vdpbf16ps GEMM; everything else the outer-product GEMM over
// fp32 weight panels (both in kernels/gemm_panel.h).
void MatMul(const WeightMatrix& w, const float* x, int64_t m, float* y);

// Scalar reference of MatMul (double accumulation, no threads).
void MatMulRef(const WeightMatrix& w, const float* x, int64_t m, float* y);

// ---- int8 activations (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS weights) ----
// MatVec / MatVecMany / MatMul quantize the activations once per call to 8
// bits per 32-value block and take integer dot products (VNNI vpdpbusd on
// AVX-512 VNNI CPUs, maddubs on AVX2/AVX-512, scalar elsewhere) for the
// weight types where HasInt8Path(t). This changes the rounding of the result
// (the activation error is <= d/2 per value, d = max|x| / 127 per block), so
// it can be switched off process-wide (tests compare both forwards).
//
// Every such weight type is, per group of G = 32 (16 for Q2_K, Q3_K, Q6_K)
// values, w = A * u + B with unsigned codes u (u <= 63; Q8_0: u = w + 128;
// IQ4_*: u = grid value + 128),
// so a dot is sum_g A_g d_x isum_g(u, q) + B_g d_x sum_g(q): the second term
// is the stored s (per 32) or s16 (per 16).
//
// m rows of k values (k % 32 == 0): block b of row i is q[i*k + 32b ..] with
// scale d[i*k/32 + b] = max|x| / 127, s[..] = d * sum(q) (the min/offset
// term), and s16[i*k/16 + h] = d * sum(q) over the 16 values of half h.
struct Int8Acts {
  int64_t m = 0, k = 0;
  std::vector<int8_t> q;
  std::vector<float> d, s, s16;
  const int8_t* q_row(int64_t i) const { return q.data() + i * k; }
  const float* d_row(int64_t i) const { return d.data() + i * (k / 32); }
  const float* s_row(int64_t i) const { return s.data() + i * (k / 32); }
  const float* s16_row(int64_t i) const { return s16.data() + i * (k / 16); }
};

// Weight types whose products take the int8-activation path when enabled.
bool HasInt8Path(TensorType t);
// The switch covers every reduced-precision activation path: int8 (these
// types) and bf16 (BF16 weights, m > 32, AVX-512 BF16 CPUs; F16 weights, m >
// 32, AMX CPUs: gemm_panel.h).
// One switch because the paths never apply to the same matrix, and off must
// mean "every product on fp32 activations" (bench --fp32-acts, the tests
// that compare against fp32 oracles).
void SetInt8Activations(bool on);  // default: on
bool Int8ActivationsEnabled();

// Scalar oracles: q = nearest-even(x * 127 / max|x|) per block (0 when the block is 0).
void QuantizeActsRef(const float* x, int64_t m, int64_t k, Int8Acts* out);
// Dot of weight row `row` (HasInt8Path(t), k = a.k) with activation row i, in
// double (Q8_0, Q4_K: integer block sums; the other types: the dequantized
// weights DequantizeRowRef times d * q).
double DotInt8Ref(TensorType t, const void* row, const Int8Acts& a, int64_t i);

// SIMD (Highway, runtime dispatch; AVX3_DL = AVX-512 VNNI is compiled in).
void QuantizeActs(const float* x, int64_t m, int64_t k, Int8Acts* out);  // == Ref exactly
float DotInt8(TensorType t, const void* row, const Int8Acts& a, int64_t i);
// y[i * ldy + r] = W[r] . act row i for r in [r0, r1), i < a.m (one thread).
// With a.m >= kInt8PanelMinRows on AVX-512 VNNI CPUs: 16-row interleaved
// panels and a register-blocked kernel (16 weight rows x 8 activation rows;
// fp32 sums in another order than DotInt8's), else row kernels (== DotInt8).
constexpr int64_t kInt8PanelMinRows = 8;

// The IQ4_NL / IQ4_XS grid is core/iq4_grid.h's kIq4Values: the fp32 oracle
// decodes with it; the int8 kernels shuffle bytes through it (value + 128).
void Int8Rows(const WeightMatrix& w, const Int8Acts& a, int64_t r0, int64_t r1, float* y,
              int64_t ldy);

}  // namespace hqekv::kernels
