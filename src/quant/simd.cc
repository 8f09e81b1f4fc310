// Highway kernels of the chunk entry points, compiled once per SIMD target
// (foreach_target.h) and chosen at run time (HWY_DYNAMIC_DISPATCH). Every
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
#include "quant/no_contract.h"  // first: see there

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "quant/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/simd.cc"
#include <hwy/foreach_target.h>  // NOLINT: re-includes this file once per target
#include <hwy/highway.h>

#include "quant/internal.h"
#include "quant/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::quant {
namespace HWY_NAMESPACE {
namespace {  // kernels private to this file (shared helpers, hn: quant/simd-inl.h)

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

// ------------------------------------------------- per-token uniform / normal

template <class DFT>
void QuantizePerToken(const Format& f, const float* src, int T, int D, uint8_t* codes,
                      uint8_t* meta) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DI di;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int g = f.group, groups = T * (D / g), bits = f.bits;
  const bool normal = f.kind == Kind::kNormal;
  float* p0 = Scratch(0, static_cast<size_t>(groups));
  float* p1 = Scratch(1, static_cast<size_t>(groups));
  float* sc = Scratch(2, static_cast<size_t>(groups) * 3);
  float* mi = Scratch(3, static_cast<size_t>(groups));
  float* inv = normal ? nullptr : sc + groups;
  // Pass 1: group statistics. A group is g consecutive values (groups are
  // contiguous in token-major order).
  int k_done = 0;
  if (normal && g % 8 == 0 && hn::Lanes(DFC()) >= 4) {
    // 8 interleaved partial sums per group in (8 / NC) capped vectors, then
    // the same pairwise combination as ref::NormalStats: bit-identical.
    const DFC dc;
    const int NC = static_cast<int>(hn::Lanes(dc)), A = 8 / NC;
    alignas(32) float p[8];
    for (; k_done < groups; ++k_done) {
      const float* x = src + static_cast<size_t>(k_done) * g;
      hn::Vec<DFC> acc[2] = {hn::Zero(dc), hn::Zero(dc)};
      for (int i = 0; i < g; i += 8) {
        for (int a = 0; a < A; ++a)
          acc[a] = hn::Add(acc[a], SanitizeV(dc, hn::LoadU(dc, x + i + a * NC)));
      }
      for (int a = 0; a < A; ++a) hn::StoreU(acc[a], dc, p + a * NC);
      const float mu = (((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))) /
                       static_cast<float>(g);
      const hn::Vec<DFC> mv = hn::Set(dc, mu);
      acc[0] = acc[1] = hn::Zero(dc);
      for (int i = 0; i < g; i += 8) {
        for (int a = 0; a < A; ++a) {
          const hn::Vec<DFC> dv = hn::Sub(SanitizeV(dc, hn::LoadU(dc, x + i + a * NC)), mv);
          acc[a] = hn::Add(acc[a], hn::Mul(dv, dv));
        }
      }
      for (int a = 0; a < A; ++a) hn::StoreU(acc[a], dc, p + a * NC);
      const float ss = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
      p0[k_done] = mu;
      p1[k_done] = g > 1 ? std::sqrt(ss / static_cast<float>(g - 1)) : 0.0f;
    }
  }
  for (int k = k_done; k < groups; ++k) {
    const float* x = src + static_cast<size_t>(k) * g;
    if (normal) {
      ref::NormalStats(x, g, 1, &p0[k], &p1[k]);  // remaining groups: the reference itself
      continue;
    }
    VF lo = SanitizeV(df, hn::LoadU(df, x)), hi = lo;
    for (int j = N; j < g; j += N) {
      const VF v = SanitizeV(df, hn::LoadU(df, x + j));
      lo = hn::Min(lo, v);
      hi = hn::Max(hi, v);
    }
    p0[k] = hn::GetLane(hn::MinOfLanes(df, lo));
    p1[k] = hn::GetLane(hn::MaxOfLanes(df, hi));
  }
  // Pass 2: metadata (plane 0 = scale / std, plane 1 = minimum / mean).
  uint8_t* plane0 = meta;
  uint8_t* plane1 = meta + 2 * static_cast<size_t>(groups);
  if (normal) {
    NormalParamsBatch(p0, p1, groups, bits, plane0, plane1, sc);
  } else {
    UniformParamsBatch(p0, p1, groups, bits, plane0, plane1, p0 /*scales, unused*/, mi, inv);
  }
  // Pass 3: codes, appended to one dense stream.
  const VU shifts = LaneShifts(du, bits);
  const VF top = hn::Set(df, static_cast<float>((1 << bits) - 1));
  const int nthr = (1 << bits) - 1;
  // 2 and 4 bits: code bytes first, then one vectorized packing pass; 8 bits:
  // the bytes are the codes; 1 bit: N codes -> one lane-sum -> bit writer.
  const bool bytes_first = bits == 2 || bits == 4;
  uint8_t* tmp =
      bytes_first ? reinterpret_cast<uint8_t*>(Scratch(4, NumCodes(T, D) / 4 + 1)) : nullptr;
  BitWriter bw(codes);
  uint8_t* out8 = bytes_first ? tmp : codes;
  const hn::Rebind<uint8_t, DI> d8;
  for (int k = 0; k < groups; ++k) {
    const float* x = src + static_cast<size_t>(k) * g;
    VF thr[3], m, iv;
    if (normal) {
      for (int j = 0; j < nthr; ++j) thr[j] = hn::Set(df, sc[3 * k + j]);
    } else {
      m = hn::Set(df, mi[k]);
      iv = hn::Set(df, inv[k]);
    }
    for (int j = 0; j < g; j += N) {
      const VF v = SanitizeV(df, hn::LoadU(df, x + j));
      const VI c = normal ? NormalCode(df, di, v, thr, nthr) : UniformCode(df, di, v, m, iv, top);
      if (bits == 1) {
        bw.Put(JoinCodes(du, c, shifts), N * bits);
      } else {
        hn::StoreU(hn::DemoteTo(d8, c), d8, out8);
        out8 += N;
      }
    }
  }
  if (bits == 1) bw.Flush();
  if (bytes_first) PackStream(tmp, NumCodes(T, D), bits, codes);
}

void DequantizePerToken(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                        float* dst) {
  const DF df;
  const DI di;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int g = f.group, groups = T * (D / g), bits = f.bits;
  float* a = Scratch(0, static_cast<size_t>(groups));
  float* b = Scratch(1, static_cast<size_t>(groups));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, groups, a, b);
  const Levels<DF> lv(f);
  const VU shifts = LaneShifts(du, bits), mask = hn::Set(du, (1u << bits) - 1u);
  const size_t nbytes = CodeBytes(f, T, D);
  const hn::Rebind<uint8_t, DI> d8;
  size_t pos = 0;  // code index
  for (int k = 0; k < groups; ++k) {
    const VF av = hn::Set(df, a[k]), bv = hn::Set(df, b[k]);
    for (int j = 0; j < g; j += N, pos += N) {
      const VI c = bits == 8 ? hn::PromoteTo(di, hn::LoadU(d8, codes + pos))
                             : FetchCodes(du, codes, nbytes, pos, bits, N, shifts, mask);
      hn::StoreU(hn::MulAdd(lv(c), av, bv), df, dst + pos);
    }
  }
}

void DotPerToken(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                 const float* q, float* scores) {
  const DF df;
  const DI di;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int g = f.group, gpt = D / g, groups = T * gpt, bits = f.bits;
  float* a = Scratch(0, static_cast<size_t>(groups));
  float* b = Scratch(1, static_cast<size_t>(groups));
  float* qsum = Scratch(2, static_cast<size_t>(gpt));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, groups, a, b);
  for (int k = 0; k < gpt; ++k) {
    VF s = hn::Zero(df);
    for (int j = 0; j < g; j += N) s = hn::Add(s, hn::LoadU(df, q + k * g + j));
    qsum[k] = hn::GetLane(hn::SumOfLanes(df, s));
  }
  const Levels<DF> lv(f);
  const VU shifts = LaneShifts(du, bits), mask = hn::Set(du, (1u << bits) - 1u);
  const size_t nbytes = CodeBytes(f, T, D);
  const hn::Rebind<uint8_t, DI> d8;
  size_t pos = 0;
  for (int t = 0; t < T; ++t) {
    VF acc = hn::Zero(df);
    float off = 0.0f;
    for (int k = 0; k < gpt; ++k) {
      const int gi = t * gpt + k;
      const VF av = hn::Set(df, a[gi]);
      off += b[gi] * qsum[k];
      for (int j = 0; j < g; j += N, pos += N) {
        const VI c = bits == 8 ? hn::PromoteTo(di, hn::LoadU(d8, codes + pos))
                               : FetchCodes(du, codes, nbytes, pos, bits, N, shifts, mask);
        acc = hn::MulAdd(hn::Mul(lv(c), av), hn::LoadU(df, q + k * g + j), acc);
      }
    }
    scores[t] = hn::GetLane(hn::SumOfLanes(df, acc)) + off;
  }
}

void AxpyPerToken(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                  const float* w, float* acc) {
  const DF df;
  const DI di;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int g = f.group, gpt = D / g, groups = T * gpt, bits = f.bits;
  float* a = Scratch(0, static_cast<size_t>(groups));
  float* b = Scratch(1, static_cast<size_t>(groups));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, groups, a, b);
  const Levels<DF> lv(f);
  const VU shifts = LaneShifts(du, bits), mask = hn::Set(du, (1u << bits) - 1u);
  const size_t nbytes = CodeBytes(f, T, D);
  const hn::Rebind<uint8_t, DI> d8;
  size_t pos = 0;
  for (int t = 0; t < T; ++t) {
    for (int k = 0; k < gpt; ++k) {
      const int gi = t * gpt + k;
      const VF av = hn::Set(df, w[t] * a[gi]), bv = hn::Set(df, w[t] * b[gi]);
      for (int j = 0; j < g; j += N, pos += N) {
        const VI c = bits == 8 ? hn::PromoteTo(di, hn::LoadU(d8, codes + pos))
                               : FetchCodes(du, codes, nbytes, pos, bits, N, shifts, mask);
        float* o = acc + k * g + j;
        hn::StoreU(hn::Add(hn::MulAdd(lv(c), av, hn::LoadU(df, o)), bv), df, o);
      }
    }
  }
}

// ----------------------------------------------- per-channel uniform / normal
// Channel d's 32 codes are b little-endian 32-bit words at byte 4*b*d; token t
// sits in word (t*b)/32 at bit (t*b)%32. Lanes run over channels, so a vector
// of word w of N channels is a strided (interleaved) load of the words.

template <class DUT, class VU = hn::Vec<DUT>>
HWY_INLINE void StoreWords(DUT du, const VU* words, int nw, uint8_t* out) {
  uint32_t* o = reinterpret_cast<uint32_t*>(out);
  if (nw == 1) {
    hn::StoreU(words[0], du, o);
  } else if (nw == 2) {
    hn::StoreInterleaved2(words[0], words[1], du, o);
  } else {
    hn::StoreInterleaved4(words[0], words[1], words[2], words[3], du, o);
  }
}

template <class DFT>
void QuantizePerChannel(const Format& f, const float* src, int T, int D, uint8_t* codes,
                        uint8_t* meta) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DI di;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int bits = f.bits, per_word = 32 / bits;
  const bool normal = f.kind == Kind::kNormal;
  float* p0 = Scratch(0, static_cast<size_t>(D));
  float* p1 = Scratch(1, static_cast<size_t>(D));
  float* sc = Scratch(2, static_cast<size_t>(D) * 3);
  float* mi = Scratch(3, static_cast<size_t>(D));
  float* inv = normal ? nullptr : sc + D;
  // Pass 1: per-channel statistics, accumulated over tokens in order (the
  // reference's order: identical float results).
  for (int d0 = 0; d0 < D; d0 += N) {
    if (normal) {
      VF sum = hn::Zero(df);
      for (int t = 0; t < T; ++t)
        sum = hn::Add(sum, SanitizeV(df, hn::LoadU(df, src + t * D + d0)));
      const VF mean = hn::Div(sum, hn::Set(df, static_cast<float>(T)));
      VF ss = hn::Zero(df);
      for (int t = 0; t < T; ++t) {
        const VF dv = hn::Sub(SanitizeV(df, hn::LoadU(df, src + t * D + d0)), mean);
        ss = hn::Add(ss, hn::Mul(dv, dv));
      }
      hn::StoreU(mean, df, p0 + d0);
      hn::StoreU(hn::Sqrt(hn::Div(ss, hn::Set(df, static_cast<float>(T - 1)))), df, p1 + d0);
    } else {
      VF lo = SanitizeV(df, hn::LoadU(df, src + d0)), hi = lo;
      for (int t = 1; t < T; ++t) {
        const VF v = SanitizeV(df, hn::LoadU(df, src + t * D + d0));
        lo = hn::Min(lo, v);
        hi = hn::Max(hi, v);
      }
      hn::StoreU(lo, df, p0 + d0);
      hn::StoreU(hi, df, p1 + d0);
    }
  }
  uint8_t* plane0 = meta;
  uint8_t* plane1 = meta + 2 * static_cast<size_t>(D);
  if (normal) {
    NormalParamsBatch(p0, p1, D, bits, plane0, plane1, sc);
  } else {
    UniformParamsBatch(p0, p1, D, bits, plane0, plane1, p0, mi, inv);
  }
  // Pass 2: codes, N channels at a time, one 32-bit word per channel and word index.
  const VF top = hn::Set(df, static_cast<float>((1 << bits) - 1));
  const int nthr = (1 << bits) - 1;
  float* thr_t = Scratch(4, static_cast<size_t>(3) * N);
  for (int d0 = 0; d0 < D; d0 += N) {
    VF thr[3], m, iv;
    if (normal) {
      for (int j = 0; j < nthr; ++j) {
        for (int i = 0; i < N; ++i) thr_t[j * N + i] = sc[3 * (d0 + i) + j];
        thr[j] = hn::LoadU(df, thr_t + j * N);
      }
    } else {
      m = hn::LoadU(df, mi + d0);
      iv = hn::LoadU(df, inv + d0);
    }
    VU words[4];
    for (int w = 0; w < bits; ++w) {
      VU word = hn::Zero(du);
      for (int k = 0; k < per_word; ++k) {
        const int t = w * per_word + k;
        const VF v = SanitizeV(df, hn::LoadU(df, src + t * D + d0));
        const VI c = normal ? NormalCode(df, di, v, thr, nthr) : UniformCode(df, di, v, m, iv, top);
        word = hn::Or(word, hn::ShiftLeftSame(hn::BitCast(du, c), k * bits));
      }
      words[w] = word;
    }
    StoreWords(du, words, bits, codes + static_cast<size_t>(4) * bits * d0);
  }
}

template <class DFT>
void DequantizePerChannel(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                          float* dst) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int bits = f.bits, per_word = 32 / bits;
  float* a = Scratch(0, static_cast<size_t>(D));
  float* b = Scratch(1, static_cast<size_t>(D));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, D, a, b);
  const Levels<DF> lv(f);
  const VU mask = hn::Set(du, (1u << bits) - 1u);
  for (int d0 = 0; d0 < D; d0 += N) {
    VU words[4];
    LoadWords(du, codes + static_cast<size_t>(4) * bits * d0, bits, words);
    const VF av = hn::LoadU(df, a + d0), bv = hn::LoadU(df, b + d0);
    float* out = dst + d0;
    for (int w = 0; w < bits; ++w) {  // token t = w * per_word + k (no division in the loop)
      for (int k = 0; k < per_word; ++k, out += D) {
        const VU c = hn::And(hn::ShiftRightSame(words[w], k * bits), mask);
        const VF lvl = lv(hn::BitCast(DI(), c));
        hn::StoreU(hn::MulAdd(lvl, av, bv), df, out);
      }
    }
  }
}

// scores[t] = sum_d (q_d a_d) level[d][t] + sum_d q_d b_d, lanes over tokens:
// N tokens' codes of one channel are N*b <= 32 consecutive bits of one word.
void DotPerChannel(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   const float* q, float* scores) {
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int bits = f.bits, nvec = T / N;
  float* a = Scratch(0, static_cast<size_t>(D));
  float* b = Scratch(1, static_cast<size_t>(D));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, D, a, b);
  const Levels<DF> lv(f);
  const VU shifts = LaneShifts(du, bits), mask = hn::Set(du, (1u << bits) - 1u);
  VF acc[8];
  for (int v = 0; v < nvec; ++v) acc[v] = hn::Zero(df);
  VF offv = hn::Zero(df);
  for (int d0 = 0; d0 < D; d0 += N) {
    offv = hn::MulAdd(hn::LoadU(df, q + d0), hn::LoadU(df, b + d0), offv);
  }
  for (int d = 0; d < D; ++d) {
    const uint8_t* cw = codes + static_cast<size_t>(4) * bits * d;
    const VF qa = hn::Set(df, q[d] * a[d]);
    for (int v = 0; v < nvec; ++v) {
      const int bit = v * N * bits;
      const uint32_t word = Load32(cw + 4 * (bit >> 5)) >> (bit & 31);
      const VI c = SplitCodes(du, word, shifts, mask);
      acc[v] = hn::MulAdd(lv(c), qa, acc[v]);
    }
  }
  const VF off = hn::SumOfLanes(df, offv);
  for (int v = 0; v < nvec; ++v) hn::StoreU(hn::Add(acc[v], off), df, scores + v * N);
}

template <class DFT>
void AxpyPerChannel(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    const float* w, float* acc) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int bits = f.bits, per_word = 32 / bits;
  float* a = Scratch(0, static_cast<size_t>(D));
  float* b = Scratch(1, static_cast<size_t>(D));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, D, a, b);
  const Levels<DF> lv(f);
  const VU mask = hn::Set(du, (1u << bits) - 1u);
  float wsum = 0.0f;
  for (int t = 0; t < T; ++t) wsum += w[t];
  const VF wsv = hn::Set(df, wsum);
  for (int d0 = 0; d0 < D; d0 += N) {
    VU words[4];
    LoadWords(du, codes + static_cast<size_t>(4) * bits * d0, bits, words);
    VF sum = hn::Zero(df);
    for (int wi = 0; wi < bits; ++wi) {
      for (int k = 0; k < per_word; ++k) {
        const VU c = hn::And(hn::ShiftRightSame(words[wi], k * bits), mask);
        const VF wt = hn::Set(df, w[wi * per_word + k]);
        sum = hn::MulAdd(lv(hn::BitCast(DI(), c)), wt, sum);
      }
    }
    const VF o = hn::LoadU(df, acc + d0);
    hn::StoreU(hn::MulAdd(hn::LoadU(df, a + d0), sum, hn::MulAdd(hn::LoadU(df, b + d0), wsv, o)),
               df, acc + d0);
  }
}

// ------------------------------------------------------------- uniform 3-bit
// kUniform3 (quant/uniform3_ref.cc): the uniform quantizer with 7 steps, codes
// split in a 2-bit plane of the low bits (byte 0) and a 1-bit plane of the
// high bit (byte Split3LowBytes(T*D)), both in the grouping's code order. Per
// channel with T = 32, channel d's codes are two 32-bit words at byte 8d of
// the low plane and one word at byte 4d of the high plane.

// Code order of the chunk -> the two planes (PackStream for the low plane).
void PackSplit3(const uint8_t* c, size_t n, uint8_t* codes) {
  uint8_t* lo = reinterpret_cast<uint8_t*>(Scratch(5, n / 4 + 1));
  const hn::ScalableTag<uint8_t> d8;
  const size_t L = hn::Lanes(d8);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::And(hn::LoadU(d8, c + i), hn::Set(d8, 3)), d8, lo + i);
  for (; i < n; ++i) lo[i] = c[i] & 3u;
  PackStream(lo, n, 2, codes);
  uint8_t* hi = codes + Split3LowBytes(n);
  std::memset(hi, 0, (n + 7) / 8);
  for (i = 0; i < n; ++i) hi[i >> 3] |= static_cast<uint8_t>((c[i] >> 2) << (i & 7));
}

// Codes of a chunk in code order, one byte each, and the metadata planes.
template <class DFT>
void QuantizeUniform3Codes(const Format& f, const float* src, int T, int D, uint8_t* c,
                           uint8_t* meta) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DI di;
  const int N = static_cast<int>(hn::Lanes(df));
  const bool chan = f.grouping == Grouping::kPerChannel;
  const int groups = NumGroups(f, T, D);
  float* mn = Scratch(0, static_cast<size_t>(groups));
  float* mx = Scratch(1, static_cast<size_t>(groups));
  float* sc = Scratch(2, static_cast<size_t>(groups) * 2);
  float* mi = Scratch(3, static_cast<size_t>(groups));
  float* inv = sc + groups;
  if (chan) {  // lanes over channels, min / max over tokens in order
    for (int d0 = 0; d0 < D; d0 += N) {
      VF lo = SanitizeV(df, hn::LoadU(df, src + d0)), hi = lo;
      for (int t = 1; t < T; ++t) {
        const VF v = SanitizeV(df, hn::LoadU(df, src + static_cast<size_t>(t) * D + d0));
        lo = hn::Min(lo, v);
        hi = hn::Max(hi, v);
      }
      hn::StoreU(lo, df, mn + d0);
      hn::StoreU(hi, df, mx + d0);
    }
  } else {  // contiguous groups of g values
    const int g = f.group;
    for (int k = 0; k < groups; ++k) {
      const float* x = src + static_cast<size_t>(k) * g;
      VF lo = SanitizeV(df, hn::LoadU(df, x)), hi = lo;
      for (int j = N; j < g; j += N) {
        const VF v = SanitizeV(df, hn::LoadU(df, x + j));
        lo = hn::Min(lo, v);
        hi = hn::Max(hi, v);
      }
      mn[k] = hn::GetLane(hn::MinOfLanes(df, lo));
      mx[k] = hn::GetLane(hn::MaxOfLanes(df, hi));
    }
  }
  UniformParamsBatch(mn, mx, groups, 3, meta, meta + 2 * static_cast<size_t>(groups), sc, mi, inv);
  const VF top = hn::Set(df, 7.0f);
  const hn::Rebind<uint8_t, DI> d8;
  if (chan) {
    alignas(64) uint8_t lane[64];
    for (int d0 = 0; d0 < D; d0 += N) {
      const VF m = hn::LoadU(df, mi + d0), iv = hn::LoadU(df, inv + d0);
      for (int t = 0; t < T; ++t) {
        const VF v = SanitizeV(df, hn::LoadU(df, src + static_cast<size_t>(t) * D + d0));
        hn::StoreU(hn::DemoteTo(d8, UniformCode(df, di, v, m, iv, top)), d8, lane);
        for (int i = 0; i < N; ++i) c[static_cast<size_t>(d0 + i) * T + t] = lane[i];
      }
    }
  } else {
    const int g = f.group;
    for (int k = 0; k < groups; ++k) {
      const size_t off = static_cast<size_t>(k) * g;
      const VF m = hn::Set(df, mi[k]), iv = hn::Set(df, inv[k]);
      for (int j = 0; j < g; j += N) {
        const VF v = SanitizeV(df, hn::LoadU(df, src + off + j));
        hn::StoreU(hn::DemoteTo(d8, UniformCode(df, di, v, m, iv, top)), d8, c + off + j);
      }
    }
  }
}

// N codes at code index pos of the two planes (per-token order).
HWY_INLINE VI FetchSplit3(DU du, const uint8_t* codes, size_t n, size_t pos, int N, VU sh2, VU sh1,
                          VU m2, VU m1) {
  const size_t lo_bytes = Split3LowBytes(n);
  const VI lo = FetchCodes(du, codes, lo_bytes, pos, 2, N, sh2, m2);
  const VI hi = FetchCodes(du, codes + lo_bytes, (n + 7) / 8, pos, 1, N, sh1, m1);
  return hn::Or(lo, hn::ShiftLeft<2>(hi));
}

// Per-token decode: x^[pos] for every code, or (dot / axpy) fused.
void DequantizeUniform3PerToken(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                                int D, float* dst) {
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int g = f.group, groups = T * (D / g);
  const size_t n = NumCodes(T, D);
  float* a = Scratch(0, static_cast<size_t>(groups));
  float* b = Scratch(1, static_cast<size_t>(groups));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, groups, a, b);
  const VU sh2 = LaneShifts(du, 2), sh1 = LaneShifts(du, 1);
  const VU m2 = hn::Set(du, 3u), m1 = hn::Set(du, 1u);
  size_t pos = 0;
  for (int k = 0; k < groups; ++k) {
    const VF av = hn::Set(df, a[k]), bv = hn::Set(df, b[k]);
    for (int j = 0; j < g; j += N, pos += N) {
      const VI c = FetchSplit3(du, codes, n, pos, N, sh2, sh1, m2, m1);
      hn::StoreU(hn::MulAdd(hn::ConvertTo(df, c), av, bv), df, dst + pos);
    }
  }
}

void DotUniform3PerToken(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                         const float* q, float* scores) {
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int g = f.group, gpt = D / g, groups = T * gpt;
  const size_t n = NumCodes(T, D);
  float* a = Scratch(0, static_cast<size_t>(groups));
  float* b = Scratch(1, static_cast<size_t>(groups));
  float* qsum = Scratch(2, static_cast<size_t>(gpt));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, groups, a, b);
  for (int k = 0; k < gpt; ++k) {
    VF s = hn::Zero(df);
    for (int j = 0; j < g; j += N) s = hn::Add(s, hn::LoadU(df, q + k * g + j));
    qsum[k] = hn::GetLane(hn::SumOfLanes(df, s));
  }
  const VU sh2 = LaneShifts(du, 2), sh1 = LaneShifts(du, 1);
  const VU m2 = hn::Set(du, 3u), m1 = hn::Set(du, 1u);
  size_t pos = 0;
  for (int t = 0; t < T; ++t) {
    VF acc = hn::Zero(df);
    float off = 0.0f;
    for (int k = 0; k < gpt; ++k) {
      const int gi = t * gpt + k;
      const VF av = hn::Set(df, a[gi]);
      off += b[gi] * qsum[k];
      for (int j = 0; j < g; j += N, pos += N) {
        const VI c = FetchSplit3(du, codes, n, pos, N, sh2, sh1, m2, m1);
        acc = hn::MulAdd(hn::Mul(hn::ConvertTo(df, c), av), hn::LoadU(df, q + k * g + j), acc);
      }
    }
    scores[t] = hn::GetLane(hn::SumOfLanes(df, acc)) + off;
  }
}

void AxpyUniform3PerToken(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                          const float* w, float* acc) {
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int g = f.group, gpt = D / g, groups = T * gpt;
  const size_t n = NumCodes(T, D);
  float* a = Scratch(0, static_cast<size_t>(groups));
  float* b = Scratch(1, static_cast<size_t>(groups));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, groups, a, b);
  const VU sh2 = LaneShifts(du, 2), sh1 = LaneShifts(du, 1);
  const VU m2 = hn::Set(du, 3u), m1 = hn::Set(du, 1u);
  size_t pos = 0;
  for (int t = 0; t < T; ++t) {
    for (int k = 0; k < gpt; ++k) {
      const int gi = t * gpt + k;
      const VF av = hn::Set(df, w[t] * a[gi]), bv = hn::Set(df, w[t] * b[gi]);
      for (int j = 0; j < g; j += N, pos += N) {
        const VI c = FetchSplit3(du, codes, n, pos, N, sh2, sh1, m2, m1);
        float* o = acc + k * g + j;
        hn::StoreU(hn::Add(hn::MulAdd(hn::ConvertTo(df, c), av, hn::LoadU(df, o)), bv), df, o);
      }
    }
  }
}

// AxpyUniform3PerToken for m rows (query heads sharing the chunk): every
// element of every row gets exactly the single-row operations, in the same
// token order (acc = (code * (w a) + acc) + w b, the scalars w a and w b
// rounded as there), so the result is bit-identical to m
// AxpyUniform3PerToken calls. Only the work around them is shared and
// reordered: the affine planes are read once, the accumulators of MB rows x
// VB vectors stay in registers over the chunk's tokens, and each code
// vector (up to 16 lanes, read by GetBits) is decoded once per MB rows.
#if HWY_TARGET <= HWY_AVX3
constexpr int kU3Vecs = 4;  // 32 vector registers: 4 rows x 4 vectors of accumulators
#else
constexpr int kU3Vecs = 2;
#endif
constexpr int kU3Rows = 4;

template <class DFT, int MB, int VB>
void AxpyUniform3Block(const uint8_t* codes, size_t lo_bytes, size_t hi_bytes, int T, int D, int g,
                       int gpt, const float* wa, const float* wb, int d0, float* const* rows) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const VU sh2 = LaneShifts(du, 2), sh1 = LaneShifts(du, 1);
  const VU m2 = hn::Set(du, 3u), m1 = hn::Set(du, 1u);
  VF acc[MB][VB];
  for (int h = 0; h < MB; ++h) {
    for (int v = 0; v < VB; ++v) acc[h][v] = hn::LoadU(df, rows[h] + d0 + v * N);
  }
  for (int t = 0; t < T; ++t) {
    for (int v = 0; v < VB; ++v) {
      const int d = d0 + v * N;
      const size_t pos = static_cast<size_t>(t) * D + d;
      const VU lo = hn::And(hn::Set(du, GetBits(codes, lo_bytes, 2 * pos, 2 * N)) >> sh2, m2);
      const VU hi = hn::And(hn::Set(du, GetBits(codes + lo_bytes, hi_bytes, pos, N)) >> sh1, m1);
      const VF c = hn::ConvertTo(df, hn::BitCast(DI(), hn::Or(lo, hn::ShiftLeft<2>(hi))));
      const size_t gi = (static_cast<size_t>(t) * gpt + d / g) * MB;
      for (int h = 0; h < MB; ++h) {
        acc[h][v] =
            hn::Add(hn::MulAdd(c, hn::Set(df, wa[gi + h]), acc[h][v]), hn::Set(df, wb[gi + h]));
      }
    }
  }
  for (int h = 0; h < MB; ++h) {
    for (int v = 0; v < VB; ++v) hn::StoreU(acc[h][v], df, rows[h] + d0 + v * N);
  }
}

template <class DFT, int MB>
void AxpyUniform3Rows(const uint8_t* codes, size_t lo_bytes, size_t hi_bytes, int T, int D, int g,
                      int gpt, const float* wa, const float* wb, float* const* rows) {
  const int N = static_cast<int>(hn::Lanes(DFT()));
  int d0 = 0;
  for (; d0 + kU3Vecs * N <= D; d0 += kU3Vecs * N) {
    AxpyUniform3Block<DFT, MB, kU3Vecs>(codes, lo_bytes, hi_bytes, T, D, g, gpt, wa, wb, d0, rows);
  }
  for (; d0 < D; d0 += N) {
    AxpyUniform3Block<DFT, MB, 1>(codes, lo_bytes, hi_bytes, T, D, g, gpt, wa, wb, d0, rows);
  }
}

template <class DFT>
void AxpyMultiUniform3PerToken(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                               int D, const float* w, size_t ws, int m, float* acc, size_t as) {
  static_assert(hn::MaxLanes(DFT()) <= 16, "2 bits x N codes must fit one 32-bit word");
  const int g = f.group, gpt = D / g, groups = T * gpt;
  const size_t n = NumCodes(T, D);
  const size_t lo_bytes = Split3LowBytes(n), hi_bytes = (n + 7) / 8;
  float* a = Scratch(0, static_cast<size_t>(groups));
  float* b = Scratch(1, static_cast<size_t>(groups));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, groups, a, b);
  // Per group and row: w a and w b, as the single-row kernel rounds them.
  float* wa = Scratch(2, static_cast<size_t>(groups) * kU3Rows);
  float* wb = Scratch(3, static_cast<size_t>(groups) * kU3Rows);
  for (int h0 = 0; h0 < m; h0 += kU3Rows) {
    const int mb = std::min(kU3Rows, m - h0);
    float* rows[kU3Rows];
    for (int h = 0; h < mb; ++h) rows[h] = acc + static_cast<size_t>(h0 + h) * as;
    for (int gi = 0; gi < groups; ++gi) {
      const int t = gi / gpt;
      for (int h = 0; h < mb; ++h) {
        const float wt = w[static_cast<size_t>(h0 + h) * ws + t];
        wa[static_cast<size_t>(gi) * mb + h] = wt * a[gi];
        wb[static_cast<size_t>(gi) * mb + h] = wt * b[gi];
      }
    }
    switch (mb) {
      case 1:
        AxpyUniform3Rows<DFT, 1>(codes, lo_bytes, hi_bytes, T, D, g, gpt, wa, wb, rows);
        break;
      case 2:
        AxpyUniform3Rows<DFT, 2>(codes, lo_bytes, hi_bytes, T, D, g, gpt, wa, wb, rows);
        break;
      case 3:
        AxpyUniform3Rows<DFT, 3>(codes, lo_bytes, hi_bytes, T, D, g, gpt, wa, wb, rows);
        break;
      default:
        AxpyUniform3Rows<DFT, kU3Rows>(codes, lo_bytes, hi_bytes, T, D, g, gpt, wa, wb, rows);
        break;
    }
  }
}

// Per channel (T = 32): channel d's low words at 8d, high word at lo_bytes + 4d.
// Lanes over channels: code of token t = low word t / 16 bits 2(t % 16) | high
// bit t << 2.
template <class DFT>
void DequantizeUniform3PerChannel(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                                  int D, float* dst) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const size_t lo_bytes = Split3LowBytes(NumCodes(T, D));
  float* a = Scratch(0, static_cast<size_t>(D));
  float* b = Scratch(1, static_cast<size_t>(D));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, D, a, b);
  const VU m2 = hn::Set(du, 3u), m1 = hn::Set(du, 1u);
  for (int d0 = 0; d0 < D; d0 += N) {
    VU lw[2], hw[1];
    LoadWords(du, codes + static_cast<size_t>(8) * d0, 2, lw);
    LoadWords(du, codes + lo_bytes + static_cast<size_t>(4) * d0, 1, hw);
    const VF av = hn::LoadU(df, a + d0), bv = hn::LoadU(df, b + d0);
    float* out = dst + d0;
    for (int t = 0; t < T; ++t, out += D) {
      const VU lo = hn::And(hn::ShiftRightSame(lw[t >> 4], 2 * (t & 15)), m2);
      const VU c = hn::Or(lo, hn::ShiftLeft<2>(hn::And(hn::ShiftRightSame(hw[0], t), m1)));
      hn::StoreU(hn::MulAdd(hn::ConvertTo(df, hn::BitCast(DI(), c)), av, bv), df, out);
    }
  }
}

// scores[t] = sum_d (q_d a_d) code[d][t] + sum_d q_d b_d, lanes over tokens.
void DotUniform3PerChannel(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                           const float* q, float* scores) {
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int nvec = T / N;
  const size_t lo_bytes = Split3LowBytes(NumCodes(T, D));
  float* a = Scratch(0, static_cast<size_t>(D));
  float* b = Scratch(1, static_cast<size_t>(D));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, D, a, b);
  const VU sh2 = LaneShifts(du, 2), sh1 = LaneShifts(du, 1);
  const VU m2 = hn::Set(du, 3u), m1 = hn::Set(du, 1u);
  VF acc[8];
  for (int v = 0; v < nvec; ++v) acc[v] = hn::Zero(df);
  VF offv = hn::Zero(df);
  for (int d0 = 0; d0 < D; d0 += N) {
    offv = hn::MulAdd(hn::LoadU(df, q + d0), hn::LoadU(df, b + d0), offv);
  }
  for (int d = 0; d < D; ++d) {
    const uint8_t* lw = codes + static_cast<size_t>(8) * d;
    const uint32_t hw = Load32(codes + lo_bytes + static_cast<size_t>(4) * d);
    const VF qa = hn::Set(df, q[d] * a[d]);
    for (int v = 0; v < nvec; ++v) {
      const int bit = v * N * 2;
      const VI lo = SplitCodes(du, Load32(lw + 4 * (bit >> 5)) >> (bit & 31), sh2, m2);
      const VI hi = SplitCodes(du, hw >> (v * N), sh1, m1);
      acc[v] = hn::MulAdd(hn::ConvertTo(df, hn::Or(lo, hn::ShiftLeft<2>(hi))), qa, acc[v]);
    }
  }
  const VF off = hn::SumOfLanes(df, offv);
  for (int v = 0; v < nvec; ++v) hn::StoreU(hn::Add(acc[v], off), df, scores + v * N);
}

template <class DFT>
void AxpyUniform3PerChannel(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                            int D, const float* w, float* acc) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const size_t lo_bytes = Split3LowBytes(NumCodes(T, D));
  float* a = Scratch(0, static_cast<size_t>(D));
  float* b = Scratch(1, static_cast<size_t>(D));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, D, a, b);
  const VU m2 = hn::Set(du, 3u), m1 = hn::Set(du, 1u);
  float wsum = 0.0f;
  for (int t = 0; t < T; ++t) wsum += w[t];
  const VF wsv = hn::Set(df, wsum);
  for (int d0 = 0; d0 < D; d0 += N) {
    VU lw[2], hw[1];
    LoadWords(du, codes + static_cast<size_t>(8) * d0, 2, lw);
    LoadWords(du, codes + lo_bytes + static_cast<size_t>(4) * d0, 1, hw);
    VF sum = hn::Zero(df);
    for (int t = 0; t < T; ++t) {
      const VU lo = hn::And(hn::ShiftRightSame(lw[t >> 4], 2 * (t & 15)), m2);
      const VU c = hn::Or(lo, hn::ShiftLeft<2>(hn::And(hn::ShiftRightSame(hw[0], t), m1)));
      sum = hn::MulAdd(hn::ConvertTo(df, hn::BitCast(DI(), c)), hn::Set(df, w[t]), sum);
    }
    const VF o = hn::LoadU(df, acc + d0);
    hn::StoreU(hn::MulAdd(hn::LoadU(df, a + d0), sum, hn::MulAdd(hn::LoadU(df, b + d0), wsv, o)),
               df, acc + d0);
  }
}

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
}  // namespace HWY_NAMESPACE
}  // namespace hqekv::quant
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::quant {

// One exported set per kind family; quant/format_traits.cc puts the simd::
// wrappers in the table rows.
#define HQEKV_QUANT_EXPORT_FAMILY(Fam)                                                           \
  HWY_EXPORT(Quantize##Fam##Impl);                                                               \
  HWY_EXPORT(Dequantize##Fam##Impl);                                                             \
  HWY_EXPORT(Dot##Fam##Impl);                                                                    \
  HWY_EXPORT(Axpy##Fam##Impl);                                                                   \
  namespace simd {                                                                               \
  bool Quantize##Fam(const Format& f, const float* src, int T, int D, uint8_t* codes,            \
                     uint8_t* meta) {                                                            \
    return HWY_DYNAMIC_DISPATCH(Quantize##Fam##Impl)(f, src, T, D, codes, meta);                 \
  }                                                                                              \
  bool Dequantize##Fam(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D, \
                       float* dst) {                                                             \
    return HWY_DYNAMIC_DISPATCH(Dequantize##Fam##Impl)(f, codes, meta, T, D, dst);               \
  }                                                                                              \
  bool Dot##Fam(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,        \
                const float* q, float* scores) {                                                 \
    return HWY_DYNAMIC_DISPATCH(Dot##Fam##Impl)(f, codes, meta, T, D, q, scores);                \
  }                                                                                              \
  bool Axpy##Fam(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,       \
                 const float* w, float* acc) {                                                   \
    return HWY_DYNAMIC_DISPATCH(Axpy##Fam##Impl)(f, codes, meta, T, D, w, acc);                  \
  }                                                                                              \
  }  // namespace simd

HQEKV_QUANT_EXPORT_FAMILY(Grouped)
HQEKV_QUANT_EXPORT_FAMILY(Int8)
HQEKV_QUANT_EXPORT_FAMILY(Fp8)
HQEKV_QUANT_EXPORT_FAMILY(F16)
HQEKV_QUANT_EXPORT_FAMILY(Uniform3)
#undef HQEKV_QUANT_EXPORT_FAMILY

HWY_EXPORT(AxpyMultiUniform3Impl);
bool simd::AxpyMultiUniform3(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                             int D, const float* w, size_t w_stride, int m, float* acc,
                             size_t a_stride) {
  return HWY_DYNAMIC_DISPATCH(AxpyMultiUniform3Impl)(f, codes, meta, T, D, w, w_stride, m, acc,
                                                     a_stride);
}

HWY_EXPORT(HadamardRowsImpl);
bool simd::HadamardRows(float* x, int T, int D) {
  return HWY_DYNAMIC_DISPATCH(HadamardRowsImpl)(x, T, D);
}

}  // namespace hqekv::quant
#endif  // HWY_ONCE
