// Internal helpers shared by the scalar reference (quant/*_ref.cc) and the
// Highway kernels (quant/simd.cc). Not part of the public API: the cache and
// policies use quant/format.h only. Tests include this header to reach the
// reference (the oracle) directly.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "quant/format.h"

namespace hqekv::quant {

// Largest finite fp16. Every stored value and every metadata value is clamped
// to [-kF16Max, kF16Max] (the storage cannot represent more).
inline constexpr float kF16Max = 65504.0f;
inline constexpr float kFp8E4M3Max = 448.0f;    // OCP E4M3 ("fn"): no inf, 0x7F/0xFF are NaN
inline constexpr float kFp8E5M2Max = 57344.0f;  // E5M2: we never emit its inf/NaN codes

// Input sanitizing, applied on load by every kind except kF32:
// NaN -> 0, everything else clamped to [-kF16Max, kF16Max] (so +-inf -> +-65504).
inline float Sanitize(float x) {
  if (std::isnan(x)) return 0.0f;
  return x < -kF16Max ? -kF16Max : (x > kF16Max ? kF16Max : x);
}

// Standard-normal quantiles for normalized quantization with b bits:
// reconstruction points c_k = Phi^-1((k + 1/2) / 2^b) and the interior
// thresholds u_k = Phi^-1((k + 1) / 2^b), k = 0 .. 2^b - 2 (nearest point in
// probability mass). Values from the inverse normal CDF (double precision).
inline constexpr float kNormalCentres1[2] = {-0.67448975f, 0.67448975f};
inline constexpr float kNormalThresh1[1] = {0.0f};
inline constexpr float kNormalCentres2[4] = {-1.15034938f, -0.31863936f, 0.31863936f, 1.15034938f};
inline constexpr float kNormalThresh2[3] = {-0.67448975f, 0.0f, 0.67448975f};
// 4 bits: an extension beyond the tiers HqeKV uses, for `hqekv study quant`
// (uniform vs normalized at 4 bits); scalar reference only.
inline constexpr float kNormalCentres4[16] = {
    -1.86273187f, -1.3180109f,  -1.00999017f, -0.77642176f, -0.57913216f, -0.40225007f,
    -0.23720211f, -0.07841241f, 0.07841241f,  0.23720211f,  0.40225007f,  0.57913216f,
    0.77642176f,  1.00999017f,  1.3180109f,   1.86273187f};
inline constexpr float kNormalThresh4[15] = {-1.53412054f, -1.15034938f, -0.88714656f, -0.67448975f,
                                             -0.48877641f, -0.31863936f, -0.15731068f, 0.0f,
                                             0.15731068f,  0.31863936f,  0.48877641f,  0.67448975f,
                                             0.88714656f,  1.15034938f,  1.53412054f};
inline const float* NormalCentres(int bits) {
  return bits == 1 ? kNormalCentres1 : (bits == 2 ? kNormalCentres2 : kNormalCentres4);
}
inline const float* NormalThresholds(int bits) {
  return bits == 1 ? kNormalThresh1 : (bits == 2 ? kNormalThresh2 : kNormalThresh4);
}
// Threshold mu + sigma*u in the value domain. The product is exact in double
// and the sum rounds once to float, so the result does not depend on whether
// a compiler fuses the multiply-add (the SIMD code must match bit for bit).
inline float NormalThreshold(float mu, float sigma, float u) {
  return static_cast<float>(static_cast<double>(mu) +
                            static_cast<double>(sigma) * static_cast<double>(u));
}

// Number of quantization groups in one T x D chunk (uniform / normal kinds).
inline int NumGroups(const Format& f, int T, int D) {
  return f.grouping == Grouping::kPerChannel ? D : T * (D / f.group);
}
// Number of codes in one chunk (T * D for every kind).
inline size_t NumCodes(int T, int D) { return static_cast<size_t>(T) * static_cast<size_t>(D); }

inline f16_t LoadF16(const uint8_t* p) {
  f16_t h;
  std::memcpy(&h, p, 2);
  return h;
}
inline void StoreF16(f16_t h, uint8_t* p) { std::memcpy(p, &h, 2); }

// fp16 metadata value for a float: clamped to the finite fp16 range, rounded
// to nearest even.
inline f16_t MetaF16(float x) { return F32ToF16(Sanitize(x)); }

// Scale in fp16 for a positive range: never rounds a nonzero scale to zero
// (uses the smallest subnormal instead), so small nonzero groups keep codes.
inline f16_t ScaleF16(float s) {
  if (!(s > 0.0f)) return 0;
  const f16_t h = MetaF16(s);
  return h == 0 ? static_cast<f16_t>(1) : h;
}

// Uniform asymmetric min-max parameters of one group from its (sanitized)
// minimum and maximum: fp16 minimum m16, fp16 scale s16 = (max - m16) / (2^b - 1)
// (computed from the fp16-rounded minimum so the grid starting at m16 reaches
// max), and the float reciprocal used to compute codes (0 when s16 == 0, so a
// constant group gets code 0 and reconstructs m16). code =
// round_half_even(clamp((x - m16) * inv, 0, 2^b - 1)); x^ = code * s16 + m16.
struct UniformParams {
  f16_t scale16, min16;
  float scale, min, inv;
};
inline UniformParams MakeUniformParams(float mn, float mx, int bits) {
  UniformParams p;
  p.min16 = MetaF16(mn);
  p.min = F16ToF32(p.min16);
  const float levels = static_cast<float>((1 << bits) - 1);
  p.scale16 = ScaleF16((mx - p.min) / levels);
  p.scale = F16ToF32(p.scale16);
  p.inv = p.scale16 != 0 ? 1.0f / p.scale : 0.0f;
  return p;
}

// Symmetric scale for int8 (amax / 127) and fp8 (amax / max finite) in fp16,
// rounded UP to the next fp16 value (so x / scale never exceeds the code
// range and nothing saturates, even when the scale is an fp16 subnormal);
// 0 only for an all-zero input, where inv is 0 too.
inline f16_t SymScaleF16(float s) {
  if (!(s > 0.0f)) return 0;
  const float c = s < kF16Max ? s : kF16Max;
  f16_t h = F32ToF16(c);
  if (F16ToF32(h) < c) ++h;  // positive fp16 bit patterns are ordered like their values
  return h;
}
inline void MakeSymScale(float amax, float qmax, f16_t* s16, float* inv) {
  *s16 = SymScaleF16(amax / qmax);
  *inv = *s16 != 0 ? 1.0f / F16ToF32(*s16) : 0.0f;
}

// Constants of the two FP8 formats: mantissa bits m, exponent bias, largest
// finite code and value, smallest normal 2^(1-bias), and 2^(bias-1+m) (which
// maps the subnormal step to 1).
struct Fp8Params {
  uint32_t m, bias, max_code;
  float max_val, min_normal, sub_scale;
};
inline Fp8Params Fp8Constants(bool e4m3) {
  return e4m3 ? Fp8Params{3, 7, 0x7E, kFp8E4M3Max, 0x1p-6f, 0x1p9f}
              : Fp8Params{2, 15, 0x7B, kFp8E5M2Max, 0x1p-14f, 0x1p16f};
}

// FP8 encode (round to nearest even, saturating at the largest finite value,
// NaN never produced; input must be finite) and decode.
uint8_t EncodeFp8(float v, bool e4m3);
float DecodeFp8(uint8_t code, bool e4m3);
const float* Fp8DecodeTable(bool e4m3);  // 256 entries

// ---- llama.cpp / ggml block types (Kind::kQ8_0 .. kQ5_1)
//
// A chunk [T][D] (D a multiple of 32) is nb = T*D/32 blocks of 32 consecutive
// values of one token; block k covers values [32k, 32k + 32) of the chunk in
// row-major order. Codes plane: block k at k * code_bytes; q8_0 stores 32
// int8, q4_* and q5_* 16 bytes of low nibbles (byte j = code j | code j+16 <<
// 4). Metadata: plane 0 = nb fp16 scales d, then (_1 types) nb fp16 minima m,
// then (q5_*) nb little-endian 32-bit masks of the codes' bit 4 (bit j = code
// j). This is ggml's block with its fp16 fields and q5 high-bit mask moved out
// of the codes plane, which keeps the codes plane a power of two bytes per
// chunk so that the store's page units pack it without slack.
inline constexpr int kBlockValues = 32;
struct BlockLayout {
  int bits;        // code width: 8, 4 or 5
  bool has_min;    // _1 types: x^ = q*d + m; else x^ = (q - zero)*d
  int zero;        // 8 (q4_0), 16 (q5_0), 0 (q8_0: signed codes; _1 types)
  int code_bytes;  // codes plane bytes of one block: 32 or 16
  // Metadata bytes of one block: 2 (d) [+ 2 (m)] [+ 4 (high-bit mask)].
  int meta_bytes() const { return (has_min ? 4 : 2) + (bits == 5 ? 4 : 0); }
  // Byte offset of the high-bit masks in a metadata plane of nb blocks.
  size_t mask_offset(size_t nb) const { return (has_min ? 4 : 2) * nb; }
};
inline bool IsGgmlBlock(Kind k) {
  return k == Kind::kQ8_0 || k == Kind::kQ4_0 || k == Kind::kQ4_1 || k == Kind::kQ5_0 ||
         k == Kind::kQ5_1;
}
inline BlockLayout BlockLayoutOf(Kind k) {
  switch (k) {
    case Kind::kQ4_0:
      return {4, false, 8, 16};
    case Kind::kQ4_1:
      return {4, true, 0, 16};
    case Kind::kQ5_0:
      return {5, false, 16, 16};
    case Kind::kQ5_1:
      return {5, true, 0, 16};
    default:
      return {8, false, 0, 32};  // kQ8_0
  }
}
// 1/d as ggml computes it (0 for d == 0), and 0 where 1/d overflows (|d| <
// 2^-128: ggml would convert inf/NaN to an integer, undefined behaviour); the
// fp16 scale of such a block is 0 anyway.
inline float BlockInverse(float d) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  return std::isfinite(id) ? id : 0.0f;
}

// Dense LSB-first bit packing of n codes of `bits` bits (bits in {1,2,4,8}):
// code i occupies bits [i*bits, (i+1)*bits) of the byte stream (bit 0 = LSB
// of byte 0). Writes/reads ceil(n*bits/8) bytes; padding bits at the very end
// are written as zero.
void PackCodes(const uint8_t* codes, size_t n, int bits, uint8_t* out);
void UnpackCodes(const uint8_t* packed, size_t n, int bits, uint8_t* codes);

// kUniform3 code planes of n codes: the low 2 bits of every code as a dense
// 2-bit stream (Split3LowBytes(n) bytes), then the high bit as a dense 1-bit
// stream (ceil(n / 8) bytes).
inline size_t Split3LowBytes(size_t n) { return (2 * n + 7) / 8; }
inline size_t Split3Bytes(size_t n) { return Split3LowBytes(n) + (n + 7) / 8; }

// Scalar reference implementations: the oracle for the SIMD kernels.
namespace ref {
void QuantizeChunk(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta);
// Reconstruction in the (possibly rotated) storage domain: Hadamard NOT undone.
void DequantizeStored(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      float* dst);
void DequantizeChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     float* dst);
void DotChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
              const float* q, float* scores);
void AxpyChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
               const float* w, float* acc);

// Per-kind reference quantizers, the rows of quant/format_traits.cc (src
// already sanitized / rotated as needed; storage domain).
void QuantizeRaw(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta);
void DequantizeRaw(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   float* dst);
void QuantizeUniform(const Format& f, const float* src, int T, int D, uint8_t* codes,
                     uint8_t* meta);
void DequantizeUniform(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       float* dst);
// Uniform quantization to unpacked codes (one byte each, code order of f's
// grouping) with `bits` bits, and the metadata planes; and its inverse. The
// packed kinds (kUniform, kUniform3) differ only in how they store the codes.
void UniformCodes(const Format& f, int bits, const float* src, int T, int D, uint8_t* codes,
                  uint8_t* meta);
void UniformDecode(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   float* dst);
// 3-bit uniform (kUniform3, quant/uniform3_ref.cc): codes split in a 2-bit
// plane of the low bits and a 1-bit plane of the high bits.
void QuantizeUniform3(const Format& f, const float* src, int T, int D, uint8_t* codes,
                      uint8_t* meta);
void DequantizeUniform3(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                        float* dst);
void QuantizeNormal(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta);
void DequantizeNormal(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      float* dst);
void QuantizeInt8(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta);
void DequantizeInt8(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    float* dst);
void QuantizeFp8(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta);
void DequantizeFp8(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   float* dst);
void QuantizeGgmlBlock(const Format& f, const float* src, int T, int D, uint8_t* codes,
                       uint8_t* meta);
void DequantizeGgmlBlock(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                         float* dst);

// Normalized-quantization statistics of one group of n values read with a
// stride (sanitized on load): mean, and the unbiased std (divide by n-1; 0 for
// n == 1), accumulated in float: contiguous groups with n % 8 == 0 in 8
// interleaved partial sums combined pairwise, others sequentially in index
// order; exactly the SIMD kernels' order.
void NormalStats(const float* x, int n, size_t stride, float* mean, float* stdev);
}  // namespace ref

// Highway kernels (quant/simd.cc), dispatched to the best target at run time
// through one table per translation unit.
// Each returns false, doing nothing, when it has no fast path for the format
// and shape (the caller then uses ref::). Hadamard is not handled here: the
// caller rotates. DequantizeStored does not undo a rotation.
namespace simd {
// Any kind: the row of quant/format_traits.h (false when it has no kernel).
bool Quantize(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta);
bool DequantizeStored(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      float* dst);
bool Dot(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D, const float* q,
         float* scores);
bool Axpy(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D, const float* w,
          float* acc);

// One set per kind family: Grouped (uniform, normal 1/2-bit), Int8, Fp8, F16,
// Uniform3.
#define HQEKV_QUANT_DECLARE_FAMILY(Fam)                                                          \
  bool Quantize##Fam(const Format& f, const float* src, int T, int D, uint8_t* codes,            \
                     uint8_t* meta);                                                             \
  bool Dequantize##Fam(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D, \
                       float* dst);                                                              \
  bool Dot##Fam(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,        \
                const float* q, float* scores);                                                  \
  bool Axpy##Fam(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,       \
                 const float* w, float* acc);
HQEKV_QUANT_DECLARE_FAMILY(Grouped)
HQEKV_QUANT_DECLARE_FAMILY(Int8)
HQEKV_QUANT_DECLARE_FAMILY(Fp8)
HQEKV_QUANT_DECLARE_FAMILY(F16)
HQEKV_QUANT_DECLARE_FAMILY(Uniform3)
HQEKV_QUANT_DECLARE_FAMILY(GgmlBlock)  // quant/ggml_block_simd.cc
#undef HQEKV_QUANT_DECLARE_FAMILY

// Multi-query kernels of the ggml block types (quant/ggml_block_simd.cc;
// attn/multi_query.cc falls back to them).
bool DotMultiGgmlBlock(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       const float* q, size_t q_stride, int m, float* scores, size_t s_stride);
bool AxpyMultiGgmlBlock(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                        const float* w, size_t w_stride, int m, float* acc, size_t a_stride);

// Uniform3 per-token axpy for m rows (quant/simd.cc): bit-identical to m
// single-row Axpy calls (the codes are fetched once for every row).
bool AxpyMultiUniform3(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       const float* w, size_t w_stride, int m, float* acc, size_t a_stride);

// HadamardRotate on each of T rows of x[T][D], bit-identical to it.
bool HadamardRows(float* x, int T, int D);
}  // namespace simd

}  // namespace hqekv::quant
