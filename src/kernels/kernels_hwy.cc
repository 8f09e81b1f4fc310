// SIMD weight kernels (Highway, compiled for every target, dispatched at run
// time through one table, kernels/dispatch.h): fused dequantize-and-dot per
// block format, the GEMV row loop and the dot-form small-m GEMM. The MatVec /
// MatMul entry points that choose among these and the other units' kernels
// are matmul.cc. Oracles: kernels_ref.cc.
#include <cstring>

#include "core/half.h"
#include "kernels/kernels.h"
#include "kernels/kernels_lowbit.h"

#include "kernels/dispatch.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/kernels_hwy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 lanes, so that one vector never spans two 16-value groups of a
// block (Q4_0 halves, Q6_K sub-blocks).
using DF = hn::CappedTag<float, 16>;

inline float Half(const uint8_t* p) {
  f16_t h;
  std::memcpy(&h, p, 2);
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  return _cvtsh_ss(h);  // F16C (exact, like F16ToF32)
#else
  return F16ToF32(h);
#endif
}

float DotF32(const float* w, const float* x, int64_t k) {
  const DF df;
  const int64_t N = hn::Lanes(df);
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 4 * N <= k; i += 4 * N) {
    a0 = hn::MulAdd(hn::LoadU(df, w + i), hn::LoadU(df, x + i), a0);
    a1 = hn::MulAdd(hn::LoadU(df, w + i + N), hn::LoadU(df, x + i + N), a1);
    a2 = hn::MulAdd(hn::LoadU(df, w + i + 2 * N), hn::LoadU(df, x + i + 2 * N), a2);
    a3 = hn::MulAdd(hn::LoadU(df, w + i + 3 * N), hn::LoadU(df, x + i + 3 * N), a3);
  }
  for (; i + N <= k; i += N) a0 = hn::MulAdd(hn::LoadU(df, w + i), hn::LoadU(df, x + i), a0);
  float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < k; ++i) s += w[i] * x[i];
  return s;
}

float DotF16(const uint8_t* p, const float* x, int64_t k) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const int64_t N = hn::Lanes(df);
  const hwy::float16_t* w = reinterpret_cast<const hwy::float16_t*>(p);
  // Four chains: the FMA latency, not the load rate, bounds fewer.
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 4 * N <= k; i += 4 * N) {
    a0 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dh, w + i)), hn::LoadU(df, x + i), a0);
    a1 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dh, w + i + N)), hn::LoadU(df, x + i + N), a1);
    a2 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dh, w + i + 2 * N)), hn::LoadU(df, x + i + 2 * N),
                    a2);
    a3 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dh, w + i + 3 * N)), hn::LoadU(df, x + i + 3 * N),
                    a3);
  }
  a0 = hn::Add(a0, a2);
  a1 = hn::Add(a1, a3);
  for (; i + N <= k; i += N) {
    a0 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dh, w + i)), hn::LoadU(df, x + i), a0);
  }
  float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, a1)));
  for (; i < k; ++i) s += Half(p + 2 * i) * x[i];
  return s;
}

float DotBF16(const uint8_t* p, const float* x, int64_t k) {
  const DF df;
  const hn::Rebind<uint16_t, DF> d16;
  const hn::Rebind<uint32_t, DF> d32;
  const int64_t N = hn::Lanes(df);
  const uint16_t* w = reinterpret_cast<const uint16_t*>(p);
  auto a0 = hn::Zero(df);
  int64_t i = 0;
  for (; i + N <= k; i += N) {
    const auto wf = hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(d32, hn::LoadU(d16, w + i))));
    a0 = hn::MulAdd(wf, hn::LoadU(df, x + i), a0);
  }
  float s = hn::GetLane(hn::SumOfLanes(df, a0));
  for (; i < k; ++i) {
    uint16_t b;
    std::memcpy(&b, p + 2 * i, 2);
    s += BF16BitsToF32(b) * x[i];
  }
  return s;
}

// Sum over one Q8_0 block of q[j] * x[j] (unscaled); two chains for ILP.
HWY_INLINE hn::Vec<DF> BlockQ8(const int8_t* q, const float* x) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int8_t, DF> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  auto s0 = hn::Zero(df), s1 = hn::Zero(df);
  for (int j = 0; j < 32; j += 2 * N) {
    s0 = hn::MulAdd(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, q + j))),
                    hn::LoadU(df, x + j), s0);
    s1 = hn::MulAdd(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, q + j + N))),
                    hn::LoadU(df, x + j + N), s1);
  }
  return hn::Add(s0, s1);
}

float DotQ8_0(const uint8_t* p, const float* x, int64_t k) {
  const DF df;
  const int64_t nb = k / 32;
  auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* b0 = p + 34 * b;
    const uint8_t* b1 = b0 + 34;
    acc0 = hn::MulAdd(hn::Set(df, Half(b0)),
                      BlockQ8(reinterpret_cast<const int8_t*>(b0 + 2), x + 32 * b), acc0);
    acc1 = hn::MulAdd(hn::Set(df, Half(b1)),
                      BlockQ8(reinterpret_cast<const int8_t*>(b1 + 2), x + 32 * b + 32), acc1);
  }
  if (b < nb) {
    const uint8_t* b0 = p + 34 * b;
    acc0 = hn::MulAdd(hn::Set(df, Half(b0)),
                      BlockQ8(reinterpret_cast<const int8_t*>(b0 + 2), x + 32 * b), acc0);
  }
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1)));
}

float DotQ4_0(const uint8_t* p, const float* x, int64_t k) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint8_t, DF> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto m15 = hn::Set(di, 15), eight = hn::Set(di, 8);
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < k / 32; ++b, p += 18, x += 32) {
    auto s0 = hn::Zero(df), s1 = hn::Zero(df);
    for (int j = 0; j < 16; j += N) {
      const auto v = hn::PromoteTo(di, hn::LoadU(d8, p + 2 + j));
      const auto lo = hn::Sub(hn::And(v, m15), eight);
      const auto hi = hn::Sub(hn::ShiftRight<4>(v), eight);
      s0 = hn::MulAdd(hn::ConvertTo(df, lo), hn::LoadU(df, x + j), s0);
      s1 = hn::MulAdd(hn::ConvertTo(df, hi), hn::LoadU(df, x + 16 + j), s1);
    }
    acc = hn::MulAdd(hn::Set(df, Half(p)), hn::Add(s0, s1), acc);
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

// Q5_0 / Q5_1: the 5th bits of values j..j+N-1 (bits j.. of the u32 qh) as
// 16 or 0 per lane.
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> HighBits(uint32_t qh, int j) {
  const hn::RebindToSigned<DF> di;
  const auto bits = hn::Shr(hn::Set(di, static_cast<int32_t>(qh)), hn::Iota(di, j));
  return hn::ShiftLeft<4>(hn::And(bits, hn::Set(di, 1)));
}

// Q4_1: sum (d q + m) x = d sum(q x) + m sum(x) per block.
float DotQ4_1(const uint8_t* p, const float* x, int64_t k) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint8_t, DF> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto m15 = hn::Set(di, 15);
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < k / 32; ++b, p += 20, x += 32) {
    auto sq = hn::Zero(df), sx = hn::Zero(df);
    for (int j = 0; j < 16; j += N) {
      const auto v = hn::PromoteTo(di, hn::LoadU(d8, p + 4 + j));
      const auto xa = hn::LoadU(df, x + j), xb = hn::LoadU(df, x + 16 + j);
      sq = hn::MulAdd(hn::ConvertTo(df, hn::And(v, m15)), xa, sq);
      sq = hn::MulAdd(hn::ConvertTo(df, hn::ShiftRight<4>(v)), xb, sq);
      sx = hn::Add(sx, hn::Add(xa, xb));
    }
    acc = hn::MulAdd(hn::Set(df, Half(p)), sq, acc);
    acc = hn::MulAdd(hn::Set(df, Half(p + 2)), sx, acc);
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

// Q5_0 (offset false: x = d (q - 16)) and Q5_1 (offset true: x = d q + m).
template <bool kOffset>
float DotQ5(const uint8_t* p, const float* x, int64_t k) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint8_t, DF> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  constexpr int kBytes = kOffset ? 24 : 22, kQh = kOffset ? 4 : 2;
  const auto m15 = hn::Set(di, 15), c16 = hn::Set(di, kOffset ? 0 : 16);
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < k / 32; ++b, p += kBytes, x += 32) {
    uint32_t qh;
    std::memcpy(&qh, p + kQh, 4);
    const uint8_t* qs = p + kQh + 4;
    auto sq = hn::Zero(df), sx = hn::Zero(df);
    for (int j = 0; j < 16; j += N) {
      const auto v = hn::PromoteTo(di, hn::LoadU(d8, qs + j));
      const auto lo = hn::Sub(hn::Or(hn::And(v, m15), HighBits(qh, j)), c16);
      const auto hi = hn::Sub(hn::Or(hn::ShiftRight<4>(v), HighBits(qh, j + 16)), c16);
      const auto xa = hn::LoadU(df, x + j), xb = hn::LoadU(df, x + 16 + j);
      sq = hn::MulAdd(hn::ConvertTo(df, lo), xa, sq);
      sq = hn::MulAdd(hn::ConvertTo(df, hi), xb, sq);
      if (kOffset) sx = hn::Add(sx, hn::Add(xa, xb));
    }
    acc = hn::MulAdd(hn::Set(df, Half(p)), sq, acc);
    if (kOffset) acc = hn::MulAdd(hn::Set(df, Half(p + 2)), sx, acc);
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

inline void ScaleMin(int j, const uint8_t* s, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// sum d*sc*q*x - dmin*m*x = d*sc*sum(q*x) - dmin*m*sum(x) per 32-value sub-block.
float DotQ4_K(const uint8_t* p, const float* x, int64_t k) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint8_t, DF> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto m15 = hn::Set(di, 15);
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < k / 256; ++b, p += 144) {
    const float d = Half(p), dmin = Half(p + 2);
    for (int g = 0; g < 4; ++g) {
      int sc1, m1, sc2, m2;
      ScaleMin(2 * g, p + 4, &sc1, &m1);
      ScaleMin(2 * g + 1, p + 4, &sc2, &m2);
      const uint8_t* q = p + 16 + 32 * g;
      const float* xs = x + 256 * b + 64 * g;
      auto sq1 = hn::Zero(df), sx1 = hn::Zero(df), sq2 = hn::Zero(df), sx2 = hn::Zero(df);
      for (int j = 0; j < 32; j += N) {
        const auto v = hn::PromoteTo(di, hn::LoadU(d8, q + j));
        const auto xa = hn::LoadU(df, xs + j), xb = hn::LoadU(df, xs + 32 + j);
        sq1 = hn::MulAdd(hn::ConvertTo(df, hn::And(v, m15)), xa, sq1);
        sq2 = hn::MulAdd(hn::ConvertTo(df, hn::ShiftRight<4>(v)), xb, sq2);
        sx1 = hn::Add(sx1, xa);
        sx2 = hn::Add(sx2, xb);
      }
      acc = hn::MulAdd(hn::Set(df, d * sc1), sq1, acc);
      acc = hn::MulAdd(hn::Set(df, -dmin * m1), sx1, acc);
      acc = hn::MulAdd(hn::Set(df, d * sc2), sq2, acc);
      acc = hn::MulAdd(hn::Set(df, -dmin * m2), sx2, acc);
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

// Q5_K: Q4_K with a 5th bit per value (qh[32] at 16, nibbles at 48).
float DotQ5_K(const uint8_t* p, const float* x, int64_t k) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint8_t, DF> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto m15 = hn::Set(di, 15), one = hn::Set(di, 1);
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < k / 256; ++b, p += 176) {
    const float d = Half(p), dmin = Half(p + 2);
    const uint8_t* qh = p + 16;
    for (int g = 0; g < 4; ++g) {
      int sc1, m1, sc2, m2;
      ScaleMin(2 * g, p + 4, &sc1, &m1);
      ScaleMin(2 * g + 1, p + 4, &sc2, &m2);
      const uint8_t* q = p + 48 + 32 * g;
      const float* xs = x + 256 * b + 64 * g;
      auto sq1 = hn::Zero(df), sx1 = hn::Zero(df), sq2 = hn::Zero(df), sx2 = hn::Zero(df);
      for (int j = 0; j < 32; j += N) {
        const auto v = hn::PromoteTo(di, hn::LoadU(d8, q + j));
        const auto h = hn::PromoteTo(di, hn::LoadU(d8, qh + j));
        const auto h1 = hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * g), one));
        const auto h2 = hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * g + 1), one));
        const auto xa = hn::LoadU(df, xs + j), xb = hn::LoadU(df, xs + 32 + j);
        sq1 = hn::MulAdd(hn::ConvertTo(df, hn::Or(hn::And(v, m15), h1)), xa, sq1);
        sq2 = hn::MulAdd(hn::ConvertTo(df, hn::Or(hn::ShiftRight<4>(v), h2)), xb, sq2);
        sx1 = hn::Add(sx1, xa);
        sx2 = hn::Add(sx2, xb);
      }
      acc = hn::MulAdd(hn::Set(df, d * sc1), sq1, acc);
      acc = hn::MulAdd(hn::Set(df, -dmin * m1), sx1, acc);
      acc = hn::MulAdd(hn::Set(df, d * sc2), sq2, acc);
      acc = hn::MulAdd(hn::Set(df, -dmin * m2), sx2, acc);
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

float DotQ6_K(const uint8_t* p, const float* x, int64_t k) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint8_t, DF> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  const auto m15 = hn::Set(di, 15), m3 = hn::Set(di, 3), c32 = hn::Set(di, 32);
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < k / 256; ++b, p += 210) {
    const float d = Half(p + 208);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = p + 64 * half;
      const uint8_t* qh = p + 128 + 32 * half;
      const int8_t* sc = reinterpret_cast<const int8_t*>(p + 192) + 8 * half;
      const float* xs = x + 256 * b + 128 * half;
      for (int l0 = 0; l0 < 32; l0 += 16) {
        auto s1 = hn::Zero(df), s2 = hn::Zero(df), s3 = hn::Zero(df), s4 = hn::Zero(df);
        for (int j = l0; j < l0 + 16; j += N) {
          const auto a = hn::PromoteTo(di, hn::LoadU(d8, ql + j));
          const auto c = hn::PromoteTo(di, hn::LoadU(d8, ql + 32 + j));
          const auto h = hn::PromoteTo(di, hn::LoadU(d8, qh + j));
          const auto q1 = hn::Sub(hn::Or(hn::And(a, m15), hn::ShiftLeft<4>(hn::And(h, m3))), c32);
          const auto q2 = hn::Sub(
              hn::Or(hn::And(c, m15), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(h), m3))), c32);
          const auto q3 = hn::Sub(
              hn::Or(hn::ShiftRight<4>(a), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(h), m3))),
              c32);
          const auto q4 =
              hn::Sub(hn::Or(hn::ShiftRight<4>(c), hn::ShiftLeft<4>(hn::ShiftRight<6>(h))), c32);
          s1 = hn::MulAdd(hn::ConvertTo(df, q1), hn::LoadU(df, xs + j), s1);
          s2 = hn::MulAdd(hn::ConvertTo(df, q2), hn::LoadU(df, xs + 32 + j), s2);
          s3 = hn::MulAdd(hn::ConvertTo(df, q3), hn::LoadU(df, xs + 64 + j), s3);
          s4 = hn::MulAdd(hn::ConvertTo(df, q4), hn::LoadU(df, xs + 96 + j), s4);
        }
        const int is = l0 / 16;
        acc = hn::MulAdd(hn::Set(df, d * sc[is]), s1, acc);
        acc = hn::MulAdd(hn::Set(df, d * sc[is + 2]), s2, acc);
        acc = hn::MulAdd(hn::Set(df, d * sc[is + 4]), s3, acc);
        acc = hn::MulAdd(hn::Set(df, d * sc[is + 6]), s4, acc);
      }
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

float DotAny(int type, const uint8_t* row, const float* x, int64_t k) {
  switch (static_cast<TensorType>(type)) {
    case TensorType::kF32:
      return DotF32(reinterpret_cast<const float*>(row), x, k);
    case TensorType::kF16:
      return DotF16(row, x, k);
    case TensorType::kBF16:
      return DotBF16(row, x, k);
    case TensorType::kQ8_0:
      return DotQ8_0(row, x, k);
    case TensorType::kQ4_0:
      return DotQ4_0(row, x, k);
    case TensorType::kQ4_K:
      return DotQ4_K(row, x, k);
    case TensorType::kQ6_K:
      return DotQ6_K(row, x, k);
    case TensorType::kQ4_1:
      return DotQ4_1(row, x, k);
    case TensorType::kQ5_0:
      return DotQ5<false>(row, x, k);
    case TensorType::kQ5_1:
      return DotQ5<true>(row, x, k);
    case TensorType::kQ5_K:
      return DotQ5_K(row, x, k);
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kIQ4_NL:
    case TensorType::kIQ4_XS:
      return DotLowBit(static_cast<TensorType>(type), row, x, k);  // kernels_lowbit_hwy.cc
  }
  return 0.f;
}

// out[k] = the values of a row. F32 / F16 / BF16 / Q8_0 in SIMD (hardware
// half conversion where the target has it: F16C on x86), the other block
// types through the scalar decoder. Bit-identical to DequantizeRowRef.
void DequantizeRowAny(int type, const uint8_t* p, int64_t k, float* out) {
  const DF df;
  const int64_t N = hn::Lanes(df);
  int64_t i = 0;
  switch (static_cast<TensorType>(type)) {
    case TensorType::kF32:
      std::memcpy(out, p, static_cast<size_t>(k) * 4);
      return;
    case TensorType::kF16: {
      const hn::Rebind<hwy::float16_t, DF> dh;
      const auto* w = reinterpret_cast<const hwy::float16_t*>(p);
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_ARCH_ARM
      // Native conversion only: Highway 1.0's emulation (SSE4 and below) maps
      // infinities to 65536.
      for (; i + N <= k; i += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, w + i)), df, out + i);
#else
      (void)dh;
      (void)w;
#endif
      for (; i < k; ++i) out[i] = Half(p + 2 * i);
      return;
    }
    case TensorType::kBF16: {
      const hn::Rebind<uint16_t, DF> d16;
      const hn::Rebind<uint32_t, DF> d32;
      const auto* w = reinterpret_cast<const uint16_t*>(p);
      for (; i + N <= k; i += N) {
        const auto bits = hn::ShiftLeft<16>(hn::PromoteTo(d32, hn::LoadU(d16, w + i)));
        hn::StoreU(hn::BitCast(df, bits), df, out + i);
      }
      for (; i < k; ++i) out[i] = BF16BitsToF32(w[i]);
      return;
    }
    case TensorType::kQ8_0: {
      const hn::RebindToSigned<DF> di;
      const hn::Rebind<int8_t, DF> d8;
      for (int64_t b = 0; b < k / 32; ++b, p += 34, out += 32) {
        const auto d = hn::Set(df, Half(p));
        const auto* q = reinterpret_cast<const int8_t*>(p + 2);
        for (int j = 0; j < 32; j += static_cast<int>(N)) {
          hn::StoreU(hn::Mul(d, hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, q + j)))), df,
                     out + j);
        }
      }
      return;
    }
    default:
      DequantizeRowRef(static_cast<TensorType>(type), p, k, out);
  }
}

// N values of a F16 (kBf16 false, hardware conversion where the target has
// it) or BF16 row from element i, as fp32.
template <bool kBf16>
HWY_INLINE hn::Vec<DF> LoadHalfRow(const uint8_t* row, int64_t i) {
  const DF df;
  if constexpr (kBf16) {
    const hn::Rebind<uint16_t, DF> d16;
    const hn::Rebind<uint32_t, DF> d32;
    const auto* w = reinterpret_cast<const uint16_t*>(row);
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(d32, hn::LoadU(d16, w + i))));
  } else {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row) + i));
  }
}

// Value c of a F16 (kBf16 false) or BF16 row (the scalar tails).
template <bool kBf16>
HWY_INLINE float HalfValue(const uint8_t* row, int64_t c) {
  if constexpr (kBf16) {
    uint16_t h;
    std::memcpy(&h, row + 2 * c, 2);
    return BF16BitsToF32(h);
  } else {
    return Half(row + 2 * c);
  }
}

// y[j] = dot(row j, x) for kRows (<= 8) F16 / BF16 rows `row_bytes` apart:
// every activation vector loaded once feeds kRows FMAs (at k = 14336 x is
// 56 KiB, past L1, so a row at a time re-read it from L2 per row). Two
// chains per row (even / odd vectors); the order of the sum does not depend
// on kRows, so a row gives the same bits in any row group (MatVec and
// MatVecMany split rows differently).
template <bool kBf16, int kRows>
HWY_INLINE void DotHalfRows(const uint8_t* w, int64_t row_bytes, const float* x, int64_t k,
                            float* y) {
  const DF df;
  const int64_t N = hn::Lanes(df);
  hn::Vec<DF> a[kRows], b[kRows];
  for (int j = 0; j < kRows; ++j) a[j] = b[j] = hn::Zero(df);
  int64_t i = 0;
  // Software prefetch 1 KiB ahead in each row (the hardware prefetchers
  // follow fewer streams this far ahead): 512 B gave +17% at 4096 x 14336
  // over none; 1 KiB another +5-15% with L3-resident rows (both shapes,
  // quiet machine; 2 KiB within noise of 1 KiB). Past a row's end the
  // prefetch moves on to the same row of the next group (kRows rows on), so
  // that the next group's rows start prefetched too (short rows: at k = 4096
  // a row is 8 KiB and 1 KiB of each row was otherwise a demand miss).
  constexpr int64_t kAhead = 1024;
  for (; i + 2 * N <= k; i += 2 * N) {
    const auto x0 = hn::LoadU(df, x + i), x1 = hn::LoadU(df, x + i + N);
    const int64_t pf =
        2 * i + kAhead < row_bytes ? 2 * i + kAhead : 2 * i + kAhead + (kRows - 1) * row_bytes;
    for (int j = 0; j < kRows; ++j) {
      __builtin_prefetch(w + j * row_bytes + pf);
      a[j] = hn::MulAdd(LoadHalfRow<kBf16>(w + j * row_bytes, i), x0, a[j]);
      b[j] = hn::MulAdd(LoadHalfRow<kBf16>(w + j * row_bytes, i + N), x1, b[j]);
    }
  }
  if (i + N <= k) {
    const auto x0 = hn::LoadU(df, x + i);
    for (int j = 0; j < kRows; ++j) {
      a[j] = hn::MulAdd(LoadHalfRow<kBf16>(w + j * row_bytes, i), x0, a[j]);
    }
    i += N;
  }
  for (int j = 0; j < kRows; ++j) {
    const uint8_t* row = w + j * row_bytes;
    float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(a[j], b[j])));
    for (int64_t c = i; c < k; ++c) s += HalfValue<kBf16>(row, c) * x[c];
    y[j] = s;
  }
}

template <bool kBf16>
void MatVecHalfRows(const uint8_t* w, int64_t row_bytes, const float* x, int64_t k, int64_t r0,
                    int64_t r1, float* y) {
  // 8 rows x 2 chains on AVX-512 (32 registers), 4 rows elsewhere.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  constexpr int kRows = 8;
#else
  constexpr int kRows = 4;
#endif
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) {
    DotHalfRows<kBf16, kRows>(w + r * row_bytes, row_bytes, x, k, y + r);
  }
  if (kRows > 4 && r + 4 <= r1) {
    DotHalfRows<kBf16, 4>(w + r * row_bytes, row_bytes, x, k, y + r);
    r += 4;
  }
  for (; r < r1; ++r) DotHalfRows<kBf16, 1>(w + r * row_bytes, row_bytes, x, k, y + r);
}

// Y[a][j] = dot(row j, x[a]) for kRows F16 / BF16 rows (row_bytes apart) and
// kActs activation rows (ldx apart), written at y[a * ldy + j]: small-m
// products (batched decode) in dot form, each weight vector converted once
// for kActs FMAs; the panel GEMM's transposing pack costs about as much as
// its FMAs at m <= 4.
template <bool kBf16, int kRows, int kActs>
HWY_INLINE void DotHalfActs(const uint8_t* w, int64_t row_bytes, const float* x, int64_t ldx,
                            int64_t k, float* y, int64_t ldy) {
  const DF df;
  const int64_t N = hn::Lanes(df);
  hn::Vec<DF> acc[kRows][kActs];
  for (int j = 0; j < kRows; ++j)
    for (int a = 0; a < kActs; ++a) acc[j][a] = hn::Zero(df);
  int64_t i = 0;
  for (; i + N <= k; i += N) {
    hn::Vec<DF> xv[kActs];
    for (int a = 0; a < kActs; ++a) xv[a] = hn::LoadU(df, x + a * ldx + i);
    for (int j = 0; j < kRows; ++j) {
      __builtin_prefetch(w + j * row_bytes + 2 * i + 512);
      const auto wv = LoadHalfRow<kBf16>(w + j * row_bytes, i);
      for (int a = 0; a < kActs; ++a) acc[j][a] = hn::MulAdd(wv, xv[a], acc[j][a]);
    }
  }
  for (int j = 0; j < kRows; ++j) {
    const uint8_t* row = w + j * row_bytes;
    for (int a = 0; a < kActs; ++a) {
      float s = hn::GetLane(hn::SumOfLanes(df, acc[j][a]));
      for (int64_t c = i; c < k; ++c) s += HalfValue<kBf16>(row, c) * x[a * ldx + c];
      y[a * ldy + j] = s;
    }
  }
}

// kRows weight rows x activation rows [a0, a0 + acts), acts <= 4.
template <bool kBf16, int kRows>
HWY_INLINE void DotHalfActsAny(int acts, const uint8_t* w, int64_t row_bytes, const float* x,
                               int64_t k, float* y, int64_t ldy) {
  switch (acts) {
    case 1:
      return DotHalfActs<kBf16, kRows, 1>(w, row_bytes, x, k, k, y, ldy);
    case 2:
      return DotHalfActs<kBf16, kRows, 2>(w, row_bytes, x, k, k, y, ldy);
    case 3:
      return DotHalfActs<kBf16, kRows, 3>(w, row_bytes, x, k, k, y, ldy);
    default:
      return DotHalfActs<kBf16, kRows, 4>(w, row_bytes, x, k, k, y, ldy);
  }
}

// Rows [r0, r1) x all m activation rows: per group of 4 weight rows, the
// activation rows in groups of 4 (the group's weights stay in L1 between).
template <bool kBf16>
void HalfSmallMRows(const uint8_t* w, int64_t row_bytes, const float* x, int64_t k, int64_t m,
                    int64_t r0, int64_t r1, float* y, int64_t ldy) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    for (int64_t a = 0; a < m; a += 4) {
      DotHalfActsAny<kBf16, 4>(static_cast<int>(std::min<int64_t>(4, m - a)), w + r * row_bytes,
                               row_bytes, x + a * k, k, y + a * ldy + r, ldy);
    }
  }
  for (; r < r1; ++r) {
    for (int64_t a = 0; a < m; a += 4) {
      DotHalfActsAny<kBf16, 1>(static_cast<int>(std::min<int64_t>(4, m - a)), w + r * row_bytes,
                               row_bytes, x + a * k, k, y + a * ldy + r, ldy);
    }
  }
}

// Y = X W^T for 2 <= m <= kSmallM activation rows (k apart; y rows ldy
// apart) and weight rows [r0, r1); false when the type / target has no such
// kernel. Dot form beats the panel GEMM below ~40 rows on AVX-512 (F16,
// 4096 x 14336, GFLOP/s dot / panel: m = 8: 62 / 31, 16: 72 / 53,
// 32: 81 / 75, 48: 83 / 98), where packing the panels costs as much as
// their FMAs.
constexpr int64_t kSmallM = 32;
bool MatMulSmallM(int type, const uint8_t* w, int64_t row_bytes, const float* x, int64_t k,
                  int64_t m, int64_t r0, int64_t r1, float* y, int64_t ldy) {
  const auto t = static_cast<TensorType>(type);
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_ARCH_ARM
  const bool native_f16 = true;
#else
  const bool native_f16 = false;
#endif
  if (!(t == TensorType::kBF16 || (t == TensorType::kF16 && native_f16)) || m < 2 || m > kSmallM) {
    return false;
  }
  if (t == TensorType::kBF16) {
    HalfSmallMRows<true>(w, row_bytes, x, k, m, r0, r1, y, ldy);
  } else {
    HalfSmallMRows<false>(w, row_bytes, x, k, m, r0, r1, y, ldy);
  }
  return true;
}

// y[r] = dot(row r, x) for r in [r0, r1).
void MatVecRows(int type, const uint8_t* w, int64_t row_bytes, const float* x, int64_t k,
                int64_t r0, int64_t r1, float* y) {
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_ARCH_ARM
  // (F16: native conversion only, as in DequantizeRowAny.)
  if (static_cast<TensorType>(type) == TensorType::kF16) {
    return MatVecHalfRows<false>(w, row_bytes, x, k, r0, r1, y);
  }
#endif
  if (static_cast<TensorType>(type) == TensorType::kBF16) {
    return MatVecHalfRows<true>(w, row_bytes, x, k, r0, r1, y);
  }
  for (int64_t r = r0; r < r1; ++r) y[r] = DotAny(type, w + r * row_bytes, x, k);
}

// This target's entry points (kernels/dispatch.h).
const F32RowKernels* F32RowKernelTable() {
  static constexpr F32RowKernels kTable = {&DotAny, &DequantizeRowAny, &MatVecRows, &MatMulSmallM};
  return &kTable;
}

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::kernels {

HWY_EXPORT(F32RowKernelTable);
const F32RowKernels& F32RowKernelsForCpu() { return *HWY_DYNAMIC_DISPATCH(F32RowKernelTable)(); }

}  // namespace hqekv::kernels
#endif  // HWY_ONCE
