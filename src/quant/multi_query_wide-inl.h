// Full-width (up to 16 float lanes) multi-query kernels for the two layouts
// the KIVI / HqeKV tiers store: K per-channel (T = 32 tokens per channel) and
// V per-token groups. Included by quant/multi_query.cc once per SIMD target
// (the toggle guard below, as quant/simd-inl.h), after simd-inl.h.
//
// Why a second set: the kernels of multi_query.cc cap vectors at 8 lanes so
// that 8 codes of <= 4 bits are one 32-bit word. On AVX-512 that halves the
// work per instruction; here a vector of N codes of b bits is fetched either
// as one broadcast 32-bit word (N·b <= 32) or as a broadcast 128-bit block
// and a lane permutation (N·b <= 128: lane i takes word (i·b) / 32), then
// shifted and masked per lane. Same math and the same summation order per
// lane as the 8-lane kernels (the affine map of a group is applied where they
// apply it), so results match them within the tolerance of multi_query.h;
// the oracle is still ref::DotChunkMulti / AxpyChunkMulti.
//
// Enabled where fp16 metadata converts in hardware (HQEKV_HW_F16: x86 AVX2
// and up). Uses multi_query.cc's ForHeadBlocks, kHeads (query rows per pass)
// and kVecs (accumulator vectors per row): include it after them.

#if defined(HQEKV_QUANT_MULTI_QUERY_WIDE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HQEKV_QUANT_MULTI_QUERY_WIDE_INL_H_
#undef HQEKV_QUANT_MULTI_QUERY_WIDE_INL_H_
#else
#define HQEKV_QUANT_MULTI_QUERY_WIDE_INL_H_
#endif

#include <algorithm>
#include <cstring>

#include <hwy/highway.h>

#include "quant/format.h"
#include "quant/internal.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::quant {
namespace HWY_NAMESPACE {
namespace {  // internal linkage, as quant/simd-inl.h

#ifdef HQEKV_WIDE_MULTI
#undef HQEKV_WIDE_MULTI
#endif
#if HQEKV_HW_F16 && !HWY_HAVE_SCALABLE
#define HQEKV_WIDE_MULTI 1
using DW = hn::CappedTag<float, 16>;
inline constexpr int kWideLanes = static_cast<int>(hn::MaxLanes(DW()));

// Fetches N codes of `bits` bits starting at a byte boundary. kBlock: N·bits
// > 32, read as a broadcast 128-bit block and permuted (lane i takes word
// (i·bits) / 32); else one broadcast 32-bit word. `first` (< 32) is the bit
// offset of code 0 inside the word (per-channel token vectors that share a
// word). Never reads past `end` (the end of the chunk's codes).
template <bool kBlock>
struct WideFetch {
  HQEKV_QUANT_TAGS(DW);
  using Idx = decltype(hn::IndicesFromVec(DU(), hn::Zero(DU())));
  VU shift, mask;
  Idx idx;
  WideFetch() = default;
  WideFetch(int bits, int first) {
    const DU du;
    const VU bitpos = hn::Add(LaneShifts(du, bits), hn::Set(du, static_cast<uint32_t>(first)));
    shift = hn::And(bitpos, hn::Set(du, 31u));
    idx = hn::IndicesFromVec(du, hn::ShiftRight<5>(bitpos));
    mask = hn::Set(du, (1u << bits) - 1u);
  }
  HWY_INLINE VI operator()(const uint8_t* p, const uint8_t* end) const {
    const DU du;
    VU w;
    if constexpr (kBlock) {
      if (p + 16 <= end) {
        w = hn::LoadDup128(du, reinterpret_cast<const uint32_t*>(p));
      } else {  // the chunk's last vector: copy what is there
        alignas(16) uint32_t buf[4] = {0, 0, 0, 0};
        std::memcpy(buf, p, static_cast<size_t>(end - p));
        w = hn::LoadDup128(du, buf);
      }
      w = hn::TableLookupLanes(w, idx);
    } else {
      uint32_t word = 0;
      if (p + 4 <= end) {
        word = Load32(p);
      } else {
        std::memcpy(&word, p, static_cast<size_t>(end - p));
      }
      w = hn::Set(du, word);
    }
    return hn::BitCast(DI(), hn::And(w >> shift, mask));
  }
};

// N fp16 values -> floats (hardware conversion).
HWY_INLINE hn::Vec<DW> LoadF16W(const uint8_t* p) { return LoadF16V(DW(), p); }

// ------------------------------------------------ K per-channel, T = 32

// Channel d's codes are `bits` 32-bit words at byte 4·bits·d; token vector v
// holds tokens [v·N, v·N + N): bits [v·N·bits, (v+1)·N·bits) of the channel.
inline bool PerChannelWideOk(const Format& f, int T, int D) {
  return IsGrouped(f) && f.grouping == Grouping::kPerChannel && T == kChannelChunkT &&
         (f.bits == 1 || f.bits == 2 || f.bits == 4) && kChannelChunkT % kWideLanes == 0 &&
         D % kWideLanes == 0;
}

// scores[h][t] = sum_d qa[h][d] level[d][t] + off[h] for MB rows; lanes over
// tokens.
template <int MB, bool kBlock>
HWY_INLINE void DotPerChannelWidePass(const uint8_t* codes, int bits, const Levels<DW>& lv, int D,
                                      const float* qa, const float* off, float* scores, size_t ss) {
  HQEKV_QUANT_TAGS(DW);
  constexpr int N = kWideLanes;
  constexpr int NT = kChannelChunkT / N;  // 2 or 4 token vectors
  const DF df;
  const size_t cstride = static_cast<size_t>(4) * bits;
  const uint8_t* end = codes + cstride * D;
  // kBlock (N·bits > 32, i.e. N = 16 and 4 bits): the channel is one
  // 128-bit block and vector v starts at bit v·N·bits of it.
  WideFetch<kBlock> fetch[NT];
  int word_byte[NT];
  for (int v = 0; v < NT; ++v) {
    const int first = v * N * bits;
    fetch[v] = WideFetch<kBlock>(bits, kBlock ? first : first & 31);
    word_byte[v] = kBlock ? 0 : 4 * (first >> 5);
  }
  VF acc[MB][NT];
  for (int h = 0; h < MB; ++h) {
    for (int v = 0; v < NT; ++v) acc[h][v] = hn::Zero(df);
  }
  const uint8_t* cw = codes;
  for (int d = 0; d < D; ++d, cw += cstride) {
    VF lvl[NT];
    for (int v = 0; v < NT; ++v) lvl[v] = lv(fetch[v](cw + word_byte[v], end));
    for (int h = 0; h < MB; ++h) {
      const VF qv = hn::Set(df, qa[h * D + d]);
      for (int v = 0; v < NT; ++v) acc[h][v] = hn::MulAdd(lvl[v], qv, acc[h][v]);
    }
  }
  for (int h = 0; h < MB; ++h) {
    const VF o = hn::Set(df, off[h]);
    for (int v = 0; v < NT; ++v) hn::StoreU(hn::Add(acc[h][v], o), df, scores + h * ss + v * N);
  }
}

// The affine map of N channels from d: x^ = level · a + b (normal-1 folded
// as in AffineFromPlanes with one fused multiply-add).
HWY_INLINE void WideAffine(const Format& f, const uint8_t* meta, int groups, int d, hn::Vec<DW>* a,
                           hn::Vec<DW>* b) {
  const DW df;
  *a = LoadF16W(meta + 2 * static_cast<size_t>(d));
  *b = LoadF16W(meta + 2 * (static_cast<size_t>(groups) + d));
  if (f.kind == Kind::kNormal && f.bits == 1) {
    const hn::Vec<DW> c = hn::Set(df, kNormalCentres1[1]);
    *b = hn::NegMulAdd(c, *a, *b);
    *a = hn::Mul(hn::Set(df, 2.0f * kNormalCentres1[1]), *a);
  }
}

void DotPerChannelWide(const Format& f, const uint8_t* codes, const uint8_t* meta, int D,
                       const float* q, size_t qs, int m, float* scores, size_t ss) {
  HQEKV_QUANT_TAGS(DW);
  constexpr int N = kWideLanes;
  const DF df;
  float* qa = Scratch(2, static_cast<size_t>(kHeads) * D);
  const Levels<DF> lv(f);
  const bool block = N * f.bits > 32;
  ForHeadBlocks(m, [&](auto mb_c, int h0) {
    constexpr int mb = decltype(mb_c)::value;
    // qa[h][d] = q[h][d] · a[d], off[h] = q[h] · b, the metadata decoded
    // once per head block.
    VF o[mb];
    for (int h = 0; h < mb; ++h) o[h] = hn::Zero(df);
    for (int d = 0; d < D; d += N) {
      VF a, b;
      WideAffine(f, meta, D, d, &a, &b);
      for (int h = 0; h < mb; ++h) {
        const VF qv = hn::LoadU(df, q + (h0 + h) * qs + d);
        hn::StoreU(hn::Mul(qv, a), df, qa + h * D + d);
        o[h] = hn::MulAdd(qv, b, o[h]);
      }
    }
    float off[mb];
    for (int h = 0; h < mb; ++h) off[h] = hn::GetLane(hn::SumOfLanes(df, o[h]));
    if (block) {
      DotPerChannelWidePass<mb, true>(codes, f.bits, lv, D, qa, off, scores + h0 * ss, ss);
    } else {
      DotPerChannelWidePass<mb, false>(codes, f.bits, lv, D, qa, off, scores + h0 * ss, ss);
    }
  });
}

// ------------------------------------------------- V per-token groups

// Token t's codes are D·bits / 8 bytes at t·D·bits / 8; the vector of N
// channels from d starts at byte d·bits / 8 of the row (N·bits is a multiple
// of 8 for N >= 8). Each vector lies inside one group.
inline bool PerTokenWideOk(const Format& f, int D) {
  return IsGrouped(f) && f.grouping == Grouping::kPerToken &&
         (f.bits == 1 || f.bits == 2 || f.bits == 4 || f.bits == 8) && f.group % kWideLanes == 0 &&
         D % f.group == 0;
}

// acc[h][d0 + v·N + lane] += sum_t w[h][t] (level · a + b)[t][...] for V
// vectors from d0, MB rows; tokens inner, accumulators in registers.
template <int MB, int V, bool kBlock>
HWY_INLINE void AxpyPerTokenWideBlock(const WideFetch<kBlock>& fetch, const uint8_t* codes,
                                      const uint8_t* end, int bits, const Levels<DW>& lv,
                                      const float* a, const float* b, int gpt, int g, int T, int D,
                                      const float* w, size_t ws, float* acc, size_t as, int d0) {
  HQEKV_QUANT_TAGS(DW);
  constexpr int N = kWideLanes;
  const DF df;
  const size_t row_bytes = static_cast<size_t>(D) * bits / 8;
  int grp[V];
  size_t byte[V];
  for (int v = 0; v < V; ++v) {
    grp[v] = (d0 + v * N) / g;
    byte[v] = static_cast<size_t>(d0 + v * N) * bits / 8;
  }
  VF s[MB][V];
  for (int h = 0; h < MB; ++h) {
    for (int v = 0; v < V; ++v) s[h][v] = hn::LoadU(df, acc + h * as + d0 + v * N);
  }
  const uint8_t* row = codes;
  for (int t = 0; t < T; ++t, row += row_bytes) {
    VF x[V];
    for (int v = 0; v < V; ++v) {
      const int gi = t * gpt + grp[v];
      x[v] = hn::MulAdd(lv(fetch(row + byte[v], end)), hn::Set(df, a[gi]), hn::Set(df, b[gi]));
    }
    for (int h = 0; h < MB; ++h) {
      const VF wv = hn::Set(df, w[h * ws + t]);
      for (int v = 0; v < V; ++v) s[h][v] = hn::MulAdd(x[v], wv, s[h][v]);
    }
  }
  for (int h = 0; h < MB; ++h) {
    for (int v = 0; v < V; ++v) hn::StoreU(s[h][v], df, acc + h * as + d0 + v * N);
  }
}

template <int MB, bool kBlock>
HWY_INLINE void AxpyPerTokenWidePass(const Format& f, const uint8_t* codes, const uint8_t* end,
                                     const Levels<DW>& lv, const float* a, const float* b, int T,
                                     int D, const float* w, size_t ws, float* acc, size_t as) {
  constexpr int N = kWideLanes;
  const WideFetch<kBlock> fetch(f.bits, 0);
  const int gpt = D / f.group;
  int d0 = 0;
  for (; d0 + kVecs * N <= D; d0 += kVecs * N) {
    AxpyPerTokenWideBlock<MB, kVecs, kBlock>(fetch, codes, end, f.bits, lv, a, b, gpt, f.group, T,
                                             D, w, ws, acc, as, d0);
  }
  for (; d0 < D; d0 += N) {
    AxpyPerTokenWideBlock<MB, 1, kBlock>(fetch, codes, end, f.bits, lv, a, b, gpt, f.group, T, D, w,
                                         ws, acc, as, d0);
  }
}

void AxpyPerTokenWide(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      const float* w, size_t ws, int m, float* acc, size_t as) {
  const int groups = T * (D / f.group);
  float* a = Scratch(0, static_cast<size_t>(groups));
  float* b = Scratch(1, static_cast<size_t>(groups));
  AffineFromPlanes<Offset::kFusedOnFmaTargets>(f, meta, groups, a, b);
  const Levels<DW> lv(f);
  const uint8_t* end = codes + CodeBytes(f, T, D);
  const bool block = kWideLanes * f.bits > 32;
  ForHeadBlocks(m, [&](auto mb_c, int h0) {
    constexpr int mb = decltype(mb_c)::value;
    if (block) {
      AxpyPerTokenWidePass<mb, true>(f, codes, end, lv, a, b, T, D, w + h0 * ws, ws, acc + h0 * as,
                                     as);
    } else {
      AxpyPerTokenWidePass<mb, false>(f, codes, end, lv, a, b, T, D, w + h0 * ws, ws, acc + h0 * as,
                                      as);
    }
  });
}

#else
#define HQEKV_WIDE_MULTI 0
#endif  // HQEKV_HW_F16 && !HWY_HAVE_SCALABLE

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace hqekv::quant
HWY_AFTER_NAMESPACE();

#endif  // HQEKV_QUANT_MULTI_QUERY_WIDE_INL_H_ toggle
