// Highway kernels of the iq4_nl KV format (quant/iq4_nl.h; the oracle is
// quant/iq4_nl_ref.cc). Compiled once per SIMD target (foreach_target.h),
// chosen at run time. Quantizing stays scalar (its least-squares refit sums
// in index order).
//
// Per block the 16 grid values times the block's scale go into a float table
// (d * value, the reference's product, so dequantize is bit-identical); N
// 4-bit indices at a time are widened to 32-bit lanes and gathered from it.
// Dot / Axpy accumulate with FMAs in vector order (within the tolerances of
// quant/README.md). Vectors are capped at 8 float lanes (DF of simd-inl.h):
// N = 4 or 8 never straddles the 16-value halves of a block.
#include <cstring>

#include "core/iq4_grid.h"
#include "quant/iq4_nl.h"

#ifndef HQEKV_QUANT_IQ4_NL_TABLE_DEFINED_
#define HQEKV_QUANT_IQ4_NL_TABLE_DEFINED_
namespace hqekv::quant {
// The kernels of one Highway target: one export and one dispatch for the file.
struct Iq4NlSimdTable {
  bool (*dequantize)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     float* dst);
  bool (*dot)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
              const float* q, float* scores);
  bool (*axpy)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
               const float* w, float* acc);
};
}  // namespace hqekv::quant
#endif

#include "quant/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/iq4_nl_simd.cc"
#include <hwy/foreach_target.h>  // NOLINT: re-includes this file once per target
#include <hwy/highway.h>

#include "quant/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::quant {
namespace HWY_NAMESPACE {
namespace {

// lut[i] = d * kIq4Values[i] for the fp16 scale at meta + 2k.
HWY_INLINE void Iq4NlBlockTable(const uint8_t* meta, size_t k, float* lut) {
  const float d = F16ToF32(LoadF16(meta + 2 * k));
  for (int i = 0; i < 16; ++i) lut[i] = d * static_cast<float>(kIq4Values[i]);
}

// N values j0.. of block `blk` through its table.
HWY_INLINE VF Iq4NlValues(const uint8_t* blk, int j0, const float* lut) {
  return hn::GatherIndex(DF(), lut, BlockCodes<4>(DI(), blk, 0, j0));
}

// fn(b, i, x) for the blocks k0 + b in [k0, k1) and their vectors x of the
// N values i.. (i = 0, N, .. 32 - N), in that order.
template <class Fn>
HWY_INLINE void Iq4NlVectors(const uint8_t* codes, const uint8_t* meta, size_t k0, size_t k1,
                             const Fn& fn) {
  const int N = static_cast<int>(hn::Lanes(DF()));
  HWY_ALIGN float lut[16];
  for (size_t k = k0; k < k1; ++k) {
    Iq4NlBlockTable(meta, k, lut);
    const uint8_t* blk = codes + k * kIq4NlCodeBytes;
    for (int i = 0; i < kBlockValues; i += N) fn(k - k0, i, Iq4NlValues(blk, i, lut));
  }
}

bool DequantizeIq4NlImpl(const Format&, const uint8_t* codes, const uint8_t* meta, int T, int D,
                         float* dst) {
  const DF df;
  if (hn::Lanes(df) < 4) return false;
  Iq4NlVectors(codes, meta, 0, NumCodes(T, D) / kBlockValues,
               [&](size_t k, int i, VF x) { hn::StoreU(x, df, dst + k * kBlockValues + i); });
  return true;
}

bool DotIq4NlImpl(const Format&, const uint8_t* codes, const uint8_t* meta, int T, int D,
                  const float* q, float* scores) {
  const DF df;
  if (hn::Lanes(df) < 4) return false;
  const size_t per_row = static_cast<size_t>(D) / kBlockValues;
  for (int t = 0; t < T; ++t) {
    VF acc = hn::Zero(df);
    Iq4NlVectors(codes, meta, t * per_row, (t + 1) * per_row, [&](size_t b, int i, VF x) {
      acc = hn::MulAdd(x, hn::LoadU(df, q + b * kBlockValues + i), acc);
    });
    scores[t] = Sum(df, acc);
  }
  return true;
}

bool AxpyIq4NlImpl(const Format&, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   const float* w, float* acc) {
  const DF df;
  if (hn::Lanes(df) < 4) return false;
  const size_t per_row = static_cast<size_t>(D) / kBlockValues;
  for (int t = 0; t < T; ++t) {
    const VF wt = hn::Set(df, w[t]);
    Iq4NlVectors(codes, meta, t * per_row, (t + 1) * per_row, [&](size_t b, int i, VF x) {
      float* a = acc + b * kBlockValues + i;
      hn::StoreU(hn::MulAdd(x, wt, hn::LoadU(df, a)), df, a);
    });
  }
  return true;
}

}  // namespace

// This target's kernels, one table (exported below).
const Iq4NlSimdTable* Iq4NlSimdTableForTarget() {
  static constexpr Iq4NlSimdTable kTable{
      .dequantize = &DequantizeIq4NlImpl,
      .dot = &DotIq4NlImpl,
      .axpy = &AxpyIq4NlImpl,
  };
  return &kTable;
}

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::quant
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::quant {

HWY_EXPORT(Iq4NlSimdTableForTarget);

namespace {
// Looked up per call, not kept in a static: see QuantSimd() in quant/simd.cc.
const Iq4NlSimdTable& Iq4NlSimd() { return *HWY_DYNAMIC_DISPATCH(Iq4NlSimdTableForTarget)(); }
}  // namespace

namespace simd {
bool DequantizeIq4Nl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     float* dst) {
  return Iq4NlSimd().dequantize(f, codes, meta, T, D, dst);
}
bool DotIq4Nl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
              const float* q, float* scores) {
  return Iq4NlSimd().dot(f, codes, meta, T, D, q, scores);
}
bool AxpyIq4Nl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
               const float* w, float* acc) {
  return Iq4NlSimd().axpy(f, codes, meta, T, D, w, acc);
}
}  // namespace simd

}  // namespace hqekv::quant
#endif  // HWY_ONCE
