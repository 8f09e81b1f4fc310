// Row codecs of quant/simd.cc: int8 (per-token symmetric), f16 and fp8
// (E4M3 / E5M2) chunk kernels, and the Hadamard rotation of T rows.
//
// Part of quant/simd.cc's translation unit only (included there once per
// SIMD target, under its no-contraction pragma, quant/no_contract.h): the
// gemma.cpp "-inl.h" style, the toggle guard below admits one inclusion per
// target.

#if defined(HQEKV_QUANT_SIMD_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HQEKV_QUANT_SIMD_ROWS_INL_H_
#undef HQEKV_QUANT_SIMD_ROWS_INL_H_
#else
#define HQEKV_QUANT_SIMD_ROWS_INL_H_
#endif

#include <hwy/highway.h>

#include "quant/simd_codec-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::quant {
namespace HWY_NAMESPACE {
namespace {  // internal linkage, as quant/simd-inl.h

// ------------------------------------------------------------ int8, fp16

template <class DFT>
void QuantizeInt8(const float* src, int T, int D, uint8_t* codes, uint8_t* meta) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DI di;
  const int N = static_cast<int>(hn::Lanes(df));
  float* amax = Scratch(0, static_cast<size_t>(T));
  float* inv = Scratch(1, static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) {
    VF m = hn::Zero(df);
    for (int d = 0; d < D; d += N)
      m = hn::Max(m, hn::Abs(SanitizeV(df, hn::LoadU(df, src + t * D + d))));
    amax[t] = hn::GetLane(hn::MaxOfLanes(df, m));
  }
  SymParamsBatch(amax, T, 127.0f, meta, inv);
  const hn::Rebind<int8_t, DI> d8;
  const VF lo = hn::Set(df, -127.0f), hi = hn::Set(df, 127.0f);
  for (int t = 0; t < T; ++t) {
    const VF iv = hn::Set(df, inv[t]);
    for (int d = 0; d < D; d += N) {
      const VF v = hn::Mul(SanitizeV(df, hn::LoadU(df, src + t * D + d)), iv);
      const VI c = hn::ConvertTo(di, hn::Round(hn::Min(hn::Max(v, lo), hi)));
      hn::StoreU(hn::DemoteTo(d8, c), d8, reinterpret_cast<int8_t*>(codes + t * D + d));
    }
  }
}

template <class DFT>
void DequantizeInt8(const uint8_t* codes, const uint8_t* meta, int T, int D, float* dst) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  float* s = Scratch(0, static_cast<size_t>(T));
  LoadPlane(meta, T, s);
  for (int t = 0; t < T; ++t) {
    const VF sv = hn::Set(df, s[t]);
    for (int d = 0; d < D; d += N)
      hn::StoreU(hn::Mul(LoadInt8(df, codes + t * D + d), sv), df, dst + t * D + d);
  }
}

template <class DFT>
void DotInt8(const uint8_t* codes, const uint8_t* meta, int T, int D, const float* q,
             float* scores) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  float* s = Scratch(0, static_cast<size_t>(T));
  LoadPlane(meta, T, s);
  for (int t = 0; t < T; ++t) {
    VF acc = hn::Zero(df);
    for (int d = 0; d < D; d += N)
      acc = hn::MulAdd(LoadInt8(df, codes + t * D + d), hn::LoadU(df, q + d), acc);
    scores[t] = hn::GetLane(hn::SumOfLanes(df, acc)) * s[t];
  }
}

template <class DFT>
void AxpyInt8(const uint8_t* codes, const uint8_t* meta, int T, int D, const float* w, float* acc) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  float* s = Scratch(0, static_cast<size_t>(T));
  LoadPlane(meta, T, s);
  for (int t = 0; t < T; ++t) {
    const VF a = hn::Set(df, w[t] * s[t]);
    for (int d = 0; d < D; d += N) {
      hn::StoreU(hn::MulAdd(LoadInt8(df, codes + t * D + d), a, hn::LoadU(df, acc + d)), df,
                 acc + d);
    }
  }
}

#if HQEKV_HW_F16
template <class DFT>
void QuantizeF16(const float* src, size_t n, uint8_t* codes) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::DemoteTo(dh, SanitizeV(df, hn::LoadU(df, src + i))), dh,
               reinterpret_cast<hwy::float16_t*>(codes + 2 * i));
  }
  for (; i < n; ++i) StoreF16(F32ToF16(Sanitize(src[i])), codes + 2 * i);
}

template <class DFT>
void DequantizeF16(const uint8_t* codes, size_t n, float* dst) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(LoadF16V(df, codes + 2 * i), df, dst + i);
  for (; i < n; ++i) dst[i] = F16ToF32(LoadF16(codes + 2 * i));
}
#endif

// ------------------------------------------------------------------- fp8
// Encode: the integer formulation of EncodeFp8 (quant/fp8_ref.cc) per lane;
// decode: bit manipulation giving the table's exact values.

template <class DFT>
void QuantizeFp8(bool e4m3, const float* src, size_t n, uint8_t* codes, uint8_t* meta) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DI di;
  const DU du;
  const size_t N = hn::Lanes(df);
  VF m = hn::Zero(df);
  size_t i = 0;
  for (; i + N <= n; i += N) m = hn::Max(m, hn::Abs(SanitizeV(df, hn::LoadU(df, src + i))));
  float amax = hn::GetLane(hn::MaxOfLanes(df, m));
  for (size_t k = i; k < n; ++k) amax = std::max(amax, std::fabs(Sanitize(src[k])));
  const Fp8Params p = Fp8Constants(e4m3);
  f16_t s16;
  float inv;
  MakeSymScale(amax, p.max_val, &s16, &inv);
  StoreF16(s16, meta);
  const VF iv = hn::Set(df, inv), max_val = hn::Set(df, p.max_val),
           min_normal = hn::Set(df, p.min_normal);
  const VF sub_scale = hn::Set(df, p.sub_scale), magic = hn::Set(df, 0x1p23f);
  const int shift = static_cast<int>(23 - p.m);
  const VU round_bias = hn::Set(du, (1u << (shift - 1)) - 1u), one = hn::Set(du, 1u);
  const VU rebias = hn::Set(du, (127u - p.bias) << p.m), max_code = hn::Set(du, p.max_code);
  const hn::Rebind<uint8_t, DI> d8;
  for (i = 0; i + N <= n; i += N) {
    const VF v = hn::Mul(SanitizeV(df, hn::LoadU(df, src + i)), iv);
    const VU bits = hn::BitCast(du, v);
    const VU sign = hn::And(hn::ShiftRight<24>(bits), hn::Set(du, 0x80u));
    const VU abits = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
    const VF a = hn::BitCast(df, abits);
    const VU sub =
        hn::BitCast(du, hn::ConvertTo(di, hn::Sub(hn::Add(hn::Mul(a, sub_scale), magic), magic)));
    const VU lsb = hn::And(hn::ShiftRightSame(abits, shift), one);
    const VU norm = hn::Min(
        hn::Sub(hn::ShiftRightSame(hn::Add(hn::Add(abits, round_bias), lsb), shift), rebias),
        max_code);
    VU code = hn::IfThenElse(hn::RebindMask(du, hn::Lt(a, min_normal)), sub, norm);
    code = hn::IfThenElse(hn::RebindMask(du, hn::Ge(a, max_val)), max_code, code);
    hn::StoreU(hn::DemoteTo(d8, hn::BitCast(di, hn::Or(code, sign))), d8, codes + i);
  }
  for (; i < n; ++i) codes[i] = EncodeFp8(Sanitize(src[i]) * inv, e4m3);
}

// N fp8 codes -> their exact values (the same numbers as Fp8DecodeTable),
// by bit manipulation: cheaper than a gather. Codes above the largest finite
// one (E4M3 NaN, E5M2 inf/NaN: never emitted) decode to the largest value.
template <class D>
HWY_INLINE hn::Vec<D> LoadFp8(D df, const Fp8Params& p, const uint8_t* ptr) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<uint8_t, decltype(du)> d8;
  const auto c = hn::PromoteTo(du, hn::LoadU(d8, ptr));
  const auto mag = hn::Min(hn::And(c, hn::Set(du, 0x7Fu)), hn::Set(du, p.max_code));
  const auto sign = hn::ShiftLeft<24>(hn::And(c, hn::Set(du, 0x80u)));
  const auto normal = hn::Add(hn::ShiftLeftSame(mag, static_cast<int>(23 - p.m)),
                              hn::Set(du, (127u - p.bias) << 23));
  // Subnormal codes (exponent field 0): mag * 2^(1-bias-m), exact in float.
  const auto sub = hn::Div(hn::ConvertTo(df, hn::BitCast(hn::RebindToSigned<D>(), mag)),
                           hn::Set(df, p.sub_scale));
  const auto is_sub = hn::RebindMask(df, hn::Lt(mag, hn::Set(du, 1u << p.m)));
  const auto v = hn::IfThenElse(is_sub, sub, hn::BitCast(df, normal));
  return hn::BitCast(df, hn::Or(hn::BitCast(du, v), sign));
}

template <class DFT>
void DequantizeFp8(bool e4m3, const uint8_t* codes, const uint8_t* meta, size_t n, float* dst) {
  const DFT df;
  const size_t N = hn::Lanes(df);
  const float* table = Fp8DecodeTable(e4m3);
  const Fp8Params p = Fp8Constants(e4m3);
  const float s = F16ToF32(LoadF16(meta));
  const auto sv = hn::Set(df, s);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(LoadFp8(df, p, codes + i), sv), df, dst + i);
  for (; i < n; ++i) dst[i] = table[codes[i]] * s;
}

template <class DFT>
void DotFp8(bool e4m3, const uint8_t* codes, const uint8_t* meta, int T, int D, const float* q,
            float* scores) {
  const DFT df;
  const int N = static_cast<int>(hn::Lanes(df));
  const Fp8Params p = Fp8Constants(e4m3);
  const float s = F16ToF32(LoadF16(meta));
  for (int t = 0; t < T; ++t) {
    auto acc = hn::Zero(df);
    for (int d = 0; d < D; d += N)
      acc = hn::MulAdd(LoadFp8(df, p, codes + t * D + d), hn::LoadU(df, q + d), acc);
    scores[t] = hn::GetLane(hn::SumOfLanes(df, acc)) * s;
  }
}

template <class DFT>
void AxpyFp8(bool e4m3, const uint8_t* codes, const uint8_t* meta, int T, int D, const float* w,
             float* acc) {
  const DFT df;
  const int N = static_cast<int>(hn::Lanes(df));
  const Fp8Params p = Fp8Constants(e4m3);
  const float s = F16ToF32(LoadF16(meta));
  for (int t = 0; t < T; ++t) {
    const auto a = hn::Set(df, w[t] * s);
    for (int d = 0; d < D; d += N) {
      hn::StoreU(hn::MulAdd(LoadFp8(df, p, codes + t * D + d), a, hn::LoadU(df, acc + d)), df,
                 acc + d);
    }
  }
}

// -------------------------------------------------------------- Hadamard
// The butterflies of HadamardRotate (quant/hadamard.cc) on each of T rows:
// the same additions in the same pairs, so results are bit-identical. Spans
// h >= N pair whole vectors; h < N pair lanes inside a vector (partner via a
// lane swap; the lane's sign picks a + b or partner - self).

bool HadamardRowsImpl(float* x, int T, int D) {
#if HWY_TARGET == HWY_SCALAR
  return false;
#else
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  if (N != 4 && N != 8) return false;
  if (D < N || (D & (D - 1)) != 0) return false;
  alignas(32) float sg[3][8];
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < 8; ++i) sg[k][i] = (i >> k) & 1 ? -1.0f : 1.0f;
  }
  const VF s1 = hn::LoadU(df, sg[0]), s2 = hn::LoadU(df, sg[1]), s4 = hn::LoadU(df, sg[2]);
  const VF norm = hn::Set(df, 1.0f / std::sqrt(static_cast<float>(D)));
  for (int t = 0; t < T; ++t) {
    float* r = x + static_cast<size_t>(t) * D;
    for (int i = 0; i < D; i += N) {
      VF v = hn::LoadU(df, r + i);
      v = hn::MulAdd(v, s1, hn::Shuffle2301(v));                          // h = 1
      v = hn::MulAdd(v, s2, hn::Shuffle1032(v));                          // h = 2
      if (N == 8) v = hn::MulAdd(v, s4, hn::ConcatLowerUpper(df, v, v));  // h = 4
      hn::StoreU(v, df, r + i);
    }
    for (int h = N; h < D; h <<= 1) {
      for (int i = 0; i < D; i += 2 * h) {
        for (int j = i; j < i + h; j += N) {
          const VF a = hn::LoadU(df, r + j), b = hn::LoadU(df, r + j + h);
          hn::StoreU(hn::Add(a, b), df, r + j);
          hn::StoreU(hn::Sub(a, b), df, r + j + h);
        }
      }
    }
    for (int i = 0; i < D; i += N) hn::StoreU(hn::Mul(hn::LoadU(df, r + i), norm), df, r + i);
  }
  return true;
#endif
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace hqekv::quant
HWY_AFTER_NAMESPACE();

#endif  // HQEKV_QUANT_SIMD_ROWS_INL_H_ toggle
