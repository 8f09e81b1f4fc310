// Highway kernels of the chunk entry points, compiled once per SIMD target
// (foreach_target.h) and chosen at run time (one table per target). Every
// function returns false when it has no fast path for the format/shape; the
// caller then runs the scalar reference. Codes and metadata are bit-identical
// to the reference (quant/*_ref.cc): the same float operations in the same
// order, fp16 rounding by the hardware F16C instructions (round to nearest
// even, like core/half.h), and no fused multiply-adds where codes depend on
// the result. Dequantized values / dot products use FMAs and may differ from
// the reference by float rounding only (see quant/README.md, "Tolerances").
//
// Vectors are capped at 8 float lanes (N = 4 on SSE4/EMU128, 8 on AVX2/AVX3):
// 8 codes of <= 4 bits fill at most one 32-bit word, which the packing uses.
//
// The kernels live in one "-inl.h" per codec family (quant/simd_grouped-inl.h,
// quant/simd_uniform3-inl.h, quant/simd_rows-inl.h, sharing
// quant/simd_codec-inl.h); this file holds the per-family entry points and the
// one table of them per target.
#include "quant/no_contract.h"  // first: see there

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "quant/format_traits.h"  // FastQuantizeFn ...

// The kernels of one Highway target (QuantSimdTableForTarget below): one
// export and one dispatch for the whole file.
#ifndef HQEKV_QUANT_SIMD_TABLE_DEFINED_
#define HQEKV_QUANT_SIMD_TABLE_DEFINED_
namespace hqekv::quant {
struct QuantSimdCodec {
  FastQuantizeFn quantize;
  FastDequantizeFn dequantize;
  FastDotFn dot;
  FastAxpyFn axpy;
};
struct QuantSimdTable {
  QuantSimdCodec grouped, int8, fp8, f16, uniform3;
  bool (*axpy_multi_uniform3)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                              int D, const float* w, size_t ws, int m, float* acc, size_t as);
  bool (*hadamard_rows)(float* x, int T, int D);
};
}  // namespace hqekv::quant
#endif

#include "quant/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/simd.cc"
#include <hwy/foreach_target.h>  // NOLINT: re-includes this file once per target
#include <hwy/highway.h>

#include "quant/internal.h"
#include "quant/simd-inl.h"

#include "quant/simd_codec-inl.h"     // shared by the families below
#include "quant/simd_grouped-inl.h"   // uniform / normal
#include "quant/simd_uniform3-inl.h"  // uniform 3-bit
#include "quant/simd_rows-inl.h"      // int8, f16, fp8, Hadamard

HWY_BEFORE_NAMESPACE();
namespace hqekv::quant {
namespace HWY_NAMESPACE {
namespace {  // entry points private to this file (kernels: the -inl.h files above)

// ------------------------------------------------------------ entry points

// One set per kind family (the rows of quant/format_traits.cc). Each returns
// false when it has no fast path for the format and shape. N < 4 (a scalar
// target) never has one.

bool HasVectors() { return hn::Lanes(DF()) >= 4; }

// Runs fn(tag) with the widest tag whose lane count divides D: the full
// vector (DW), else the 8-capped one (DF); false when neither does.
template <class Fn>
HWY_INLINE bool WithRowTag(int D, const Fn& fn) {
  if (D % static_cast<int>(hn::Lanes(DW())) == 0) return fn(DW()), true;
  if (D % static_cast<int>(hn::Lanes(DF())) == 0) return fn(DF()), true;
  return false;
}

// Uniform and normal (IsGrouped: normal-4 has no kernel).
bool QuantizeGroupedImpl(const Format& f, const float* src, int T, int D, uint8_t* codes,
                         uint8_t* meta) {
  const int N = static_cast<int>(hn::Lanes(DF())), NW = static_cast<int>(hn::Lanes(DW()));
  if (!HasVectors() || !IsGrouped(f)) return false;
  if (PerTokenFast(f, D, NW)) return QuantizePerToken<DW>(f, src, T, D, codes, meta), true;
  if (PerTokenFast(f, D, N)) return QuantizePerToken<DF>(f, src, T, D, codes, meta), true;
  if (PerChannelFast(f, T, D, NW)) return QuantizePerChannel<DW>(f, src, T, D, codes, meta), true;
  if (PerChannelFast(f, T, D, N)) return QuantizePerChannel<DF>(f, src, T, D, codes, meta), true;
  return false;
}

bool DequantizeGroupedImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                           float* dst) {
  const int N = static_cast<int>(hn::Lanes(DF())), NW = static_cast<int>(hn::Lanes(DW()));
  if (!HasVectors() || !IsGrouped(f)) return false;
  if (PerTokenFast(f, D, N)) return DequantizePerToken(f, codes, meta, T, D, dst), true;
  if (PerChannelFast(f, T, D, NW)) return DequantizePerChannel<DW>(f, codes, meta, T, D, dst), true;
  if (PerChannelFast(f, T, D, N)) return DequantizePerChannel<DF>(f, codes, meta, T, D, dst), true;
  return false;
}

bool DotGroupedImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    const float* q, float* scores) {
  const int N = static_cast<int>(hn::Lanes(DF()));
  if (!HasVectors() || !IsGrouped(f)) return false;
  if (PerTokenFast(f, D, N)) return DotPerToken(f, codes, meta, T, D, q, scores), true;
  if (PerChannelFast(f, T, D, N)) return DotPerChannel(f, codes, meta, T, D, q, scores), true;
  return false;
}

bool AxpyGroupedImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     const float* w, float* acc) {
  const int N = static_cast<int>(hn::Lanes(DF())), NW = static_cast<int>(hn::Lanes(DW()));
  if (!HasVectors() || !IsGrouped(f)) return false;
  if (PerTokenFast(f, D, N)) return AxpyPerToken(f, codes, meta, T, D, w, acc), true;
  if (PerChannelFast(f, T, D, NW)) return AxpyPerChannel<DW>(f, codes, meta, T, D, w, acc), true;
  if (PerChannelFast(f, T, D, N)) return AxpyPerChannel<DF>(f, codes, meta, T, D, w, acc), true;
  return false;
}

// Uniform 3-bit: per token (groups of whole vectors) and per channel with T = 32.
bool Uniform3Fast(const Format& f, int T, int D, int N) {
  if (f.grouping == Grouping::kPerToken) return PerTokenFast(f, D, N);
  return T == kChannelChunkT && D % N == 0;
}

bool QuantizeUniform3Impl(const Format& f, const float* src, int T, int D, uint8_t* codes,
                          uint8_t* meta) {
  const int N = static_cast<int>(hn::Lanes(DF())), NW = static_cast<int>(hn::Lanes(DW()));
  if (!HasVectors() || f.kind != Kind::kUniform3) return false;
  uint8_t* c = reinterpret_cast<uint8_t*>(Scratch(4, NumCodes(T, D) / 4 + 1));
  if (Uniform3Fast(f, T, D, NW)) {
    QuantizeUniform3Codes<DW>(f, src, T, D, c, meta);
  } else if (Uniform3Fast(f, T, D, N)) {
    QuantizeUniform3Codes<DF>(f, src, T, D, c, meta);
  } else {
    return false;
  }
  PackSplit3(c, NumCodes(T, D), codes);
  return true;
}

bool DequantizeUniform3Impl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                            int D, float* dst) {
  const int N = static_cast<int>(hn::Lanes(DF())), NW = static_cast<int>(hn::Lanes(DW()));
  if (!HasVectors() || f.kind != Kind::kUniform3 || !Uniform3Fast(f, T, D, N)) return false;
  if (f.grouping == Grouping::kPerToken) {
    return DequantizeUniform3PerToken(f, codes, meta, T, D, dst), true;
  }
  if (D % NW == 0) return DequantizeUniform3PerChannel<DW>(f, codes, meta, T, D, dst), true;
  return DequantizeUniform3PerChannel<DF>(f, codes, meta, T, D, dst), true;
}

bool DotUniform3Impl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     const float* q, float* scores) {
  const int N = static_cast<int>(hn::Lanes(DF()));
  if (!HasVectors() || f.kind != Kind::kUniform3 || !Uniform3Fast(f, T, D, N)) return false;
  if (f.grouping == Grouping::kPerToken) {
    return DotUniform3PerToken(f, codes, meta, T, D, q, scores), true;
  }
  return DotUniform3PerChannel(f, codes, meta, T, D, q, scores), true;
}

bool AxpyUniform3Impl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      const float* w, float* acc) {
  const int N = static_cast<int>(hn::Lanes(DF())), NW = static_cast<int>(hn::Lanes(DW()));
  if (!HasVectors() || f.kind != Kind::kUniform3 || !Uniform3Fast(f, T, D, N)) return false;
  if (f.grouping == Grouping::kPerToken) {
    return AxpyUniform3PerToken(f, codes, meta, T, D, w, acc), true;
  }
  if (D % NW == 0) return AxpyUniform3PerChannel<DW>(f, codes, meta, T, D, w, acc), true;
  return AxpyUniform3PerChannel<DF>(f, codes, meta, T, D, w, acc), true;
}

// int8 per token: rows of D values, D a multiple of the lane count.
bool QuantizeInt8Impl(const Format&, const float* src, int T, int D, uint8_t* codes,
                      uint8_t* meta) {
  return HasVectors() &&
         WithRowTag(D, [&](auto d) { QuantizeInt8<decltype(d)>(src, T, D, codes, meta); });
}
bool DequantizeInt8Impl(const Format&, const uint8_t* codes, const uint8_t* meta, int T, int D,
                        float* dst) {
  return HasVectors() &&
         WithRowTag(D, [&](auto d) { DequantizeInt8<decltype(d)>(codes, meta, T, D, dst); });
}
bool DotInt8Impl(const Format&, const uint8_t* codes, const uint8_t* meta, int T, int D,
                 const float* q, float* scores) {
  return HasVectors() &&
         WithRowTag(D, [&](auto d) { DotInt8<decltype(d)>(codes, meta, T, D, q, scores); });
}
bool AxpyInt8Impl(const Format&, const uint8_t* codes, const uint8_t* meta, int T, int D,
                  const float* w, float* acc) {
  return HasVectors() &&
         WithRowTag(D, [&](auto d) { AxpyInt8<decltype(d)>(codes, meta, T, D, w, acc); });
}

// fp8 (E4M3 / E5M2): quantize / dequantize walk the chunk as one array.
bool QuantizeFp8Impl(const Format& f, const float* src, int T, int D, uint8_t* codes,
                     uint8_t* meta) {
  if (!HasVectors()) return false;
  return QuantizeFp8<DW>(f.kind == Kind::kFp8E4M3, src, NumCodes(T, D), codes, meta), true;
}
bool DequantizeFp8Impl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       float* dst) {
  if (!HasVectors()) return false;
  return DequantizeFp8<DW>(f.kind == Kind::kFp8E4M3, codes, meta, NumCodes(T, D), dst), true;
}
bool DotFp8Impl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                const float* q, float* scores) {
  const bool e4m3 = f.kind == Kind::kFp8E4M3;
  return HasVectors() &&
         WithRowTag(D, [&](auto d) { DotFp8<decltype(d)>(e4m3, codes, meta, T, D, q, scores); });
}
bool AxpyFp8Impl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                 const float* w, float* acc) {
  const bool e4m3 = f.kind == Kind::kFp8E4M3;
  return HasVectors() &&
         WithRowTag(D, [&](auto d) { AxpyFp8<decltype(d)>(e4m3, codes, meta, T, D, w, acc); });
}

// f16: hardware fp16 conversion only (F16C targets).
bool QuantizeF16Impl(const Format&, const float* src, int T, int D, uint8_t* codes, uint8_t*) {
#if HQEKV_HW_F16
  if (HasVectors()) return QuantizeF16<DW>(src, NumCodes(T, D), codes), true;
#endif
  return false;
}
bool DequantizeF16Impl(const Format&, const uint8_t* codes, const uint8_t*, int T, int D,
                       float* dst) {
#if HQEKV_HW_F16
  if (HasVectors()) return DequantizeF16<DW>(codes, NumCodes(T, D), dst), true;
#endif
  return false;
}
bool DotF16Impl(const Format&, const uint8_t* codes, const uint8_t*, int T, int D, const float* q,
                float* scores) {
#if HQEKV_HW_F16
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  if (HasVectors() && D % N == 0) {
    for (int t = 0; t < T; ++t) {
      VF acc = hn::Zero(df);
      for (int d = 0; d < D; d += N) {
        acc = hn::MulAdd(LoadF16V(df, codes + 2 * (static_cast<size_t>(t) * D + d)),
                         hn::LoadU(df, q + d), acc);
      }
      scores[t] = hn::GetLane(hn::SumOfLanes(df, acc));
    }
    return true;
  }
#endif
  return false;
}
bool AxpyF16Impl(const Format&, const uint8_t* codes, const uint8_t*, int T, int D, const float* w,
                 float* acc) {
#if HQEKV_HW_F16
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  if (HasVectors() && D % N == 0) {
    for (int t = 0; t < T; ++t) {
      const VF wt = hn::Set(df, w[t]);
      for (int d = 0; d < D; d += N) {
        const VF x = LoadF16V(df, codes + 2 * (static_cast<size_t>(t) * D + d));
        hn::StoreU(hn::MulAdd(x, wt, hn::LoadU(df, acc + d)), df, acc + d);
      }
    }
    return true;
  }
#endif
  return false;
}

// Multi-row u3 axpy: per-token only (per channel: false, the caller runs the
// rows one by one).
bool AxpyMultiUniform3Impl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                           const float* w, size_t ws, int m, float* acc, size_t as) {
  const int N = static_cast<int>(hn::Lanes(DF()));
  if (!HasVectors() || f.kind != Kind::kUniform3 || f.grouping != Grouping::kPerToken ||
      !Uniform3Fast(f, T, D, N)) {
    return false;
  }
  using D16 = hn::CappedTag<float, 16>;  // 32 bits of 2-bit codes per vector at most
  if (Uniform3Fast(f, T, D, static_cast<int>(hn::Lanes(D16())))) {
    AxpyMultiUniform3PerToken<D16>(f, codes, meta, T, D, w, ws, m, acc, as);
  } else {
    AxpyMultiUniform3PerToken<DF>(f, codes, meta, T, D, w, ws, m, acc, as);
  }
  return true;
}

}  // namespace

// This target's kernels, one table (exported below).
const QuantSimdTable* QuantSimdTableForTarget() {
  static constexpr QuantSimdTable kTable{
      .grouped = {&QuantizeGroupedImpl, &DequantizeGroupedImpl, &DotGroupedImpl, &AxpyGroupedImpl},
      .int8 = {&QuantizeInt8Impl, &DequantizeInt8Impl, &DotInt8Impl, &AxpyInt8Impl},
      .fp8 = {&QuantizeFp8Impl, &DequantizeFp8Impl, &DotFp8Impl, &AxpyFp8Impl},
      .f16 = {&QuantizeF16Impl, &DequantizeF16Impl, &DotF16Impl, &AxpyF16Impl},
      .uniform3 = {&QuantizeUniform3Impl, &DequantizeUniform3Impl, &DotUniform3Impl,
                   &AxpyUniform3Impl},
      .axpy_multi_uniform3 = &AxpyMultiUniform3Impl,
      .hadamard_rows = &HadamardRowsImpl,
  };
  return &kTable;
}

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::quant
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::quant {

HWY_EXPORT(QuantSimdTableForTarget);

namespace {
// The table of the target Highway chose. Looked up on every call rather than
// kept in a static: tests force one target after another
// (tests/simd_targets.h), and a static would pin the first.
const QuantSimdTable& QuantSimd() { return *HWY_DYNAMIC_DISPATCH(QuantSimdTableForTarget)(); }
}  // namespace

// The simd:: wrappers of one kind family (quant/format_traits.cc puts them in
// the table rows).
#define HQEKV_QUANT_FAMILY_WRAPPERS(Fam, member)                                                 \
  namespace simd {                                                                               \
  bool Quantize##Fam(const Format& f, const float* src, int T, int D, uint8_t* codes,            \
                     uint8_t* meta) {                                                            \
    return QuantSimd().member.quantize(f, src, T, D, codes, meta);                               \
  }                                                                                              \
  bool Dequantize##Fam(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D, \
                       float* dst) {                                                             \
    return QuantSimd().member.dequantize(f, codes, meta, T, D, dst);                             \
  }                                                                                              \
  bool Dot##Fam(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,        \
                const float* q, float* scores) {                                                 \
    return QuantSimd().member.dot(f, codes, meta, T, D, q, scores);                              \
  }                                                                                              \
  bool Axpy##Fam(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,       \
                 const float* w, float* acc) {                                                   \
    return QuantSimd().member.axpy(f, codes, meta, T, D, w, acc);                                \
  }                                                                                              \
  }  // namespace simd

HQEKV_QUANT_FAMILY_WRAPPERS(Grouped, grouped)
HQEKV_QUANT_FAMILY_WRAPPERS(Int8, int8)
HQEKV_QUANT_FAMILY_WRAPPERS(Fp8, fp8)
HQEKV_QUANT_FAMILY_WRAPPERS(F16, f16)
HQEKV_QUANT_FAMILY_WRAPPERS(Uniform3, uniform3)
#undef HQEKV_QUANT_FAMILY_WRAPPERS

bool simd::AxpyMultiUniform3(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                             int D, const float* w, size_t w_stride, int m, float* acc,
                             size_t a_stride) {
  return QuantSimd().axpy_multi_uniform3(f, codes, meta, T, D, w, w_stride, m, acc, a_stride);
}

bool simd::HadamardRows(float* x, int T, int D) { return QuantSimd().hadamard_rows(x, T, D); }

}  // namespace hqekv::quant
#endif  // HWY_ONCE
