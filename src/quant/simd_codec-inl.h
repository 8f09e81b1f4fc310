// Pieces every codec family of quant/simd.cc uses: the full-width tag DW,
// bit packing into dense code streams, vector fp16 rounding of the metadata
// planes (uniform, symmetric and normal parameters), and the uniform / normal
// code of a vector of values.
//
// Part of quant/simd.cc's translation unit only (included there once per
// SIMD target, under its no-contraction pragma, quant/no_contract.h): the
// gemma.cpp "-inl.h" style, the toggle guard below admits one inclusion per
// target.

#if defined(HQEKV_QUANT_SIMD_CODEC_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HQEKV_QUANT_SIMD_CODEC_INL_H_
#undef HQEKV_QUANT_SIMD_CODEC_INL_H_
#else
#define HQEKV_QUANT_SIMD_CODEC_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <hwy/highway.h>

#include "quant/internal.h"
#include "quant/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::quant {
namespace HWY_NAMESPACE {
namespace {  // internal linkage, as quant/simd-inl.h

using DW = hn::ScalableTag<float>;    // lanes-over-channels and contiguous paths: full width
using DFC = hn::CappedTag<float, 8>;  // 8 partial sums of per-token normal statistics

// Appends groups of N codes (N*bits <= 32 bits each) to a dense LSB-first stream.
class BitWriter {
 public:
  explicit BitWriter(uint8_t* out) : out_(out) {}
  HWY_INLINE void Put(uint32_t bits, int n) {
    acc_ |= static_cast<uint64_t>(bits) << nbits_;
    nbits_ += n;
    if (nbits_ >= 32) {
      const uint32_t w = static_cast<uint32_t>(acc_);
      std::memcpy(out_, &w, 4);
      out_ += 4;
      acc_ >>= 32;
      nbits_ -= 32;
    }
  }
  void Flush() {
    for (; nbits_ > 0; nbits_ -= 8, acc_ >>= 8) *out_++ = static_cast<uint8_t>(acc_);
  }

 private:
  uint8_t* out_;
  uint64_t acc_ = 0;
  int nbits_ = 0;
};

// Packs n code bytes (< 2^bits, bits in {2, 4}) into the dense stream, many
// codes per instruction: 4-bit pairs in u16 lanes, 2-bit quads in u32 lanes.
void PackStream(const uint8_t* codes, size_t n, int bits, uint8_t* out) {
  size_t i = 0;
  if (bits == 4) {
    const hn::ScalableTag<uint16_t> d16;
    const hn::RebindToSigned<decltype(d16)> di16;
    const hn::Rebind<uint8_t, decltype(d16)> d8;
    const size_t per = 2 * hn::Lanes(d16);  // codes per iteration
    const auto low = hn::Set(d16, 0xFF);
    for (; i + per <= n; i += per) {
      const auto v = hn::LoadU(d16, reinterpret_cast<const uint16_t*>(codes + i));
      const auto b = hn::And(hn::Or(v, hn::ShiftRight<4>(v)), low);  // c0 | c1 << 4
      hn::StoreU(hn::DemoteTo(d8, hn::BitCast(di16, b)), d8, out + i / 2);
    }
  } else {
    const hn::ScalableTag<uint32_t> d32;
    const hn::RebindToSigned<decltype(d32)> di32;
    const hn::Rebind<uint8_t, decltype(d32)> d8;
    const size_t per = 4 * hn::Lanes(d32);
    const auto low = hn::Set(d32, 0xFF);
    for (; i + per <= n; i += per) {
      const auto v = hn::LoadU(d32, reinterpret_cast<const uint32_t*>(codes + i));
      const auto b = hn::And(hn::Or(hn::Or(v, hn::ShiftRight<6>(v)),
                                    hn::Or(hn::ShiftRight<12>(v), hn::ShiftRight<18>(v))),
                             low);  // c0 | c1 << 2 | c2 << 4 | c3 << 6
      hn::StoreU(hn::DemoteTo(d8, hn::BitCast(di32, b)), d8, out + i * 2 / 8);
    }
  }
  PackCodes(codes + i, n - i, bits, out + i * static_cast<size_t>(bits) / 8);
}

// Codes (one per i32 lane, < 2^bits) -> N*bits packed bits.
template <class DUT>
HWY_INLINE uint32_t JoinCodes(DUT du, hn::Vec<hn::RebindToSigned<DUT>> codes, hn::Vec<DUT> shifts) {
  return hn::GetLane(hn::SumOfLanes(du, hn::BitCast(du, codes) << shifts));
}

// ---------------------------------------------------------------- fp16 planes

#if HQEKV_HW_F16
HWY_INLINE VF RoundF16V(DF df, VF v, uint8_t* store_to) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  const auto h = hn::DemoteTo(dh, v);
  if (store_to != nullptr) hn::StoreU(h, dh, reinterpret_cast<hwy::float16_t*>(store_to));
  return hn::PromoteTo(df, h);
}

// Vector form of ScaleF16: s <= 0 -> 0; a positive s that underflows fp16
// becomes the smallest subnormal 2^-24; clamped to the fp16 range.
HWY_INLINE VF ScaleF16V(DF df, VF s, uint8_t* store_to) {
  const VF zero = hn::Zero(df);
  VF c = hn::Min(hn::Max(s, zero), hn::Set(df, kF16Max));
  const VF r = RoundF16V(df, c, nullptr);
  c = hn::IfThenElse(hn::And(hn::Eq(r, zero), hn::Gt(s, zero)), hn::Set(df, 0x1p-24f), c);
  return RoundF16V(df, c, store_to);
}

// Vector form of SymScaleF16: the fp16 value of min(s, 65504) rounded up.
HWY_INLINE VF SymScaleF16V(DF df, VF s, uint8_t* store_to) {
  const DU du;
  const VF c = hn::Min(hn::Max(s, hn::Zero(df)), hn::Set(df, kF16Max));
  const VF r = RoundF16V(df, c, nullptr);
  // Spacing of fp16 values just above r: 2^-24 below 2^-14, else 2^(e-10).
  const VU exp_bits = hn::And(hn::BitCast(du, r), hn::Set(du, 0x7F800000u));
  const VF ulp = hn::IfThenElse(hn::Lt(r, hn::Set(df, 0x1p-14f)), hn::Set(df, 0x1p-24f),
                                hn::BitCast(df, hn::Sub(exp_bits, hn::Set(du, 10u << 23))));
  return RoundF16V(df, hn::IfThenElse(hn::Lt(r, c), hn::Add(r, ulp), r), store_to);
}
#endif

// Uniform parameters of n groups from their sanitized minima / maxima:
// writes the fp16 scale plane and minimum plane and the float scale, minimum
// and reciprocal of every group. Same arithmetic as MakeUniformParams.
void UniformParamsBatch(const float* mn, const float* mx, int n, int bits, uint8_t* scale_plane,
                        uint8_t* min_plane, float* sc, float* mi, float* inv) {
  int i = 0;
#if HQEKV_HW_F16
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  const VF levels = hn::Set(df, static_cast<float>((1 << bits) - 1));
  for (; i + N <= n; i += N) {
    const VF m = RoundF16V(df, hn::LoadU(df, mn + i), min_plane + 2 * i);
    const VF s =
        ScaleF16V(df, hn::Div(hn::Sub(hn::LoadU(df, mx + i), m), levels), scale_plane + 2 * i);
    hn::StoreU(m, df, mi + i);
    hn::StoreU(s, df, sc + i);
    hn::StoreU(hn::IfThenElseZero(hn::Gt(s, hn::Zero(df)), hn::Div(hn::Set(df, 1.0f), s)), df,
               inv + i);
  }
#endif
  for (; i < n; ++i) {
    const UniformParams p = MakeUniformParams(mn[i], mx[i], bits);
    StoreF16(p.scale16, scale_plane + 2 * i);
    StoreF16(p.min16, min_plane + 2 * i);
    sc[i] = p.scale;
    mi[i] = p.min;
    inv[i] = p.inv;
  }
}

// Symmetric scales (int8) of n rows from their max |x|: fp16 plane + reciprocals.
void SymParamsBatch(const float* amax, int n, float qmax, uint8_t* plane, float* inv) {
  int i = 0;
#if HQEKV_HW_F16
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  for (; i + N <= n; i += N) {
    const VF s =
        SymScaleF16V(df, hn::Div(hn::LoadU(df, amax + i), hn::Set(df, qmax)), plane + 2 * i);
    hn::StoreU(hn::IfThenElseZero(hn::Gt(s, hn::Zero(df)), hn::Div(hn::Set(df, 1.0f), s)), df,
               inv + i);
  }
#endif
  for (; i < n; ++i) {
    f16_t s16;
    MakeSymScale(amax[i], qmax, &s16, &inv[i]);
    StoreF16(s16, plane + 2 * i);
  }
}

// Normal parameters of n groups from float mean / std: fp16 std and mean
// planes, and the interior thresholds thr[g * 3 + j] in the value domain.
void NormalParamsBatch(const float* mean, const float* sd, int n, int bits, uint8_t* sd_plane,
                       uint8_t* mean_plane, float* thr) {
  float* m = Scratch(4, static_cast<size_t>(n));
  float* s = Scratch(5, static_cast<size_t>(n));
  int i = 0;
#if HQEKV_HW_F16
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  const VF lim = hn::Set(df, kF16Max);
  for (; i + N <= n; i += N) {
    const VF mv = hn::Min(hn::Max(hn::LoadU(df, mean + i), hn::Neg(lim)), lim);
    hn::StoreU(RoundF16V(df, mv, mean_plane + 2 * i), df, m + i);
    const VF sv = hn::Min(hn::LoadU(df, sd + i), lim);
    hn::StoreU(RoundF16V(df, sv, sd_plane + 2 * i), df, s + i);
  }
#endif
  for (; i < n; ++i) {
    const f16_t m16 = MetaF16(mean[i]), s16 = MetaF16(sd[i]);
    StoreF16(m16, mean_plane + 2 * i);
    StoreF16(s16, sd_plane + 2 * i);
    m[i] = F16ToF32(m16);
    s[i] = F16ToF32(s16);
  }
  const int nthr = (1 << bits) - 1;
  const float* u = NormalThresholds(bits);
  for (int g = 0; g < n; ++g) {
    for (int j = 0; j < nthr; ++j) thr[3 * g + j] = NormalThreshold(m[g], s[g], u[j]);
  }
}

// Uniform code of sanitized values: round_half_even(clamp((x - m) * inv, 0, top)).
template <class D, class VF = hn::Vec<D>>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> UniformCode(D df, hn::RebindToSigned<D> di, VF x, VF m,
                                                      VF inv, VF top) {
  const VF v = hn::Mul(hn::Sub(x, m), inv);
  return hn::ConvertTo(di, hn::Round(hn::Min(hn::Max(v, hn::Zero(df)), top)));
}

// Normal code: number of thresholds strictly below x (nthr in {1, 3}).
template <class D, class VF = hn::Vec<D>>
HWY_INLINE hn::Vec<hn::RebindToSigned<D>> NormalCode(D df, hn::RebindToSigned<D> di, VF x,
                                                     const VF* thr, int nthr) {
  auto c = hn::Zero(di);
  for (int j = 0; j < nthr; ++j) {
    c = hn::Sub(c, hn::BitCast(di, hn::VecFromMask(df, hn::Gt(x, thr[j]))));
  }
  return c;
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace hqekv::quant
HWY_AFTER_NAMESPACE();

#endif  // HQEKV_QUANT_SIMD_CODEC_INL_H_ toggle
