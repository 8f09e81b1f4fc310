// SIMD fused dots of Q2_K, Q3_K, IQ4_NL and IQ4_XS (kernels_lowbit.h). Each
// block's codes are unpacked in int32 lanes, converted to fp32 and
// multiplied by the activations; per-sub-block scales are applied once per
// 16 or 32 values, as the scalar decoders in kernels_ref.cc define them.
#include <cstring>

#include "core/half.h"
#include "kernels/kernels_lowbit.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/kernels_lowbit_hwy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 lanes: one vector never spans two 16-value groups.
using DF = hn::CappedTag<float, 16>;
using DI = hn::RebindToSigned<DF>;
using D8 = hn::Rebind<uint8_t, DF>;

// Q2_K (84 B / 256): scales[16] (low nibble scale, high nibble min), qs[64],
// fp16 d at 80, dmin at 82; 2-bit field s of qs[32h + l] is value
// 128h + 32s + l. Per 16 values: d*sc*sum(q x) - dmin*m*sum(x).
float DotQ2_K(const uint8_t* p, const float* x, int64_t k) {
  const DF df;
  const DI di;
  const D8 d8;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto m3 = hn::Set(di, 3);
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < k / 256; ++b, p += 84) {
    const float d = LoadHalf(p + 80), dmin = LoadHalf(p + 82);
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 4; ++s) {
        for (int part = 0; part < 2; ++part) {
          const uint8_t sc = p[8 * h + 2 * s + part];
          const uint8_t* q = p + 16 + 32 * h + 16 * part;
          const float* xs = x + 256 * b + 128 * h + 32 * s + 16 * part;
          auto sq = hn::Zero(df), sx = hn::Zero(df);
          for (int j = 0; j < 16; j += N) {
            const auto v = hn::PromoteTo(di, hn::LoadU(d8, q + j));
            const auto xv = hn::LoadU(df, xs + j);
            sq = hn::MulAdd(hn::ConvertTo(df, hn::And(hn::ShiftRightSame(v, 2 * s), m3)), xv, sq);
            sx = hn::Add(sx, xv);
          }
          acc = hn::MulAdd(hn::Set(df, d * (sc & 0x0F)), sq, acc);
          acc = hn::MulAdd(hn::Set(df, -dmin * (sc >> 4)), sx, acc);
        }
      }
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

// Q3_K (110 B / 256): hmask[32], qs[64] at 32, 12 bytes of packed 6-bit
// scales at 96 (stored + 32), fp16 d at 108. Value 32g + i (g = 4h + s,
// i < 32) is ((qs[32h + i] >> 2s) & 3) | (bit g of hmask[i]) << 2, minus 4.
float DotQ3_K(const uint8_t* p, const float* x, int64_t k) {
  const DF df;
  const DI di;
  const D8 d8;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto m3 = hn::Set(di, 3), one = hn::Set(di, 1), c4 = hn::Set(di, 4);
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < k / 256; ++b, p += 110) {
    const uint8_t* s12 = p + 96;
    int scales[16];
    for (int i = 0; i < 16; ++i) {
      const int low = i < 8 ? (s12[i] & 0x0F) : (s12[i - 8] >> 4);
      const int high = (s12[8 + i % 4] >> (2 * (i / 4))) & 3;
      scales[i] = (low | (high << 4)) - 32;
    }
    const float d = LoadHalf(p + 108);
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 4; ++s) {
        const int g = 4 * h + s;
        for (int part = 0; part < 2; ++part) {
          const int i0 = 16 * part;
          const float* xs = x + 256 * b + 32 * g + i0;
          auto sq = hn::Zero(df);
          for (int j = 0; j < 16; j += N) {
            const auto v = hn::PromoteTo(di, hn::LoadU(d8, p + 32 + 32 * h + i0 + j));
            const auto hv = hn::PromoteTo(di, hn::LoadU(d8, p + i0 + j));
            const auto q3 =
                hn::Sub(hn::Or(hn::And(hn::ShiftRightSame(v, 2 * s), m3),
                               hn::ShiftLeft<2>(hn::And(hn::ShiftRightSame(hv, g), one))),
                        c4);
            sq = hn::MulAdd(hn::ConvertTo(df, q3), hn::LoadU(df, xs + j), sq);
          }
          acc = hn::MulAdd(hn::Set(df, d * scales[2 * g + part]), sq, acc);
        }
      }
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

// IQ4's 16-value grid (ggml-common.h kvalues_iq4nl) looked up per lane: one
// table lookup of N lanes per N entries, selected by the index's high bits.
hn::Vec<DF> Iq4Values(hn::Vec<DI> idx) {
  static constexpr float kGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};
  const DF df;
  const DI di;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto lane = hn::And(idx, hn::Set(di, N - 1));
  const auto base = hn::Sub(idx, lane);
  auto r = hn::Zero(df);
  for (int t = 0; t < 16; t += N) {
    const auto part = hn::TableLookupLanes(hn::LoadU(df, kGrid + t), hn::IndicesFromVec(df, lane));
    r = hn::IfThenElse(hn::RebindMask(df, hn::Eq(base, hn::Set(di, t))), part, r);
  }
  return r;
}

// 16 bytes of IQ4 nibbles: low nibble j is value j, high nibble value j + 16.
HWY_INLINE hn::Vec<DF> Iq4Half16(const uint8_t* q, const float* xs) {
  const DF df;
  const DI di;
  const D8 d8;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto m15 = hn::Set(di, 15);
  auto sq = hn::Zero(df);
  for (int j = 0; j < 16; j += N) {
    const auto v = hn::PromoteTo(di, hn::LoadU(d8, q + j));
    sq = hn::MulAdd(Iq4Values(hn::And(v, m15)), hn::LoadU(df, xs + j), sq);
    sq = hn::MulAdd(Iq4Values(hn::ShiftRight<4>(v)), hn::LoadU(df, xs + 16 + j), sq);
  }
  return sq;
}

// IQ4_NL (18 B / 32): fp16 d, qs[16]; x = d * grid[nibble].
float DotIQ4_NL(const uint8_t* p, const float* x, int64_t k) {
  const DF df;
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < k / 32; ++b, p += 18, x += 32)
    acc = hn::MulAdd(hn::Set(df, LoadHalf(p)), Iq4Half16(p + 2, x), acc);
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

// IQ4_XS (136 B / 256): fp16 d, u16 scales_h, scales_l[4], qs[128]; sub-block
// i has the 6-bit scale nibble i of scales_l | bits 2i..2i+1 of scales_h << 4
// (stored + 32), and 16 bytes of qs laid out as IQ4_NL's.
float DotIQ4_XS(const uint8_t* p, const float* x, int64_t k) {
  const DF df;
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < k / 256; ++b, p += 136) {
    const float d = LoadHalf(p);
    uint16_t sh;
    std::memcpy(&sh, p + 2, 2);
    for (int i = 0; i < 8; ++i) {
      const int ls = ((p[4 + i / 2] >> (4 * (i % 2))) & 0x0F) | (((sh >> (2 * i)) & 3) << 4);
      acc = hn::MulAdd(hn::Set(df, d * (ls - 32)), Iq4Half16(p + 8 + 16 * i, x + 256 * b + 32 * i),
                       acc);
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

float DotLowBitImpl(int type, const uint8_t* row, const float* x, int64_t k) {
  switch (static_cast<TensorType>(type)) {
    case TensorType::kQ2_K:
      return DotQ2_K(row, x, k);
    case TensorType::kQ3_K:
      return DotQ3_K(row, x, k);
    case TensorType::kIQ4_NL:
      return DotIQ4_NL(row, x, k);
    case TensorType::kIQ4_XS:
      return DotIQ4_XS(row, x, k);
    default:
      return 0.f;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::kernels {

HWY_EXPORT(DotLowBitImpl);

bool IsLowBitType(TensorType t) {
  return t == TensorType::kQ2_K || t == TensorType::kQ3_K || t == TensorType::kIQ4_NL ||
         t == TensorType::kIQ4_XS;
}

float DotLowBit(TensorType t, const void* row, const float* x, int64_t k) {
  return HWY_DYNAMIC_DISPATCH(DotLowBitImpl)(static_cast<int>(t), static_cast<const uint8_t*>(row),
                                             x, k);
}

}  // namespace hqekv::kernels
#endif  // HWY_ONCE
