// Scalar reference of the llama.cpp KV cache block types q8_0, q4_0, q4_1,
// q5_0 and q5_1 (Kind::kQ8_0 .. kQ5_1; layout in quant/internal.h and
// quant/README.md). The arithmetic is ggml's reference quantizer
// (quantize_row_*_ref of ggml-quants.c, read, not copied): the same float32
// operations in the same order, so codes and scales are bit-identical to
// ggml's blocks (tests/quant/ggml_block_test.cc checks the golden files of
// tests/data/ggml-quants):
//   _0 types: m = the signed value of largest magnitude (first on ties),
//             d = m / -2^(b-1), id = 1/d, q = min(2^b - 1, trunc(x*id + 2^(b-1) + 0.5))
//   _1 types: d = (max - min) / (2^b - 1), id = 1/d, q = min(2^b - 1, trunc((x - min)*id + 0.5))
//   q8_0:     d = max|x| / 127, id = 1/d, q = roundf(x*id) (half away from zero)
// with d (and min) stored as fp16, round to nearest even. Departures from
// ggml, only where ggml's behaviour is undefined: id = 0 when 1/d overflows
// (BlockInverse), and codes clamped at 0 / -127 before the integer conversion.
#include "quant/no_contract.h"  // first: q*d + m must round twice, as ggml's and the kernels'

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "quant/internal.h"

namespace hqekv::quant::ref {
namespace {

// Truncated code of v (>= 0 in practice) clamped to [0, top].
int TruncCode(float v, int top) {
  if (!(v > 0.0f)) return 0;
  if (v >= static_cast<float>(top)) return top;
  return static_cast<int>(v);
}

// Codes c[32] (levels before the zero offset; signed for q8_0) and the fp16
// parameters of one block of 32 sanitized values.
void QuantizeBlock(const BlockLayout& L, const float* x, int* c, f16_t* d16, f16_t* m16) {
  if (L.has_min) {
    float mn = FLT_MAX, mx = -FLT_MAX;
    for (int j = 0; j < kBlockValues; ++j) {
      if (x[j] < mn) mn = x[j];
      if (x[j] > mx) mx = x[j];
    }
    const int top = (1 << L.bits) - 1;
    const float d = (mx - mn) / static_cast<float>(top);
    const float id = BlockInverse(d);
    *d16 = F32ToF16(d);
    *m16 = F32ToF16(mn);
    for (int j = 0; j < kBlockValues; ++j) c[j] = TruncCode((x[j] - mn) * id + 0.5f, top);
    return;
  }
  if (L.bits == 8) {
    float amax = 0.0f;
    for (int j = 0; j < kBlockValues; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = BlockInverse(d);
    *d16 = F32ToF16(d);
    for (int j = 0; j < kBlockValues; ++j) {
      const float r = std::round(x[j] * id);  // half away from zero, as roundf
      c[j] = static_cast<int>(std::min(std::max(r, -127.0f), 127.0f));
    }
    return;
  }
  float amax = 0.0f, m = 0.0f;
  for (int j = 0; j < kBlockValues; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      m = x[j];
    }
  }
  const int half = 1 << (L.bits - 1);
  const float d = m / static_cast<float>(-half);
  const float id = BlockInverse(d);
  *d16 = F32ToF16(d);
  const float bias = static_cast<float>(half) + 0.5f;
  for (int j = 0; j < kBlockValues; ++j) c[j] = TruncCode(x[j] * id + bias, 2 * half - 1);
}

// Codes plane bytes of one block, and (q5) its high-bit mask.
void PackBlock(const BlockLayout& L, const int* c, uint8_t* qs, uint8_t* mask) {
  if (L.bits == 8) {
    for (int j = 0; j < kBlockValues; ++j) qs[j] = static_cast<uint8_t>(static_cast<int8_t>(c[j]));
    return;
  }
  if (L.bits == 5) {
    uint32_t qh = 0;
    for (int j = 0; j < kBlockValues; ++j) qh |= static_cast<uint32_t>((c[j] >> 4) & 1) << j;
    std::memcpy(mask, &qh, 4);
  }
  for (int j = 0; j < kBlockValues / 2; ++j) {
    qs[j] = static_cast<uint8_t>((c[j] & 0xF) | ((c[j + 16] & 0xF) << 4));
  }
}

// Levels q - zero of one block.
void UnpackBlock(const BlockLayout& L, const uint8_t* qs, const uint8_t* mask, int* level) {
  if (L.bits == 8) {
    for (int j = 0; j < kBlockValues; ++j) level[j] = static_cast<int8_t>(qs[j]);
    return;
  }
  uint32_t qh = 0;
  if (L.bits == 5) std::memcpy(&qh, mask, 4);
  for (int j = 0; j < kBlockValues; ++j) {
    const int nib = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
    level[j] = (nib | static_cast<int>(((qh >> j) & 1u) << 4)) - L.zero;
  }
}

}  // namespace

void QuantizeGgmlBlock(const Format& f, const float* src, int T, int D, uint8_t* codes,
                       uint8_t* meta) {
  const BlockLayout L = BlockLayoutOf(f.kind);
  const size_t nb = NumCodes(T, D) / kBlockValues;
  float x[kBlockValues];
  int c[kBlockValues];
  for (size_t k = 0; k < nb; ++k) {
    for (int j = 0; j < kBlockValues; ++j) x[j] = Sanitize(src[k * kBlockValues + j]);
    f16_t d16 = 0, m16 = 0;
    QuantizeBlock(L, x, c, &d16, &m16);
    PackBlock(L, c, codes + k * L.code_bytes, meta + L.mask_offset(nb) + 4 * k);
    StoreF16(d16, meta + 2 * k);
    if (L.has_min) StoreF16(m16, meta + 2 * (nb + k));
  }
}

void DequantizeGgmlBlock(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                         float* dst) {
  const BlockLayout L = BlockLayoutOf(f.kind);
  const size_t nb = NumCodes(T, D) / kBlockValues;
  int level[kBlockValues];
  for (size_t k = 0; k < nb; ++k) {
    UnpackBlock(L, codes + k * L.code_bytes, meta + L.mask_offset(nb) + 4 * k, level);
    const float d = F16ToF32(LoadF16(meta + 2 * k));
    float* y = dst + k * kBlockValues;
    if (L.has_min) {
      const float m = F16ToF32(LoadF16(meta + 2 * (nb + k)));
      for (int j = 0; j < kBlockValues; ++j) y[j] = static_cast<float>(level[j]) * d + m;
    } else {
      for (int j = 0; j < kBlockValues; ++j) y[j] = static_cast<float>(level[j]) * d;
    }
  }
}

}  // namespace hqekv::quant::ref
