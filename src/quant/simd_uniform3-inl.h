// 3-bit uniform chunk kernels of quant/simd.cc (codes split in a 2-bit low
// plane and a 1-bit high plane, quant/uniform3_ref.cc), per token and per
// channel, including the multi-row per-token axpy.
//
// Part of quant/simd.cc's translation unit only (included there once per
// SIMD target, under its no-contraction pragma, quant/no_contract.h): the
// gemma.cpp "-inl.h" style, the toggle guard below admits one inclusion per
// target.

#if defined(HQEKV_QUANT_SIMD_UNIFORM3_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HQEKV_QUANT_SIMD_UNIFORM3_INL_H_
#undef HQEKV_QUANT_SIMD_UNIFORM3_INL_H_
#else
#define HQEKV_QUANT_SIMD_UNIFORM3_INL_H_
#endif

#include <hwy/highway.h>

#include "quant/simd_grouped-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::quant {
namespace HWY_NAMESPACE {
namespace {  // internal linkage, as quant/simd-inl.h

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

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace hqekv::quant
HWY_AFTER_NAMESPACE();

#endif  // HQEKV_QUANT_SIMD_UNIFORM3_INL_H_ toggle
