// Highway kernels of attn/multi_query.h, compiled once per SIMD target
// (foreach_target.h) and chosen at run time (one table per target), plus the
// public entry points (fallback: the single-query entry points per row).
//
// Register blocking: up to kHeads query rows per pass, each with kVecs
// independent accumulator vectors (2 on 16-register targets, 4 with AVX-512's
// 32 registers), so every decoded code vector feeds kHeads FMAs and the FMA
// latency is hidden by independent chains. Vectors are capped at 8 float
// lanes like quant/simd.cc: 8 codes of <= 4 bits are one 32-bit word.
//
// Math (x̂ = level · a + b per group, see quant/README.md):
//   per-channel K, lanes over tokens:
//     score[h][t] = sum_d (q[h][d] a[d]) level[d][t] + sum_d q[h][d] b[d]
//   per-channel V, lanes over channels:
//     acc[h][d] += a[d] sum_t w[h][t] level[d][t] + b[d] sum_t w[h][t]
//   row-major (f16, int8, per-token), lanes over channels, x̂ decoded once
//   per vector and shared by the rows:
//     score[h][t] = sum_d q[h][d] x̂[t][d],  acc[h][d] += sum_t w[h][t] x̂[t][d]
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "quant/format.h"

// The kernels of one Highway target: one export and one dispatch for the file.
#ifndef HQEKV_ATTN_MULTI_QUERY_TABLE_DEFINED_
#define HQEKV_ATTN_MULTI_QUERY_TABLE_DEFINED_
namespace hqekv::attn {
using namespace ::hqekv::quant;
struct MultiQueryTable {
  bool (*dot_multi)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    const float* q, size_t qs, int m, float* scores, size_t ss);
  bool (*axpy_multi)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     const float* w, size_t ws, int m, float* acc, size_t as);
  bool (*softmax_row)(float* x, int n, float* max_out, float* sum_out, bool normalize);
  bool (*accumulate_f16)(uint16_t* sums, const float* w, float scale, int n);
};
}  // namespace hqekv::attn
#endif

#include "quant/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attn/multi_query.cc"
#include <hwy/foreach_target.h>  // NOLINT: re-includes this file once per target
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "quant/format_traits.h"
#include "quant/internal.h"
#include "attn/multi_query.h"
#include "attn/row_blocks-inl.h"  // ForRowBlocks
#include "quant/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace HWY_NAMESPACE {
using namespace ::hqekv::quant::HWY_NAMESPACE;
namespace {  // kernels private to this file (shared helpers, hn: quant/simd-inl.h)

constexpr int kHeads = 4;  // query rows per pass
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kVecs = 4;  // 32 vector registers
#else
constexpr int kVecs = 2;    // 16 vector registers
#endif
// Per-channel passes walk a chunk's 32 / N token vectors (N = 4 or 8 lanes)
// kVecs at a time.
static_assert((kChannelChunkT / kMaxFetchLanes) % kVecs == 0,
              "token vectors in whole kVecs blocks");

// Multi-query affine maps round the normal-1 offset with an FMA (see Offset).
void Affine(const Format& f, const uint8_t* meta, int groups, float* a, float* b) {
  AffineFromPlanes<Offset::kFusedOnFmaTargets>(f, meta, groups, a, b);
}
using Lv = Levels<DF>;

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace hqekv::attn
HWY_AFTER_NAMESPACE();

#include "attn/multi_query_wide-inl.h"
#include "attn/multi_query_rows-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace HWY_NAMESPACE {
using namespace ::hqekv::quant::HWY_NAMESPACE;
namespace {

bool PerChannelMulti(const Format& f, int T, int D, int N) {
  return IsGrouped(f) && PerChannelFast(f, T, D, N);
}

// ------------------------------------------------------ per-channel (T = 32)

// One pass of MB query rows over a per-channel chunk: qa = q · a ([MB][D]),
// off[h] = q[h] · b. Lanes over tokens; kVecs token vectors at a time.
template <int MB>
void DotPerChannelPass(const uint8_t* codes, int bits, const Lv& lv, int D, const float* qa,
                       const float* off, float* scores, size_t ss) {
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int nvec = 32 / N;  // 4 or 8: a multiple of kVecs
  const VU shifts = LaneShifts(du, bits);
  const VU mask = hn::Set(du, (1u << bits) - 1u);
  for (int v0 = 0; v0 < nvec; v0 += kVecs) {
    VF acc[MB][kVecs];
    for (int h = 0; h < MB; ++h) {
      for (int v = 0; v < kVecs; ++v) acc[h][v] = hn::Zero(df);
    }
    // Token vector v0+v of a channel: word bit >> 5, lanes shifted by
    // (bit & 31) + lane·bits; vectors in the same word share one broadcast.
    int word_of[kVecs];
    VU sh[kVecs];
    for (int v = 0; v < kVecs; ++v) {
      const int bit = (v0 + v) * N * bits;
      word_of[v] = bit >> 5;
      sh[v] = hn::Add(shifts, hn::Set(du, static_cast<uint32_t>(bit & 31)));
    }
    const uint8_t* cw = codes;
    for (int d = 0; d < D; ++d, cw += 4 * bits) {
      VF lvl[kVecs];
      for (int v = 0; v < kVecs; ++v) {
        const VU wv = hn::Set(du, Load32(cw + 4 * word_of[v]));
        lvl[v] = lv(hn::BitCast(DI(), hn::And(wv >> sh[v], mask)));
      }
      for (int h = 0; h < MB; ++h) {
        const VF qv = hn::Set(df, qa[h * D + d]);
        for (int v = 0; v < kVecs; ++v) acc[h][v] = hn::MulAdd(lvl[v], qv, acc[h][v]);
      }
    }
    for (int h = 0; h < MB; ++h) {
      const VF o = hn::Set(df, off[h]);
      for (int v = 0; v < kVecs; ++v) {
        hn::StoreU(hn::Add(acc[h][v], o), df, scores + h * ss + (v0 + v) * N);
      }
    }
  }
}

void DotPerChannel(const Format& f, const uint8_t* codes, const uint8_t* meta, int D,
                   const float* q, size_t qs, int m, float* scores, size_t ss) {
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  float* a = Scratch(0, static_cast<size_t>(D));
  float* b = Scratch(1, static_cast<size_t>(D));
  float* qa = Scratch(2, static_cast<size_t>(kHeads) * D);
  Affine(f, meta, D, a, b);
  const Lv lv(f);
  ForRowBlocks<kHeads>(m, [&](auto mb_c, int h0) {
    constexpr int mb = decltype(mb_c)::value;
    float off[kHeads];
    for (int h = 0; h < mb; ++h) {
      const float* qh = q + (h0 + h) * qs;
      VF o = hn::Zero(df);
      for (int d = 0; d < D; d += N) {
        const VF qv = hn::LoadU(df, qh + d);
        hn::StoreU(hn::Mul(qv, hn::LoadU(df, a + d)), df, qa + h * D + d);
        o = hn::MulAdd(qv, hn::LoadU(df, b + d), o);
      }
      off[h] = Sum(df, o);
    }
    DotPerChannelPass<mb>(codes, f.bits, lv, D, qa, off, scores + h0 * ss, ss);
  });
}

template <int MB>
void AxpyPerChannelPass(const uint8_t* codes, int bits, const Lv& lv, int D, const float* a,
                        const float* b, const float* w, size_t ws, const float* wsum, float* acc,
                        size_t as) {
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int per_word = 32 / bits;
  const VU mask = hn::Set(du, (1u << bits) - 1u);
  for (int d0 = 0; d0 < D; d0 += N) {
    VU words[4];
    LoadWords(du, codes + static_cast<size_t>(4) * bits * d0, bits, words);
    VF sum[MB];
    for (int h = 0; h < MB; ++h) sum[h] = hn::Zero(df);
    for (int wi = 0; wi < bits; ++wi) {
      for (int k = 0; k < per_word; ++k) {
        const int t = wi * per_word + k;
        const VF lvl =
            lv(hn::BitCast(DI(), hn::And(hn::ShiftRightSame(words[wi], k * bits), mask)));
        for (int h = 0; h < MB; ++h) sum[h] = hn::MulAdd(lvl, hn::Set(df, w[h * ws + t]), sum[h]);
      }
    }
    const VF av = hn::LoadU(df, a + d0), bv = hn::LoadU(df, b + d0);
    for (int h = 0; h < MB; ++h) {
      float* o = acc + h * as + d0;
      hn::StoreU(hn::MulAdd(av, sum[h], hn::MulAdd(bv, hn::Set(df, wsum[h]), hn::LoadU(df, o))), df,
                 o);
    }
  }
}

void AxpyPerChannel(const Format& f, const uint8_t* codes, const uint8_t* meta, int D,
                    const float* w, size_t ws, int m, float* acc, size_t as) {
  float* a = Scratch(0, static_cast<size_t>(D));
  float* b = Scratch(1, static_cast<size_t>(D));
  Affine(f, meta, D, a, b);
  const Lv lv(f);
  ForRowBlocks<kHeads>(m, [&](auto mb_c, int h0) {
    constexpr int mb = decltype(mb_c)::value;
    float wsum[kHeads];
    for (int h = 0; h < mb; ++h) {
      float s = 0.0f;
      for (int t = 0; t < kChannelChunkT; ++t) s += w[(h0 + h) * ws + t];
      wsum[h] = s;
    }
    AxpyPerChannelPass<mb>(codes, f.bits, lv, D, a, b, w + h0 * ws, ws, wsum, acc + h0 * as, as);
  });
}

// ------------------------------------------- row-major: f16, int8, per-token

// Decodes N consecutive values (code index pos = t·D + d) of a token-major
// chunk into levels (before the per-group / per-token affine map).
struct RowSource {
  enum Type { kF16, kInt8, kPacked } type = kPacked;
  const uint8_t* codes = nullptr;
  size_t nbytes = 0;
  int bits = 0;
  VU shifts, mask;
  Lv lv;
  RowSource(const Format& f, const uint8_t* c, int T, int D) : codes(c), lv(f) {
    const DU du;
    type = f.kind == Kind::kF16 ? kF16 : (f.kind == Kind::kInt8 ? kInt8 : kPacked);
    bits = f.bits;
    nbytes = CodeBytes(f, T, D);
    shifts = LaneShifts(du, bits < 8 ? bits : 0);
    mask = hn::Set(du, bits < 8 ? (1u << bits) - 1u : 0xFFu);
  }
  // kType: the Type (a template argument, so the inner loops carry no
  // branches on the kind).
  template <int kType>
  HWY_INLINE VF Load(size_t pos) const {
    const DF df;
    const DI di;
    const DU du;
    if constexpr (kType == kF16) {
#if HQEKV_HW_F16
      return LoadF16V(df, codes + 2 * pos);
#else
      return hn::Zero(df);  // unreachable: RowsFast needs F16C for f16
#endif
    }
    if constexpr (kType == kInt8) return LoadInt8(df, codes + pos);
    if (bits == 8) {
      const hn::Rebind<uint8_t, DI> d8;
      return lv(hn::PromoteTo(di, hn::LoadU(d8, codes + pos)));
    }
    const size_t bit = pos * static_cast<size_t>(bits);
    const size_t byte = bit >> 3;
    uint32_t word;
    if (byte + 4 <= nbytes) {
      word = Load32(codes + byte);
    } else {  // the last bytes of the chunk: never read past its end
      word = 0;
      std::memcpy(&word, codes + byte, nbytes - byte);
    }
    word >>= (bit & 7);  // N·bits + (bit & 7) <= 32 for N = 8, bits <= 2 or byte-aligned 4
    return lv(hn::BitCast(di, hn::And(hn::Set(du, word) >> shifts, mask)));
  }
};

// Per-token scale of a row-major chunk: a[t·gpt + k], b[...] (b null: none);
// a null: 1 (f16).
struct RowAffine {
  const float* a = nullptr;
  const float* b = nullptr;
  int gpt = 1, g = 0;
};

RowAffine MakeRowAffine(const Format& f, const uint8_t* meta, int T, int D) {
  RowAffine r;
  if (f.kind == Kind::kF16) {
    r.g = D;
    return r;
  }
  if (f.kind == Kind::kInt8) {
    float* s = Scratch(0, static_cast<size_t>(T));
    LoadPlane(meta, T, s);
    r.a = s;
    r.g = D;
    return r;
  }
  r.g = f.group;
  r.gpt = D / f.group;
  const int groups = T * r.gpt;
  float* a = Scratch(0, static_cast<size_t>(groups));
  float* b = Scratch(1, static_cast<size_t>(groups));
  Affine(f, meta, groups, a, b);
  r.a = a;
  r.b = b;
  return r;
}

// The value vector of N channels at (t, d): level · a + b of its group, with
// the affine map applied once here and shared by every query row (cheaper
// than folding a into per-row weights: that costs m·T·gpt scalar products).
template <int kType>
HWY_INLINE VF RowValue(const RowSource& src, const RowAffine& af, size_t pos, int gi) {
  const DF df;
  const VF x = src.Load<kType>(pos);
  if constexpr (kType == RowSource::kF16) return x;
  if constexpr (kType == RowSource::kInt8) return hn::Mul(x, hn::Set(df, af.a[gi]));
  return hn::MulAdd(x, hn::Set(df, af.a[gi]), hn::Set(df, af.b[gi]));
}

template <int MB, int kType>
void DotRowsPass(const RowSource& src, const RowAffine& af, int T, int D, const float* q, size_t qs,
                 float* scores, size_t ss) {
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  const int g = af.g;
  for (int t = 0; t < T; ++t) {
    VF p0[MB], p1[MB];  // two chains per row: hides the FMA latency
    for (int h = 0; h < MB; ++h) p0[h] = p1[h] = hn::Zero(df);
    for (int k = 0; k < af.gpt; ++k) {
      const int gi = t * af.gpt + k;
      const size_t pos = static_cast<size_t>(t) * D + static_cast<size_t>(k) * g;
      const float* qk = q + k * g;
      int j = 0;
      for (; j + 2 * N <= g; j += 2 * N) {
        const VF x0 = RowValue<kType>(src, af, pos + j, gi),
                 x1 = RowValue<kType>(src, af, pos + j + N, gi);
        for (int h = 0; h < MB; ++h) {
          p0[h] = hn::MulAdd(x0, hn::LoadU(df, qk + h * qs + j), p0[h]);
          p1[h] = hn::MulAdd(x1, hn::LoadU(df, qk + h * qs + j + N), p1[h]);
        }
      }
      if (j < g) {
        const VF x0 = RowValue<kType>(src, af, pos + j, gi);
        for (int h = 0; h < MB; ++h) p0[h] = hn::MulAdd(x0, hn::LoadU(df, qk + h * qs + j), p0[h]);
      }
    }
    for (int h = 0; h < MB; ++h) scores[h * ss + t] = Sum(df, hn::Add(p0[h], p1[h]));
  }
}

// Calls fn(std::integral_constant<int, kType>()) for the chunk's row type
// (a template argument, so the inner loops carry no branches on the kind).
template <class Fn>
HWY_INLINE void WithRowType(RowSource::Type type, const Fn& fn) {
  switch (type) {
    case RowSource::kF16:
      fn(std::integral_constant<int, RowSource::kF16>());
      break;
    case RowSource::kInt8:
      fn(std::integral_constant<int, RowSource::kInt8>());
      break;
    default:
      fn(std::integral_constant<int, RowSource::kPacked>());
      break;
  }
}

void DotRows(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
             const float* q, size_t qs, int m, float* scores, size_t ss) {
  const RowSource src(f, codes, T, D);
  const RowAffine af = MakeRowAffine(f, meta, T, D);
  WithRowType(src.type, [&](auto type_c) {
    ForRowBlocks<kHeads>(m, [&](auto mb_c, int h0) {
      DotRowsPass<decltype(mb_c)::value, decltype(type_c)::value>(src, af, T, D, q + h0 * qs, qs,
                                                                  scores + h0 * ss, ss);
    });
  });
}

// V vectors of channels from d0, MB rows: the MB·V accumulators live in
// registers (constant trip counts only, else the compiler keeps them on the
// stack), tokens inner.
template <int MB, int V, int kType>
HWY_INLINE void AxpyRowsBlock(const RowSource& src, const RowAffine& af, int T, int D,
                              const float* w, size_t ws, float* acc, size_t as, int d0) {
  const DF df;
  const int N = static_cast<int>(hn::Lanes(df));
  VF s[MB][V];
  int grp[V];  // group of each vector (g is a multiple of N)
  for (int v = 0; v < V; ++v) grp[v] = (d0 + v * N) / af.g;
  for (int h = 0; h < MB; ++h) {
    for (int v = 0; v < V; ++v) s[h][v] = hn::LoadU(df, acc + h * as + d0 + v * N);
  }
  for (int t = 0; t < T; ++t) {
    VF x[V];
    const size_t pos = static_cast<size_t>(t) * D + d0;
    for (int v = 0; v < V; ++v) x[v] = RowValue<kType>(src, af, pos + v * N, t * af.gpt + grp[v]);
    for (int h = 0; h < MB; ++h) {
      const VF wv = hn::Set(df, w[h * ws + t]);
      for (int v = 0; v < V; ++v) s[h][v] = hn::MulAdd(x[v], wv, s[h][v]);
    }
  }
  for (int h = 0; h < MB; ++h) {
    for (int v = 0; v < V; ++v) hn::StoreU(s[h][v], df, acc + h * as + d0 + v * N);
  }
}

template <int MB, int kType>
void AxpyRowsPass(const RowSource& src, const RowAffine& af, int T, int D, const float* w,
                  size_t ws, float* acc, size_t as) {
  const int N = static_cast<int>(hn::Lanes(DF()));
  int d0 = 0;
  for (; d0 + kVecs * N <= D; d0 += kVecs * N)
    AxpyRowsBlock<MB, kVecs, kType>(src, af, T, D, w, ws, acc, as, d0);
  for (; d0 < D; d0 += N) AxpyRowsBlock<MB, 1, kType>(src, af, T, D, w, ws, acc, as, d0);
}

void AxpyRows(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
              const float* w, size_t ws, int m, float* acc, size_t as) {
  const RowSource src(f, codes, T, D);
  const RowAffine af = MakeRowAffine(f, meta, T, D);
  WithRowType(src.type, [&](auto type_c) {
    ForRowBlocks<kHeads>(m, [&](auto mb_c, int h0) {
      AxpyRowsPass<decltype(mb_c)::value, decltype(type_c)::value>(src, af, T, D, w + h0 * ws, ws,
                                                                   acc + h0 * as, as);
    });
  });
}

// Row-major fast path: f16 (F16C targets), int8, per-token grouped with
// N·bits codes readable as one 32-bit word after a byte-aligned load.
bool RowsFast(const Format& f, int D, int N) {
  if (D % N != 0) return false;
  if (f.kind == Kind::kF16) return HQEKV_HW_F16 != 0;
  if (f.kind == Kind::kInt8) return true;
  if (!IsGrouped(f) || !PerTokenFast(f, D, N)) return false;
  // A vector's codes start at bit pos·bits with pos a multiple of N: byte
  // aligned unless N·bits < 8 (then the shift below the byte is <= 7 and
  // N·bits + 7 <= 32 still fits one word).
  return f.bits == 8 || N * f.bits + 7 <= 32 || (N * f.bits) % 8 == 0;
}

}  // namespace

// ------------------------------------------------------------ entry points
// (listed in this target's table below)

bool DotMultiImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                  const float* q, size_t qs, int m, float* scores, size_t ss) {
  const int N = static_cast<int>(hn::Lanes(DF()));
  if (N < 4) return false;
#if HQEKV_WIDE_MULTI
  if (DotRowsWideOk(f, codes, meta, T, D, q, qs, m, scores, ss)) return true;
  if (PerChannelWideOk(f, T, D))
    return DotPerChannelWide(f, codes, meta, D, q, qs, m, scores, ss), true;
#endif
  if (PerChannelMulti(f, T, D, N))
    return DotPerChannel(f, codes, meta, D, q, qs, m, scores, ss), true;
  if (RowsFast(f, D, N)) return DotRows(f, codes, meta, T, D, q, qs, m, scores, ss), true;
  return false;
}

bool AxpyMultiImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   const float* w, size_t ws, int m, float* acc, size_t as) {
  const int N = static_cast<int>(hn::Lanes(DF()));
  if (N < 4) return false;
#if HQEKV_WIDE_MULTI
  if (AxpyRowsWideOk(f, codes, meta, T, D, w, ws, m, acc, as)) return true;
  if (PerTokenWideOk(f, D)) return AxpyPerTokenWide(f, codes, meta, T, D, w, ws, m, acc, as), true;
#endif
  if (PerChannelMulti(f, T, D, N))
    return AxpyPerChannel(f, codes, meta, D, w, ws, m, acc, as), true;
  if (RowsFast(f, D, N)) return AxpyRows(f, codes, meta, T, D, w, ws, m, acc, as), true;
  return false;
}

// Softmax with -inf masking; exp by Highway's polynomial (<= 1 ulp). Full
// vector width (16 lanes on AVX-512): no code fetch here, so the 8-lane cap of
// DF does not apply; the exp per lane is the same, only the sum's order moves.
bool SoftmaxRowImpl(float* x, int n, float* max_out, float* sum_out, bool normalize) {
  using DS = hn::ScalableTag<float>;
  const DS ds;
  using VS = hn::Vec<DS>;
  const int N = static_cast<int>(hn::Lanes(ds));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  VS mv = hn::Set(ds, neg_inf);
  int i = 0;
  for (; i + N <= n; i += N) mv = hn::Max(mv, hn::LoadU(ds, x + i));
  float mx = hn::GetLane(hn::MaxOfLanes(ds, mv));
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  if (max_out) *max_out = mx;
  if (sum_out) *sum_out = 0.0f;
  if (mx == neg_inf) {
    std::fill(x, x + n, 0.0f);
    return false;
  }
  const VS m = hn::Set(ds, mx), ninf = hn::Set(ds, neg_inf), lo = hn::Set(ds, -100.0f);
  VS sv = hn::Zero(ds);
  i = 0;
  for (; i + N <= n; i += N) {
    const VS v = hn::LoadU(ds, x + i);
    // exp(-100) ~ 4e-44 is a denormal: as good as 0 next to exp(0) = 1, and
    // keeps the polynomial inside its range; masked lanes are exactly 0.
    const VS e = hn::IfThenZeroElse(hn::Eq(v, ninf), hn::Exp(ds, hn::Max(hn::Sub(v, m), lo)));
    hn::StoreU(e, ds, x + i);
    sv = hn::Add(sv, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(ds, sv));
  for (; i < n; ++i) {
    x[i] = x[i] == neg_inf ? 0.0f : std::exp(x[i] - mx);
    sum += x[i];
  }
  if (sum_out) *sum_out = sum;
  if (!normalize) return true;
  const VS inv = hn::Set(ds, 1.0f / sum);
  i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(ds, x + i), inv), ds, x + i);
  for (; i < n; ++i) x[i] *= 1.0f / sum;
  return true;
}

// fp16 sums += scale * w, F16C conversions (round to nearest even, as
// core/half.h); false on targets without them (the caller runs the oracle).
bool AccumulateF16Impl(uint16_t* sums, const float* w, float scale, int n) {
#if HQEKV_HW_F16
  using DS = hn::ScalableTag<float>;
  const DS ds;
  const hn::Rebind<hwy::float16_t, DS> dh;
  const int N = static_cast<int>(hn::Lanes(ds));
  const auto sv = hn::Set(ds, scale);
  auto* p = reinterpret_cast<hwy::float16_t*>(sums);
  int j = 0;
  for (; j + N <= n; j += N) {
    const auto x =
        hn::Add(hn::PromoteTo(ds, hn::LoadU(dh, p + j)), hn::Mul(sv, hn::LoadU(ds, w + j)));
    hn::StoreU(hn::DemoteTo(dh, x), dh, p + j);
  }
  if (j < n) ref::AccumulateF16(sums + j, w + j, scale, n - j);
  return true;
#else
  return false;
#endif
}

// This target's kernels, one table (exported below).
const MultiQueryTable* MultiQueryTableForTarget() {
  static constexpr MultiQueryTable kTable{
      .dot_multi = &DotMultiImpl,
      .axpy_multi = &AxpyMultiImpl,
      .softmax_row = &SoftmaxRowImpl,
      .accumulate_f16 = &AccumulateF16Impl,
  };
  return &kTable;
}

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::attn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
// Public entry points (attn/multi_query.h).
namespace hqekv::attn {
using namespace ::hqekv::quant;
HWY_EXPORT(MultiQueryTableForTarget);

namespace {
// Looked up per call, not kept in a static: see QuantSimd() in quant/simd.cc.
const MultiQueryTable& MultiQuery() { return *HWY_DYNAMIC_DISPATCH(MultiQueryTableForTarget)(); }
}  // namespace

namespace {
// The multi-query kernels of every kind they cover; false: none for this
// format / shape (the caller runs the single-query entry points per row).
bool DotMulti(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
              const float* q, size_t q_stride, int m, float* scores, size_t s_stride) {
  if (MultiQuery().dot_multi(f, codes, meta, T, D, q, q_stride, m, scores, s_stride)) return true;
  // llama.cpp blocks without a full-width kernel: ggml_block_simd.cc's.
  return IsGgmlBlock(f.kind) &&
         simd::DotMultiGgmlBlock(f, codes, meta, T, D, q, q_stride, m, scores, s_stride);
}
bool AxpyMulti(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
               const float* w, size_t w_stride, int m, float* acc, size_t a_stride) {
  // u3: its own per-token kernel (quant/simd.cc), bit-identical to m single rows.
  if (f.kind == Kind::kUniform3) {
    return simd::AxpyMultiUniform3(f, codes, meta, T, D, w, w_stride, m, acc, a_stride);
  }
  if (MultiQuery().axpy_multi(f, codes, meta, T, D, w, w_stride, m, acc, a_stride)) return true;
  return IsGgmlBlock(f.kind) &&
         simd::AxpyMultiGgmlBlock(f, codes, meta, T, D, w, w_stride, m, acc, a_stride);
}
}  // namespace

void DotChunkMulti(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   const float* q, size_t q_stride, int m, float* scores, size_t s_stride) {
  if (m <= 0) return;
  // f32 and u3 have no multi-query K kernel.
  if (f.kind != Kind::kF32 && f.kind != Kind::kUniform3 &&
      DotMulti(f, codes, meta, T, D, q, q_stride, m, scores, s_stride)) {
    return;
  }
  for (int h = 0; h < m; ++h)
    DotChunk(f, codes, meta, T, D, q + h * q_stride, scores + h * s_stride);
}

void AxpyChunkMulti(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    const float* w, size_t w_stride, int m, float* acc, size_t a_stride) {
  if (m <= 0) return;
  if (f.kind != Kind::kF32 && AxpyMulti(f, codes, meta, T, D, w, w_stride, m, acc, a_stride)) {
    return;
  }
  for (int h = 0; h < m; ++h) AxpyChunk(f, codes, meta, T, D, w + h * w_stride, acc + h * a_stride);
}

bool SoftmaxRow(float* x, int n) { return MultiQuery().softmax_row(x, n, nullptr, nullptr, true); }

void AccumulateF16(uint16_t* sums, const float* w, float scale, int n) {
  if (n <= 0) return;
  if (!MultiQuery().accumulate_f16(sums, w, scale, n)) {
    ref::AccumulateF16(sums, w, scale, n);
  }
}
bool SoftmaxRowStats(float* x, int n, float* max, float* sum) {
  return MultiQuery().softmax_row(x, n, max, sum, true);
}
bool SoftmaxRowUnnormalized(float* x, int n, float* sum) {
  return MultiQuery().softmax_row(x, n, nullptr, sum, false);
}

}  // namespace hqekv::attn
#endif  // HWY_ONCE
