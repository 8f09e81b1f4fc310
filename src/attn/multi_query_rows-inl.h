// Full-width (up to 16 float lanes) multi-query kernels for the row-major
// fp16, 8-bit and llama.cpp-block layouts: fp16, int8 (fp16 scale per token), fp8 E4M3 /
// E5M2 (fp16 scale per chunk) and q8_0 / q4_0 / q4_1 / q5_0 / q5_1 (blocks of
// 32 values along D, fp16 scale [and minimum] per block). Included by
// attn/multi_query.cc once per SIMD target, after multi_query_wide-inl.h
// (uses its DW tag, kWideLanes and HQEKV_WIDE_MULTI) and ForRowBlocks.
//
// The query heads of a GQA group share every decoded vector: N values of one
// token row feed MB <= kHeads FMAs. What makes them cheaper than the 8-lane
// row kernels of multi_query.cc (and the per-row decode of ggml_block_simd.cc):
//   - 16 lanes on AVX-512;
//   - a per-token or per-chunk scale s is applied once per score
//     (score = s · q·c) and folded into the weight for values
//     (acc += (w · s) · c), not once per decoded vector;
//   - fp8 decodes through the hardware fp16 conversion: an E5M2 byte is the
//     high byte of the fp16 with the same value, and the E4M3 bits shifted
//     into fp16's layout give value · 2^-8 exactly (subnormals included; the
//     2^8 is folded into the chunk scale); codes above the largest finite one
//     (NaN / inf, never written by the quantizer) are clamped to it, as the
//     reference table decodes them;
//   - the MB dot products of one token are reduced together (two interleave
//     steps and a fold of the 128-bit blocks) instead of one horizontal sum
//     per head.
// Numerics: sums of the same products in another order, scales applied
// after instead of before the sum: within multi_query.h's tolerance of the
// oracle (ref::DotChunkMulti / AxpyChunkMulti).

#if defined(HQEKV_QUANT_MULTI_QUERY_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HQEKV_QUANT_MULTI_QUERY_ROWS_INL_H_
#undef HQEKV_QUANT_MULTI_QUERY_ROWS_INL_H_
#else
#define HQEKV_QUANT_MULTI_QUERY_ROWS_INL_H_
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

#if HQEKV_WIDE_MULTI

// ----------------------------------------------------------- row decoders
// Each gives N = kWideLanes values of token t from channel d (d a multiple
// of N) and the token's scale (applied by the kernels after the dot / into
// the weights).

struct Int8RowDec {
  HQEKV_QUANT_TAGS(DW);
  const uint8_t* codes;
  int D;
  const float* s;  // [T] per-token scales
  HWY_INLINE VF operator()(int t, int d) const {
    return LoadInt8(DF(), codes + static_cast<size_t>(t) * D + d);
  }
  HWY_INLINE float Scale(int t) const { return s[t]; }
  // Scales of tokens t .. t + 3.
  HWY_INLINE hn::Vec<hn::FixedTag<float, 4>> Scale4(int t) const {
    return hn::LoadU(hn::FixedTag<float, 4>(), s + t);
  }
};

// fp16 rows (the plain cache's pages, the fp16 tier and the residual of a
// compressed store): the hardware conversion, 16 lanes, no scale. Through
// the 8-lane row kernel of multi_query.cc (one horizontal sum per token and
// row) an fp16 decode step at 32K read 6 GB/s, a quarter of the machine's
// read bandwidth (bench_attention DecodeAttention).
struct F16RowDec {
  HQEKV_QUANT_TAGS(DW);
  const uint8_t* codes;
  int D;
  HWY_INLINE VF operator()(int t, int d) const {
    return LoadF16V(DF(), codes + 2 * (static_cast<size_t>(t) * D + d));
  }
  HWY_INLINE float Scale(int) const { return 1.0f; }
  HWY_INLINE hn::Vec<hn::FixedTag<float, 4>> Scale4(int) const {
    return hn::Set(hn::FixedTag<float, 4>(), 1.0f);
  }
};

// fp8 -> float through fp16 bits. kE4M3: the byte sign-extended to 16 bits
// and shifted left by 7, bit 14 (a copy of the sign) cleared, is the fp16 of
// value · 2^-8 (sign at bit 15); E5M2: code << 8 is the fp16 of the value.
// Magnitudes above the largest finite code (NaN / inf) are clamped to it
// without splitting off the sign: a signed 16-bit min clamps the positive
// codes (the negative ones are below any positive), an unsigned min the
// negative ones (0x8000 | mag, above every positive). 4-5 operations per 2N
// codes (7 with the sign taken apart). Pair decodes 2N codes with one set of
// 16-bit operations (half the work per value of two single decodes).
template <bool kE4M3>
struct Fp8RowDec {
  HQEKV_QUANT_TAGS(DW);
  const uint8_t* codes;
  int D;
  float s;  // chunk scale (E4M3: times 2^8)
  // fp16 bits of the n codes at p (n = lanes of D16).
  template <class D16>
  static HWY_INLINE hn::Vec<D16> Bits(D16 d16, const uint8_t* p) {
    const hn::RebindToSigned<D16> di16;
    constexpr uint16_t kMaxMag = kE4M3 ? (0x7E << 7) : (0x7B << 8);
    hn::Vec<D16> x;
    if constexpr (kE4M3) {
      const hn::Rebind<int8_t, D16> d8;
      const auto c =
          hn::BitCast(d16, hn::PromoteTo(di16, hn::LoadU(d8, reinterpret_cast<const int8_t*>(p))));
      x = hn::And(hn::ShiftLeft<7>(c), hn::Set(d16, 0xBF80));
    } else {
      const hn::Rebind<uint8_t, D16> d8;
      x = hn::ShiftLeft<8>(hn::PromoteTo(d16, hn::LoadU(d8, p)));
    }
    x = hn::BitCast(d16,
                    hn::Min(hn::BitCast(di16, x), hn::Set(di16, static_cast<int16_t>(kMaxMag))));
    return hn::Min(x, hn::Set(d16, static_cast<uint16_t>(0x8000 | kMaxMag)));
  }
  HWY_INLINE VF operator()(int t, int d) const {
    const hn::Rebind<uint16_t, DF> d16;
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(DF(), hn::BitCast(dh, Bits(d16, codes + static_cast<size_t>(t) * D + d)));
  }
  HWY_INLINE void Pair(int t, int d, VF* x0, VF* x1) const {
    const hn::Repartition<uint16_t, DF> d16;  // 2N lanes
    const hn::Rebind<hwy::float16_t, DF> dh;
    const hn::Half<decltype(d16)> d16h;
    const auto b = Bits(d16, codes + static_cast<size_t>(t) * D + d);
    *x0 = hn::PromoteTo(DF(), hn::BitCast(dh, hn::LowerHalf(d16h, b)));
    *x1 = hn::PromoteTo(DF(), hn::BitCast(dh, hn::UpperHalf(d16h, b)));
  }
  HWY_INLINE float Scale(int) const { return s; }
  HWY_INLINE hn::Vec<hn::FixedTag<float, 4>> Scale4(int) const {
    return hn::Set(hn::FixedTag<float, 4>(), s);
  }
};

// The 2N values of token t from channel d: the decoder's Pair when it has
// one, else two single decodes.
template <class Dec, class V>
HWY_INLINE void DecodePair(const Dec& dec, int t, int d, V* x0, V* x1) {
  if constexpr (requires { dec.Pair(t, d, x0, x1); }) {
    dec.Pair(t, d, x0, x1);
  } else {
    *x0 = dec(t, d);
    *x1 = dec(t, d + kWideLanes);
  }
}

// llama.cpp blocks: x = level · d + z per block (z = -zero · d, or the
// minimum m of the _1 types); d and z decoded once per chunk.
template <int kBits, bool kMin, int kZero>
struct BlockRowDec {
  HQEKV_QUANT_TAGS(DW);
  static constexpr int kCodeBytes = kBits == 8 ? 32 : 16;
  const uint8_t* codes;
  const uint8_t* masks;  // q5: [nb] 32-bit high-bit masks
  int per_row;           // blocks per token
  const float* d;        // [nb]
  const float* z;        // [nb]
  HWY_INLINE VF operator()(int t, int ch) const {
    const DF df;
    const DI di;
    const int k = t * per_row + ch / kBlockValues;
    const int j0 = ch % kBlockValues;
    const uint8_t* blk = codes + static_cast<size_t>(k) * kCodeBytes;
    const VI level = BlockCodes<kBits>(di, blk, kBits == 5 ? Load32(masks + 4 * k) : 0u, j0);
    const VF x = hn::ConvertTo(df, level);
    if constexpr (kMin || kZero != 0) return hn::MulAdd(x, hn::Set(df, d[k]), hn::Set(df, z[k]));
    return hn::Mul(x, hn::Set(df, d[k]));
  }
  HWY_INLINE float Scale(int) const { return 1.0f; }
  HWY_INLINE hn::Vec<hn::FixedTag<float, 4>> Scale4(int) const {
    return hn::Set(hn::FixedTag<float, 4>(), 1.0f);
  }
};

// -------------------------------------------------------------- kernels

// The 128-bit blocks of v added together (4 lanes).
template <class D>
HWY_INLINE hn::Vec<hn::FixedTag<float, 4>> FoldBlocks(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    return FoldBlocks(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    (void)d;
    return v;
  }
}

// Sums of the lanes of s[0..3], in lanes 0..3 of the result.
HWY_INLINE hn::Vec<hn::FixedTag<float, 4>> SumOfLanes4(const hn::Vec<DW>* s) {
  const DW df;
  const hn::Repartition<uint64_t, DW> d64;
  const auto a01 =
      hn::Add(hn::InterleaveLower(df, s[0], s[1]), hn::InterleaveUpper(df, s[0], s[1]));
  const auto a23 =
      hn::Add(hn::InterleaveLower(df, s[2], s[3]), hn::InterleaveUpper(df, s[2], s[3]));
  const auto b01 = hn::BitCast(d64, a01), b23 = hn::BitCast(d64, a23);
  // [S0, S1, S2, S3] partial sums in each 128-bit block.
  const auto v = hn::Add(hn::BitCast(df, hn::InterleaveLower(d64, b01, b23)),
                         hn::BitCast(df, hn::InterleaveUpper(d64, b01, b23)));
  return FoldBlocks(df, v);
}

// scores[h][t] = Scale(t) · sum_d q[h][d] x[t][d] for MB rows; two FMA
// chains per row, the MB sums of a token reduced together.
// Tokens [t_begin, T).
template <int MB, class Dec>
void DotRowsWidePass(const Dec& dec, int t_begin, int T, int D, const float* q, size_t qs,
                     float* scores, size_t ss) {
  HQEKV_QUANT_TAGS(DW);
  constexpr int N = kWideLanes;
  const DF df;
  const hn::FixedTag<float, 4> d4;
  for (int t = t_begin; t < T; ++t) {
    VF p0[MB], p1[MB];
    for (int h = 0; h < MB; ++h) p0[h] = p1[h] = hn::Zero(df);
    int d = 0;
    for (; d + 2 * N <= D; d += 2 * N) {
      VF x0, x1;
      DecodePair(dec, t, d, &x0, &x1);
      for (int h = 0; h < MB; ++h) {
        p0[h] = hn::MulAdd(x0, hn::LoadU(df, q + h * qs + d), p0[h]);
        p1[h] = hn::MulAdd(x1, hn::LoadU(df, q + h * qs + d + N), p1[h]);
      }
    }
    if (d < D) {
      const VF x0 = dec(t, d);
      for (int h = 0; h < MB; ++h) p0[h] = hn::MulAdd(x0, hn::LoadU(df, q + h * qs + d), p0[h]);
    }
    VF s[4];
    for (int h = 0; h < 4; ++h) s[h] = h < MB ? hn::Add(p0[h], p1[h]) : hn::Zero(df);
    alignas(16) float r[4];
    hn::Store(hn::Mul(SumOfLanes4(s), hn::Set(d4, dec.Scale(t))), d4, r);
    for (int h = 0; h < MB; ++h) scores[h * ss + t] = r[h];
  }
}

// The same for four tokens at a time (AVX-512: 32 registers hold the 4 x 4
// accumulators, the 4 + 4 decoded vectors and the query pair): one FMA chain
// per (row, token) instead of two per row for one token, so 16 independent
// chains hide the FMA latency that the one-token pass (8 chains, each 2D/N
// deep, then a dependent reduction) exposed. Kernel alone (int8, 32 x 128,
// 4 rows, in L2): 453 -> 247 ns per chunk; fp8 E4M3 464 -> 315 ns
// (bench_attention DecodeAttention). The 4 sums of a row are reduced together and
// scaled by the 4 token scales in one vector.
template <int MB, class Dec>
void DotRowsWide4Tokens(const Dec& dec, int T, int D, const float* q, size_t qs, float* scores,
                        size_t ss) {
  HQEKV_QUANT_TAGS(DW);
  constexpr int N = kWideLanes;
  const DF df;
  const hn::FixedTag<float, 4> d4;
  int t0 = 0;
  for (; t0 + 4 <= T; t0 += 4) {
    VF acc[MB][4];
    for (int h = 0; h < MB; ++h) {
      for (int k = 0; k < 4; ++k) acc[h][k] = hn::Zero(df);
    }
    int d = 0;
    for (; d + 2 * N <= D; d += 2 * N) {
      VF x0[4], x1[4];
      for (int k = 0; k < 4; ++k) DecodePair(dec, t0 + k, d, &x0[k], &x1[k]);
      for (int h = 0; h < MB; ++h) {
        const VF q0 = hn::LoadU(df, q + h * qs + d);
        const VF q1 = hn::LoadU(df, q + h * qs + d + N);
        for (int k = 0; k < 4; ++k) {
          acc[h][k] = hn::MulAdd(x0[k], q0, acc[h][k]);
          acc[h][k] = hn::MulAdd(x1[k], q1, acc[h][k]);
        }
      }
    }
    if (d < D) {
      VF x0[4];
      for (int k = 0; k < 4; ++k) x0[k] = dec(t0 + k, d);
      for (int h = 0; h < MB; ++h) {
        const VF q0 = hn::LoadU(df, q + h * qs + d);
        for (int k = 0; k < 4; ++k) acc[h][k] = hn::MulAdd(x0[k], q0, acc[h][k]);
      }
    }
    const auto sc = dec.Scale4(t0);
    for (int h = 0; h < MB; ++h) {
      hn::StoreU(hn::Mul(SumOfLanes4(acc[h]), sc), d4, scores + h * ss + t0);
    }
  }
  if (t0 < T) DotRowsWidePass<MB>(dec, t0, T, D, q, qs, scores, ss);
}

// acc[h][d0 + v·N + lane] += sum_t w[h][t] x[t][...] for V vectors from d0,
// MB rows (w already times the token scales); tokens inner.
template <int MB, int V, class Dec>
HWY_INLINE void AxpyRowsWideBlock(const Dec& dec, int T, const float* w, size_t ws, float* acc,
                                  size_t as, int d0) {
  HQEKV_QUANT_TAGS(DW);
  constexpr int N = kWideLanes;
  const DF df;
  VF s[MB][V];
  for (int h = 0; h < MB; ++h) {
    for (int v = 0; v < V; ++v) s[h][v] = hn::LoadU(df, acc + h * as + d0 + v * N);
  }
  for (int t = 0; t < T; ++t) {
    VF x[V];
    int v = 0;
    for (; v + 2 <= V; v += 2) DecodePair(dec, t, d0 + v * N, &x[v], &x[v + 1]);
    if (v < V) x[v] = dec(t, d0 + v * N);
    for (int h = 0; h < MB; ++h) {
      const VF wv = hn::Set(df, w[h * ws + t]);
      for (int v = 0; v < V; ++v) s[h][v] = hn::MulAdd(x[v], wv, s[h][v]);
    }
  }
  for (int h = 0; h < MB; ++h) {
    for (int v = 0; v < V; ++v) hn::StoreU(s[h][v], df, acc + h * as + d0 + v * N);
  }
}

template <class Dec>
void DotRowsWide(const Dec& dec, int T, int D, const float* q, size_t qs, int m, float* scores,
                 size_t ss) {
  ForRowBlocks<kHeads>(m, [&](auto mb_c, int h0) {
    constexpr int mb = decltype(mb_c)::value;
    if constexpr (kVecs == 4) {  // 32 vector registers
      DotRowsWide4Tokens<mb>(dec, T, D, q + h0 * qs, qs, scores + h0 * ss, ss);
    } else {
      DotRowsWidePass<mb>(dec, 0, T, D, q + h0 * qs, qs, scores + h0 * ss, ss);
    }
  });
}

// kScaled: the decoder has a token / chunk scale to fold into the weights.
template <bool kScaled, class Dec>
void AxpyRowsWide(const Dec& dec, int T, int D, const float* w, size_t ws, int m, float* acc,
                  size_t as) {
  constexpr int N = kWideLanes;
  ForRowBlocks<kHeads>(m, [&](auto mb_c, int h0) {
    constexpr int mb = decltype(mb_c)::value;
    const float* wh = w + h0 * ws;
    size_t whs = ws;
    if constexpr (kScaled) {  // w[h][t] · Scale(t), once per chunk
      float* sw = Scratch(3, static_cast<size_t>(mb) * T);
      for (int h = 0; h < mb; ++h) {
        for (int t = 0; t < T; ++t) sw[h * T + t] = wh[h * ws + t] * dec.Scale(t);
      }
      wh = sw;
      whs = static_cast<size_t>(T);
    }
    float* ah = acc + h0 * as;
    int d0 = 0;
    for (; d0 + kVecs * N <= D; d0 += kVecs * N)
      AxpyRowsWideBlock<mb, kVecs>(dec, T, wh, whs, ah, as, d0);
    for (; d0 < D; d0 += N) AxpyRowsWideBlock<mb, 1>(dec, T, wh, whs, ah, as, d0);
  });
}

// Calls fn(decoder, scaled_c) with the decoder of f's chunk; false (fn not
// called) for kinds and shapes without one.
template <class Fn>
HWY_INLINE bool WithRowDecoder(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                               int D, const Fn& fn) {
  if (D % kWideLanes != 0) return false;
  if (f.kind == Kind::kF16) {
    fn(F16RowDec{codes, D}, std::false_type());
    return true;
  }
  if (f.kind == Kind::kInt8) {
    float* s = Scratch(0, static_cast<size_t>(T));
    LoadPlane(meta, T, s);
    fn(Int8RowDec{codes, D, s}, std::true_type());
    return true;
  }
  if (f.kind == Kind::kFp8E4M3 || f.kind == Kind::kFp8E5M2) {
    const float s = F16ToF32(LoadF16(meta));
    if (f.kind == Kind::kFp8E4M3) {
      fn(Fp8RowDec<true>{codes, D, s * 256.0f}, std::true_type());
    } else {
      fn(Fp8RowDec<false>{codes, D, s}, std::true_type());
    }
    return true;
  }
  if (!IsGgmlBlock(f.kind) || D % kBlockValues != 0) return false;
  const BlockLayout lay = BlockLayoutOf(f.kind);
  const int per_row = D / kBlockValues;
  const int nb = T * per_row;
  float* d = Scratch(0, static_cast<size_t>(nb));
  float* z = Scratch(1, static_cast<size_t>(nb));
  LoadPlane(meta, nb, d);
  if (lay.has_min) {
    LoadPlane(meta + 2 * static_cast<size_t>(nb), nb, z);
  } else {
    for (int k = 0; k < nb; ++k) z[k] = -static_cast<float>(lay.zero) * d[k];
  }
  const uint8_t* masks = meta + lay.mask_offset(static_cast<size_t>(nb));
  switch (f.kind) {
    case Kind::kQ8_0:
      fn(BlockRowDec<8, false, 0>{codes, masks, per_row, d, z}, std::false_type());
      break;
    case Kind::kQ4_0:
      fn(BlockRowDec<4, false, 8>{codes, masks, per_row, d, z}, std::false_type());
      break;
    case Kind::kQ4_1:
      fn(BlockRowDec<4, true, 0>{codes, masks, per_row, d, z}, std::false_type());
      break;
    case Kind::kQ5_0:
      fn(BlockRowDec<5, false, 16>{codes, masks, per_row, d, z}, std::false_type());
      break;
    default:
      fn(BlockRowDec<5, true, 0>{codes, masks, per_row, d, z}, std::false_type());
      break;
  }
  return true;
}

// Entry points for multi_query.cc: false when the kind / shape has no
// full-width row kernel.
bool DotRowsWideOk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   const float* q, size_t qs, int m, float* scores, size_t ss) {
  return WithRowDecoder(f, codes, meta, T, D, [&](const auto& dec, auto) {
    DotRowsWide(dec, T, D, q, qs, m, scores, ss);
  });
}
bool AxpyRowsWideOk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    const float* w, size_t ws, int m, float* acc, size_t as) {
  return WithRowDecoder(f, codes, meta, T, D, [&](const auto& dec, auto scaled_c) {
    AxpyRowsWide<decltype(scaled_c)::value>(dec, T, D, w, ws, m, acc, as);
  });
}

#endif  // HQEKV_WIDE_MULTI

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace hqekv::attn
HWY_AFTER_NAMESPACE();

#endif  // HQEKV_QUANT_MULTI_QUERY_ROWS_INL_H_ toggle
