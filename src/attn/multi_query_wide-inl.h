// Full-width (up to 16 float lanes) multi-query kernels for the two layouts
// the KIVI / HqeKV tiers store: K per-channel (T = 32 tokens per channel) and
// V per-token groups. Included by attn/multi_query.cc once per SIMD target
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
// and up). Uses row_blocks-inl.h's ForRowBlocks, multi_query.cc's kHeads (query rows per pass)
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
namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace HWY_NAMESPACE {
using namespace ::hqekv::quant::HWY_NAMESPACE;
namespace {  // internal linkage, as quant/simd-inl.h

#ifdef HQEKV_WIDE_MULTI
#undef HQEKV_WIDE_MULTI
#endif
#if HQEKV_HW_F16 && !HWY_HAVE_SCALABLE
#define HQEKV_WIDE_MULTI 1
using DW = hn::CappedTag<float, 16>;
inline constexpr int kWideLanes = static_cast<int>(hn::MaxLanes(DW()));

// Fetches N codes of kBits bits; code 0 at bit `first` of the fetch. The
// fetch is kWidth bits at a byte-aligned address, broadcast to every 128-bit
// block: one 32-bit word (lanes take it whole), or 64 / 128 bits permuted so
// that lane i takes word (first + i·kBits) / 32. Callers only fetch bytes
// inside the chunk (widths chosen so, see the *WideOk checks).
template <int kBits, int kWidth>
struct WideFetch {
  HQEKV_QUANT_TAGS(DW);
  using Idx = decltype(hn::IndicesFromVec(DU(), hn::Zero(DU())));
  static_assert(kWidth == 8 || kWidth == 16 || kWidth == 32 || kWidth == 64 || kWidth == 128,
                "fetch width");
  VU shift;
  Idx idx;
  WideFetch() = default;
  explicit WideFetch(int first) {
    const DU du;
    const VU bitpos = hn::Add(LaneShifts(du, kBits), hn::Set(du, static_cast<uint32_t>(first)));
    shift = hn::And(bitpos, hn::Set(du, 31u));
    idx = hn::IndicesFromVec(du, hn::ShiftRight<5>(bitpos));
  }
  // The codes shifted to bit 0 of their lanes; bits above kBits are the
  // next codes (WideDecode masks them or ignores them).
  HWY_INLINE VU operator()(const uint8_t* p) const {
    const DU du;
    VU w;
    if constexpr (kWidth < 32) {  // 1-bit codes: 8 or 16 lanes, 1 or 2 bytes
      uint32_t x = 0;
      std::memcpy(&x, p, kWidth / 8);
      w = hn::Set(du, x);
    } else if constexpr (kWidth == 32) {
      w = hn::Set(du, Load32(p));
    } else if constexpr (kWidth == 64) {
      const hn::Repartition<uint64_t, DU> d64;
      uint64_t q;
      std::memcpy(&q, p, 8);
      w = hn::TableLookupLanes(hn::BitCast(du, hn::Set(d64, q)), idx);
    } else {
      w = hn::TableLookupLanes(hn::LoadDup128(du, reinterpret_cast<const uint32_t*>(p)), idx);
    }
    return w >> shift;
  }
};

// Calls fn(std::integral_constant<int, bits>()) for bits in {1, 2, 4, 8}.
template <class Fn>
HWY_INLINE void WithBits(int bits, const Fn& fn) {
  switch (bits) {
    case 1:
      fn(std::integral_constant<int, 1>());
      break;
    case 2:
      fn(std::integral_constant<int, 2>());
      break;
    case 4:
      fn(std::integral_constant<int, 4>());
      break;
    default:
      fn(std::integral_constant<int, 8>());
      break;
  }
}

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

// Levels of fetched codes (WideFetch's output: code in the low kBits of each
// lane, garbage above). On AVX-512 with kBits <= 4, one lane permutation
// from a 16-entry table level(i mod 2^kBits) (vpermps reads only the low 4
// index bits, so no mask and no int->float conversion); elsewhere mask, then
// convert or look up the normal-2 centres (kTable).
template <int kBits, bool kTable>
struct WideDecode {
  HQEKV_QUANT_TAGS(DW);
  VF lut;
  const Levels<DW>* lv;
  explicit WideDecode(const Levels<DW>& levels) : lv(&levels) {
    alignas(64) float t[16];
    for (int i = 0; i < 16; ++i) {
      const int code = i & ((1 << kBits) - 1);
      t[i] = kTable ? kNormalCentres2[code & 3] : static_cast<float>(code);
    }
    lut = hn::LoadU(DF(), t);
  }
  HWY_INLINE VF operator()(VU shifted) const {
#if HWY_TARGET <= HWY_AVX3
    if constexpr (kBits <= 4 && hn::MaxLanes(DF()) == 16) {
      return VF{_mm512_permutexvar_ps(shifted.raw, lut.raw)};
    }
#endif
    const VI code = hn::BitCast(DI(), hn::And(shifted, hn::Set(DU(), (1u << kBits) - 1u)));
    if constexpr (kTable) {
      return hn::TableLookupLanes(lv->centres, hn::IndicesFromVec(DF(), code));
    }
    return hn::ConvertTo(DF(), code);
  }
};

// Calls fn(bits_c, table_c) with the code width and whether levels come from
// the normal-2 table, both as compile-time constants.
template <class Fn>
HWY_INLINE void WithCodes(const Format& f, const Fn& fn) {
  if (f.kind == Kind::kNormal && f.bits == 2) {
    fn(std::integral_constant<int, 2>(), std::true_type());
    return;
  }
  WithBits(f.bits, [&](auto bits_c) { fn(bits_c, std::false_type()); });
}

// scores[h][t] = sum_d qa[h][d] level[d][t] + off[h] for MB rows; lanes over
// tokens. Token vector v of a channel is bits [v·N·b, (v+1)·N·b) of its b
// words: inside one word when N·b <= 32, else (N = 16, b = 4) 64 bits at
// byte 8·v.
template <int MB, int kBits, bool kTable>
HWY_INLINE void DotPerChannelWidePass(const uint8_t* codes, const Levels<DW>& lv, int D,
                                      const float* qa, const float* off, float* scores, size_t ss) {
  HQEKV_QUANT_TAGS(DW);
  constexpr int N = kWideLanes;
  constexpr int NT = kChannelChunkT / N;  // 2 or 4 token vectors
  constexpr int kVecBits = N * kBits;
  constexpr int kWidth = kVecBits <= 32 ? 32 : 64;
  static_assert(kVecBits <= 64, "per-channel codes of <= 4 bits");
  const DF df;
  constexpr size_t kStride = 4 * kBits;  // bytes per channel
  WideFetch<kBits, kWidth> fetch[NT];
  int byte[NT];
  for (int v = 0; v < NT; ++v) {
    const int first = v * kVecBits;
    fetch[v] = WideFetch<kBits, kWidth>(kWidth == 32 ? first & 31 : 0);
    byte[v] = kWidth == 32 ? 4 * (first >> 5) : first / 8;
  }
  const WideDecode<kBits, kTable> decode(lv);
  VF acc[MB][NT];
  for (int h = 0; h < MB; ++h) {
    for (int v = 0; v < NT; ++v) acc[h][v] = hn::Zero(df);
  }
  const uint8_t* cw = codes;
  for (int d = 0; d < D; ++d, cw += kStride) {
    VF lvl[NT];
    for (int v = 0; v < NT; ++v) lvl[v] = decode(fetch[v](cw + byte[v]));
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
  ForRowBlocks<kHeads>(m, [&](auto mb_c, int h0) {
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
    WithCodes(f, [&](auto bits_c, auto table_c) {
      constexpr int kBits = decltype(bits_c)::value;
      if constexpr (kBits <= 4) {
        DotPerChannelWidePass<mb, kBits, decltype(table_c)::value>(codes, lv, D, qa, off,
                                                                   scores + h0 * ss, ss);
      }
    });
  });
}

// ------------------------------------------------- V per-token groups

// Token t's codes are D·b / 8 bytes at t·D·b / 8; the vector of N channels
// from d is the N·b bits (8 or 16 for 1-bit codes, else 32, 64 or 128: whole
// bytes inside the chunk) at byte d·b / 8 of the row. Each vector lies inside
// one group. (1-bit V, HqeKV's n1 tier, ran the 8-lane kernels before.)
inline bool PerTokenWideOk(const Format& f, int D) {
  return IsGrouped(f) && f.grouping == Grouping::kPerToken &&
         (f.bits == 1 || f.bits == 2 || f.bits == 4 || f.bits == 8) && kWideLanes * f.bits >= 8 &&
         f.group % kWideLanes == 0 && D % f.group == 0;
}

// acc[h][d0 + v·N + lane] += sum_t w[h][t] (level · a + b)[t][...] for V
// vectors from d0, MB rows; tokens inner, accumulators in registers.
template <int MB, int V, int kBits, bool kTable>
HWY_INLINE void AxpyPerTokenWideBlock(const uint8_t* codes, const Levels<DW>& lv, const float* a,
                                      const float* b, int gpt, int g, int T, int D, const float* w,
                                      size_t ws, float* acc, size_t as, int d0) {
  HQEKV_QUANT_TAGS(DW);
  constexpr int N = kWideLanes;
  const DF df;
  const WideFetch<kBits, N * kBits> fetch(0);
  const WideDecode<kBits, kTable> decode(lv);
  const size_t row_bytes = static_cast<size_t>(D) * kBits / 8;
  int grp[V];
  size_t byte[V];
  for (int v = 0; v < V; ++v) {
    grp[v] = (d0 + v * N) / g;
    byte[v] = static_cast<size_t>(d0 + v * N) * kBits / 8;
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
      x[v] = hn::MulAdd(decode(fetch(row + byte[v])), hn::Set(df, a[gi]), hn::Set(df, b[gi]));
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

void AxpyPerTokenWide(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      const float* w, size_t ws, int m, float* acc, size_t as) {
  constexpr int N = kWideLanes;
  const int gpt = D / f.group;
  const int groups = T * gpt;
  float* a = Scratch(0, static_cast<size_t>(groups));
  float* b = Scratch(1, static_cast<size_t>(groups));
  AffineFromPlanes<Offset::kFusedOnFmaTargets>(f, meta, groups, a, b);
  const Levels<DW> lv(f);
  ForRowBlocks<kHeads>(m, [&](auto mb_c, int h0) {
    constexpr int mb = decltype(mb_c)::value;
    const float* wh = w + h0 * ws;
    float* ah = acc + h0 * as;
    WithCodes(f, [&](auto bits_c, auto table_c) {
      constexpr int kBits = decltype(bits_c)::value;
      constexpr bool kTable = decltype(table_c)::value;
      if constexpr (N * kBits >= 8) {
        int d0 = 0;
        for (; d0 + kVecs * N <= D; d0 += kVecs * N) {
          AxpyPerTokenWideBlock<mb, kVecs, kBits, kTable>(codes, lv, a, b, gpt, f.group, T, D, wh,
                                                          ws, ah, as, d0);
        }
        for (; d0 < D; d0 += N) {
          AxpyPerTokenWideBlock<mb, 1, kBits, kTable>(codes, lv, a, b, gpt, f.group, T, D, wh, ws,
                                                      ah, as, d0);
        }
      }
    });
  });
}

#else
#define HQEKV_WIDE_MULTI 0
#endif  // HQEKV_HW_F16 && !HWY_HAVE_SCALABLE

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace hqekv::attn
HWY_AFTER_NAMESPACE();

#endif  // HQEKV_QUANT_MULTI_QUERY_WIDE_INL_H_ toggle
