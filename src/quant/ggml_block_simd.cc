// Highway kernels of the llama.cpp block types q8_0, q4_0, q4_1, q5_0, q5_1
// (quant/ggml_block_ref.cc is the oracle; layout in quant/internal.h).
// Compiled once per SIMD target (foreach_target.h), chosen at run time.
//
// Quantize: codes and fp16 parameters bit-identical to the reference (same
// float operations, no fused multiply-adds: no_contract.h; min / max by
// vector reductions, with the sign of a zero result taken from the first zero
// in block order, as the reference's sequential scan does). Dequantize: x^ =
// level * d (+ m) rounded twice, bit-identical too. Dot / Axpy decode one
// vector of a block at a time and accumulate with FMAs (different summation
// order: within the tolerances of quant/README.md). Multi-query: each token
// row is decoded once into scratch and applied to every query row.
//
// Vectors are capped at 8 float lanes (DF of simd-inl.h): N = 4 or 8, so a
// vector never straddles a 32-value block or the 16-value halves of a q4/q5
// block.
#include "quant/no_contract.h"  // first: see there

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/format_traits.h"  // FastQuantizeFn ...

// The kernels of one Highway target: one export and one dispatch for the file.
#ifndef HQEKV_QUANT_GGML_BLOCK_TABLE_DEFINED_
#define HQEKV_QUANT_GGML_BLOCK_TABLE_DEFINED_
namespace hqekv::quant {
struct GgmlBlockSimdTable {
  FastQuantizeFn quantize;
  FastDequantizeFn dequantize;
  FastDotFn dot;
  FastAxpyFn axpy;
  bool (*dot_multi)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    const float* q, size_t qs, int m, float* scores, size_t ss);
  bool (*axpy_multi)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     const float* w, size_t ws, int m, float* acc, size_t as);
};
}  // namespace hqekv::quant
#endif

#include "quant/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/ggml_block_simd.cc"
#include <hwy/foreach_target.h>  // NOLINT: re-includes this file once per target
#include <hwy/highway.h>

#include "quant/internal.h"
#include "quant/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::quant {
namespace HWY_NAMESPACE {
namespace {

// Sign-exact zero: a reduction's 0 result takes the sign of the first zero of
// the block (the reference keeps the first value that compares lower/higher).
float FirstZeroIfZero(float r, const float* x) {
  if (r != 0.0f) return r;
  for (int j = 0; j < kBlockValues; ++j) {
    if (x[j] == 0.0f) return x[j];
  }
  return r;
}

// N reconstructed values j0.. of a block with scale d (and minimum m; q5:
// high-bit mask qh).
template <int kBits, bool kMin, int kZero>
HWY_INLINE VF BlockValues(const uint8_t* blk, uint32_t qh, int j0, VF d, VF m) {
  const DF df;
  VI level = BlockCodes<kBits>(DI(), blk, qh, j0);
  if constexpr (kZero != 0) level = hn::Sub(level, hn::Set(DI(), kZero));
  const VF x = hn::Mul(hn::ConvertTo(df, level), d);
  if constexpr (kMin) return hn::Add(x, m);
  return x;
}

template <int kBits, bool kMin, int kZero>
void QuantizeBlocks(const float* src, size_t nb, uint8_t* codes, uint8_t* meta) {
  constexpr int kCodeBytes = kBits == 8 ? 32 : 16;
  const DF df;
  const DI di;
  const int N = static_cast<int>(hn::Lanes(df));
  HWY_ALIGN float x[kBlockValues];
  HWY_ALIGN int32_t c[kBlockValues];
  for (size_t k = 0; k < nb; ++k) {
    VF lo = hn::Set(df, FLT_MAX), hi = hn::Set(df, -FLT_MAX), amax = hn::Zero(df);
    for (int i = 0; i < kBlockValues; i += N) {
      const VF v = SanitizeV(df, hn::LoadU(df, src + k * kBlockValues + i));
      hn::Store(v, df, x + i);
      lo = hn::Min(lo, v);
      hi = hn::Max(hi, v);
      amax = hn::Max(amax, hn::Abs(v));
    }
    float d, id;
    const float a = hn::GetLane(hn::MaxOfLanes(df, amax));
    if constexpr (kMin) {
      const float mn = FirstZeroIfZero(hn::GetLane(hn::MinOfLanes(df, lo)), x);
      const float mx = FirstZeroIfZero(hn::GetLane(hn::MaxOfLanes(df, hi)), x);
      constexpr int kTop = (1 << kBits) - 1;
      d = (mx - mn) / static_cast<float>(kTop);
      id = BlockInverse(d);
      StoreF16(F32ToF16(mn), meta + 2 * (nb + k));
      const VF vmn = hn::Set(df, mn), vid = hn::Set(df, id), half = hn::Set(df, 0.5f);
      const VF top = hn::Set(df, static_cast<float>(kTop)), zero = hn::Zero(df);
      for (int i = 0; i < kBlockValues; i += N) {
        const VF v = hn::Add(hn::Mul(hn::Sub(hn::Load(df, x + i), vmn), vid), half);
        hn::Store(hn::ConvertTo(di, hn::Min(hn::Max(v, zero), top)), di, c + i);
      }
    } else if constexpr (kBits == 8) {
      d = a / 127.0f;
      id = BlockInverse(d);
      const VF vid = hn::Set(df, id), one = hn::Set(df, 1.0f), half = hn::Set(df, 0.5f);
      const VF lim = hn::Set(df, 127.0f);
      for (int i = 0; i < kBlockValues; i += N) {
        const VF v = hn::Mul(hn::Load(df, x + i), vid);
        const VF t = hn::Trunc(v);  // roundf: half away from zero, exactly
        const VF r = hn::IfThenElse(hn::Ge(hn::Abs(hn::Sub(v, t)), half),
                                    hn::Add(t, hn::CopySign(one, v)), t);
        hn::Store(hn::ConvertTo(di, hn::Min(hn::Max(r, hn::Neg(lim)), lim)), di, c + i);
      }
    } else {
      // The signed value of largest magnitude, first on ties (0 if none).
      float m = 0.0f;
      if (a > 0.0f) {
        const VF va = hn::Set(df, a);
        for (int i = 0; i < kBlockValues; i += N) {
          const intptr_t j = hn::FindFirstTrue(df, hn::Eq(hn::Abs(hn::Load(df, x + i)), va));
          if (j >= 0) {
            m = x[i + j];
            break;
          }
        }
      }
      constexpr int kHalf = 1 << (kBits - 1);
      d = m / static_cast<float>(-kHalf);
      id = BlockInverse(d);
      const VF vid = hn::Set(df, id), bias = hn::Set(df, static_cast<float>(kHalf) + 0.5f);
      const VF top = hn::Set(df, static_cast<float>(2 * kHalf - 1)), zero = hn::Zero(df);
      for (int i = 0; i < kBlockValues; i += N) {
        const VF v = hn::Add(hn::Mul(hn::Load(df, x + i), vid), bias);
        hn::Store(hn::ConvertTo(di, hn::Min(hn::Max(v, zero), top)), di, c + i);
      }
    }
    StoreF16(F32ToF16(d), meta + 2 * k);
    uint8_t* out = codes + k * kCodeBytes;
    uint8_t* mask = meta + (kMin ? 4 : 2) * nb + 4 * k;
    if constexpr (kBits == 8) {
      const hn::Rebind<int8_t, DI> d8;
      for (int i = 0; i < kBlockValues; i += N) {
        hn::StoreU(hn::DemoteTo(d8, hn::Load(di, c + i)), d8, reinterpret_cast<int8_t*>(out + i));
      }
    } else {
      uint8_t* qs = out;
      (void)mask;
      if constexpr (kBits == 5) {
        // Bit 4 of code j -> bit j of the mask.
        const DU du;
        const VU lane = hn::Iota(du, 0);
        uint32_t qh = 0;
        for (int i = 0; i < kBlockValues; i += N) {
          const VU b =
              hn::And(hn::ShiftRight<4>(hn::BitCast(du, hn::Load(di, c + i))), hn::Set(du, 1u));
          qh |= hn::GetLane(
              hn::SumOfLanes(du, hn::Shl(b, hn::Add(lane, hn::Set(du, static_cast<uint32_t>(i))))));
        }
        std::memcpy(mask, &qh, 4);
      }
      const hn::Rebind<uint8_t, DI> d8;
      const VI nib = hn::Set(di, 0xF);
      for (int i = 0; i < kBlockValues / 2; i += N) {
        const VI low = hn::And(hn::Load(di, c + i), nib);
        const VI high = hn::ShiftLeft<4>(hn::And(hn::Load(di, c + 16 + i), nib));
        hn::StoreU(hn::DemoteTo(d8, hn::Or(low, high)), d8, qs + i);
      }
    }
  }
}

// Scales (and minima) of nb blocks into scratch slots 0 (and 1).
template <bool kMin>
void LoadParams(const uint8_t* meta, size_t nb, float** d, float** m) {
  *d = Scratch(0, nb);
  LoadPlane(meta, static_cast<int>(nb), *d);
  *m = nullptr;
  if constexpr (kMin) {
    *m = Scratch(1, nb);
    LoadPlane(meta + 2 * nb, static_cast<int>(nb), *m);
  }
}

// High-bit mask of block k of nb (q5 types; 0 for the others).
template <int kBits, bool kMin>
HWY_INLINE uint32_t BlockMask(const uint8_t* meta, size_t nb, size_t k) {
  if constexpr (kBits == 5) return Load32(meta + (kMin ? 4 : 2) * nb + 4 * k);
  return 0;
}

template <int kBits, bool kMin, int kZero>
void DequantizeBlocks(const uint8_t* codes, const uint8_t* meta, size_t nb, float* dst) {
  constexpr int kCodeBytes = kBits == 8 ? 32 : 16;
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  float *d, *m;
  LoadParams<kMin>(meta, nb, &d, &m);
  for (size_t k = 0; k < nb; ++k) {
    const VF dv = hn::Set(df, d[k]), mv = hn::Set(df, kMin ? m[k] : 0.0f);
    const uint8_t* blk = codes + k * kCodeBytes;
    const uint32_t qh = BlockMask<kBits, kMin>(meta, nb, k);
    for (int i = 0; i < kBlockValues; i += N) {
      hn::StoreU(BlockValues<kBits, kMin, kZero>(blk, qh, i, dv, mv), df,
                 dst + k * kBlockValues + i);
    }
  }
}

template <int kBits, bool kMin, int kZero>
void DotBlocks(const uint8_t* codes, const uint8_t* meta, int T, int D, const float* q,
               float* scores) {
  constexpr int kCodeBytes = kBits == 8 ? 32 : 16;
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  const int per_row = D / kBlockValues;
  float *d, *m;
  LoadParams<kMin>(meta, static_cast<size_t>(T) * per_row, &d, &m);
  for (int t = 0; t < T; ++t) {
    VF acc = hn::Zero(df);
    for (int b = 0; b < per_row; ++b) {
      const size_t k = static_cast<size_t>(t) * per_row + b;
      const VF dv = hn::Set(df, d[k]), mv = hn::Set(df, kMin ? m[k] : 0.0f);
      const uint8_t* blk = codes + k * kCodeBytes;
      const uint32_t qh = BlockMask<kBits, kMin>(meta, static_cast<size_t>(T) * per_row, k);
      const float* qb = q + b * kBlockValues;
      for (int i = 0; i < kBlockValues; i += N) {
        acc = hn::MulAdd(BlockValues<kBits, kMin, kZero>(blk, qh, i, dv, mv), hn::LoadU(df, qb + i),
                         acc);
      }
    }
    scores[t] = Sum(df, acc);
  }
}

template <int kBits, bool kMin, int kZero>
void AxpyBlocks(const uint8_t* codes, const uint8_t* meta, int T, int D, const float* w,
                float* acc) {
  constexpr int kCodeBytes = kBits == 8 ? 32 : 16;
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  const int per_row = D / kBlockValues;
  float *d, *m;
  LoadParams<kMin>(meta, static_cast<size_t>(T) * per_row, &d, &m);
  for (int t = 0; t < T; ++t) {
    const VF wt = hn::Set(df, w[t]);
    for (int b = 0; b < per_row; ++b) {
      const size_t k = static_cast<size_t>(t) * per_row + b;
      const VF dv = hn::Set(df, d[k]), mv = hn::Set(df, kMin ? m[k] : 0.0f);
      const uint8_t* blk = codes + k * kCodeBytes;
      const uint32_t qh = BlockMask<kBits, kMin>(meta, static_cast<size_t>(T) * per_row, k);
      float* ab = acc + b * kBlockValues;
      for (int i = 0; i < kBlockValues; i += N) {
        const VF x = BlockValues<kBits, kMin, kZero>(blk, qh, i, dv, mv);
        hn::StoreU(hn::MulAdd(x, wt, hn::LoadU(df, ab + i)), df, ab + i);
      }
    }
  }
}

// Token row t ([D] values) from preloaded parameters d, m ([T * D/32]).
template <int kBits, bool kMin, int kZero>
HWY_INLINE void DecodeRow(const uint8_t* codes, const uint8_t* meta, size_t nb, const float* d,
                          const float* m, int t, int per_row, float* row) {
  constexpr int kCodeBytes = kBits == 8 ? 32 : 16;
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  for (int b = 0; b < per_row; ++b) {
    const size_t k = static_cast<size_t>(t) * per_row + b;
    const VF dv = hn::Set(df, d[k]), mv = hn::Set(df, kMin ? m[k] : 0.0f);
    const uint8_t* blk = codes + k * kCodeBytes;
    const uint32_t qh = BlockMask<kBits, kMin>(meta, nb, k);
    for (int i = 0; i < kBlockValues; i += N) {
      hn::StoreU(BlockValues<kBits, kMin, kZero>(blk, qh, i, dv, mv), df,
                 row + b * kBlockValues + i);
    }
  }
}

// Multi-query: each token row decoded once (scratch slot 2), then applied to
// every query row.
template <int kBits, bool kMin, int kZero>
void DotMultiBlocks(const uint8_t* codes, const uint8_t* meta, int T, int D, const float* q,
                    size_t q_stride, int rows, float* scores, size_t s_stride) {
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  const int per_row = D / kBlockValues;
  float *d, *m;
  LoadParams<kMin>(meta, static_cast<size_t>(T) * per_row, &d, &m);
  float* row = Scratch(2, static_cast<size_t>(D));
  for (int t = 0; t < T; ++t) {
    DecodeRow<kBits, kMin, kZero>(codes, meta, static_cast<size_t>(T) * per_row, d, m, t, per_row,
                                  row);
    for (int h = 0; h < rows; ++h) {
      const float* qh = q + h * q_stride;
      VF acc = hn::Zero(df);
      for (int i = 0; i < D; i += N)
        acc = hn::MulAdd(hn::LoadU(df, row + i), hn::LoadU(df, qh + i), acc);
      scores[h * s_stride + t] = Sum(df, acc);
    }
  }
}

template <int kBits, bool kMin, int kZero>
void AxpyMultiBlocks(const uint8_t* codes, const uint8_t* meta, int T, int D, const float* w,
                     size_t w_stride, int rows, float* acc, size_t a_stride) {
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  const int per_row = D / kBlockValues;
  float *d, *m;
  LoadParams<kMin>(meta, static_cast<size_t>(T) * per_row, &d, &m);
  float* row = Scratch(2, static_cast<size_t>(D));
  for (int t = 0; t < T; ++t) {
    DecodeRow<kBits, kMin, kZero>(codes, meta, static_cast<size_t>(T) * per_row, d, m, t, per_row,
                                  row);
    for (int h = 0; h < rows; ++h) {
      const VF wt = hn::Set(df, w[h * w_stride + t]);
      float* ah = acc + h * a_stride;
      for (int i = 0; i < D; i += N) {
        hn::StoreU(hn::MulAdd(hn::LoadU(df, row + i), wt, hn::LoadU(df, ah + i)), df, ah + i);
      }
    }
  }
}

// Runs fn<bits, has_min, zero>() for the block kind of f; false for any
// other kind or without vectors.
template <class Fn>
HWY_INLINE bool WithBlockKind(const Format& f, const Fn& fn) {
  if (hn::Lanes(DF()) < 4) return false;
  switch (f.kind) {
    case Kind::kQ8_0:
      return fn.template operator()<8, false, 0>(), true;
    case Kind::kQ4_0:
      return fn.template operator()<4, false, 8>(), true;
    case Kind::kQ4_1:
      return fn.template operator()<4, true, 0>(), true;
    case Kind::kQ5_0:
      return fn.template operator()<5, false, 16>(), true;
    case Kind::kQ5_1:
      return fn.template operator()<5, true, 0>(), true;
    default:
      return false;
  }
}

bool QuantizeGgmlBlockImpl(const Format& f, const float* src, int T, int D, uint8_t* codes,
                           uint8_t* meta) {
  const size_t nb = NumCodes(T, D) / kBlockValues;
  return WithBlockKind(
      f, [&]<int B, bool M, int Z>() { QuantizeBlocks<B, M, Z>(src, nb, codes, meta); });
}
bool DequantizeGgmlBlockImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                             int D, float* dst) {
  const size_t nb = NumCodes(T, D) / kBlockValues;
  return WithBlockKind(
      f, [&]<int B, bool M, int Z>() { DequantizeBlocks<B, M, Z>(codes, meta, nb, dst); });
}
bool DotGgmlBlockImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      const float* q, float* scores) {
  return WithBlockKind(
      f, [&]<int B, bool M, int Z>() { DotBlocks<B, M, Z>(codes, meta, T, D, q, scores); });
}
bool AxpyGgmlBlockImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       const float* w, float* acc) {
  return WithBlockKind(
      f, [&]<int B, bool M, int Z>() { AxpyBlocks<B, M, Z>(codes, meta, T, D, w, acc); });
}
bool DotMultiGgmlBlockImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                           const float* q, size_t q_stride, int m, float* scores, size_t s_stride) {
  return WithBlockKind(f, [&]<int B, bool M, int Z>() {
    DotMultiBlocks<B, M, Z>(codes, meta, T, D, q, q_stride, m, scores, s_stride);
  });
}
bool AxpyMultiGgmlBlockImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                            int D, const float* w, size_t w_stride, int m, float* acc,
                            size_t a_stride) {
  return WithBlockKind(f, [&]<int B, bool M, int Z>() {
    AxpyMultiBlocks<B, M, Z>(codes, meta, T, D, w, w_stride, m, acc, a_stride);
  });
}

}  // namespace

// This target's kernels, one table (exported below).
const GgmlBlockSimdTable* GgmlBlockSimdTableForTarget() {
  static constexpr GgmlBlockSimdTable kTable{
      .quantize = &QuantizeGgmlBlockImpl,
      .dequantize = &DequantizeGgmlBlockImpl,
      .dot = &DotGgmlBlockImpl,
      .axpy = &AxpyGgmlBlockImpl,
      .dot_multi = &DotMultiGgmlBlockImpl,
      .axpy_multi = &AxpyMultiGgmlBlockImpl,
  };
  return &kTable;
}

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::quant
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::quant {

HWY_EXPORT(GgmlBlockSimdTableForTarget);

namespace {
// Looked up per call, not kept in a static: see QuantSimd() in quant/simd.cc.
const GgmlBlockSimdTable& GgmlBlockSimd() {
  return *HWY_DYNAMIC_DISPATCH(GgmlBlockSimdTableForTarget)();
}
}  // namespace

namespace simd {
bool QuantizeGgmlBlock(const Format& f, const float* src, int T, int D, uint8_t* codes,
                       uint8_t* meta) {
  return GgmlBlockSimd().quantize(f, src, T, D, codes, meta);
}
bool DequantizeGgmlBlock(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                         float* dst) {
  return GgmlBlockSimd().dequantize(f, codes, meta, T, D, dst);
}
bool DotGgmlBlock(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                  const float* q, float* scores) {
  return GgmlBlockSimd().dot(f, codes, meta, T, D, q, scores);
}
bool AxpyGgmlBlock(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   const float* w, float* acc) {
  return GgmlBlockSimd().axpy(f, codes, meta, T, D, w, acc);
}
bool DotMultiGgmlBlock(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       const float* q, size_t q_stride, int m, float* scores, size_t s_stride) {
  return GgmlBlockSimd().dot_multi(f, codes, meta, T, D, q, q_stride, m, scores, s_stride);
}
bool AxpyMultiGgmlBlock(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                        const float* w, size_t w_stride, int m, float* acc, size_t a_stride) {
  return GgmlBlockSimd().axpy_multi(f, codes, meta, T, D, w, w_stride, m, acc, a_stride);
}
}  // namespace simd

}  // namespace hqekv::quant
#endif  // HWY_ONCE
