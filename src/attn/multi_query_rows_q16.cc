// Int16 decode-attention kernels over int8 chunks (attn/multi_query_rows_q16.h;
// q8_0: attn/multi_query_rows_q8_0.cc). K: the query rows rounded to int16 once per
// query and KV head (PrepareInt16Query: a decode step reuses them for every
// chunk; 195 -> 130 ns per 32 x 128 chunk and 4 rows, bench_attention), then dotted
// with the sign-extended codes by vpdpwssd (32 products per
// instruction against 16 for an fp32 FMA, and one vpmovsxbw per 32 codes
// instead of a vpmovsxbd and a vcvtdq2ps per 16); four tokens x up to four
// query rows per pass: 16 independent int32 accumulators, the 4 sums of a row
// reduced together and scaled by the 4 token scales in one vector. V: each
// weight row times the token scales rounded to int16 once per call, two
// tokens' codes paired into int16 lanes (vpermt2b + vpsraw) and accumulated
// by vpdpwssd. Oracles: ref::DotRowsInt16Query / ref::AxpyRowsInt16Weights
// (multi_query_rows_q16_ref.cc), bit-identical.
//
// Compiled once with the AVX3_DL instruction sets plus AVX-512 VNNI
// (attn/single_isa.h; GCC, x86-64) and run only where the CPU has them:
// elsewhere the entry points report "no kernel" and the caller keeps the fp32
// kernels of attn/multi_query_rows-inl.h.
#include <algorithm>
#include <cstring>

#include <hwy/highway.h>  // the static target's WithRowBlock (attn/row_blocks-inl.h)

#include "quant/internal.h"
#include "attn/rows_q16_shared.h"
#include "attn/single_isa.h"
#include "attn/multi_query_rows_q16.h"
#include "attn/prefetch.h"
#include "attn/row_blocks-inl.h"  // WithRowBlock

#if HQEKV_SINGLE_ISA
HQEKV_SINGLE_ISA_BEGIN(",avx512vnni")
namespace hqekv::attn::rows_q16 {
using namespace ::hqekv::quant;
namespace {
using HWY_NAMESPACE::WithRowBlock;

// The 16 int32 lanes of each of v[0..3] summed, in lanes 0..3: pairs
// interleaved, then 64-bit halves, then the 128-bit blocks folded.
HWY_INLINE __m128i Sum4(const __m512i v[4]) {
  const __m512i a01 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]), _mm512_unpackhi_epi32(v[0], v[1]));
  const __m512i a23 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]), _mm512_unpackhi_epi32(v[2], v[3]));
  const __m512i x =
      _mm512_add_epi32(_mm512_unpacklo_epi64(a01, a23), _mm512_unpackhi_epi64(a01, a23));
  const __m512i y = _mm512_add_epi32(x, _mm512_shuffle_i32x4(x, x, 0x4E));  // blocks 2,3 onto 0,1
  const __m512i z = _mm512_add_epi32(y, _mm512_shuffle_i32x4(y, y, 0xB1));  // block 1 onto 0
  return _mm512_castsi512_si128(z);
}

// 32 codes of token row p from channel d, as int16.
HWY_INLINE __m512i Codes32(const int8_t* p) {
  return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// scores[h][t] for MB <= 4 rows (qi [MB][D], sq [MB]), tokens [0, T).
// Not inlined: inlined into DotInt16PreparedImpl, GCC 12 kept the 16
// accumulators in memory (a load and a store around every vpdpwssd; 310
// instead of 195 ns per 32 x 128 chunk and 4 rows).
template <int MB>
HWY_NOINLINE const uint8_t* DotBlock(const int8_t* codes, const float* s, int T, int D,
                                     const int16_t* qi, const float* sq, float* scores, size_t ss,
                                     const uint8_t* pf, const uint8_t* const pf_end) {
  int t0 = 0;
  for (; t0 + 4 <= T; t0 += 4) {
    pf = attn::RequestLines(pf, pf_end, 9);  // 8 passes per 32-token chunk: 72 >= 68 lines
    __m512i acc[MB][4];
    for (int h = 0; h < MB; ++h) {
      for (int k = 0; k < 4; ++k) acc[h][k] = _mm512_setzero_si512();
    }
    const int8_t* row = codes + static_cast<size_t>(t0) * D;
    for (int d = 0; d < D; d += 32) {
      __m512i x[4];
      for (int k = 0; k < 4; ++k) x[k] = Codes32(row + static_cast<size_t>(k) * D + d);
      for (int h = 0; h < MB; ++h) {
        const __m512i qv = _mm512_loadu_si512(qi + h * D + d);
        for (int k = 0; k < 4; ++k) DpWssd(acc[h][k], x[k], qv);
      }
    }
    const __m128 s4 = _mm_loadu_ps(s + t0);
    for (int h = 0; h < MB; ++h) {
      const __m128 sum = _mm_cvtepi32_ps(Sum4(acc[h]));
      _mm_storeu_ps(scores + h * ss + t0, _mm_mul_ps(sum, _mm_mul_ps(_mm_set1_ps(sq[h]), s4)));
    }
  }
  for (; t0 < T; ++t0) {
    __m512i acc[MB];
    for (int h = 0; h < MB; ++h) acc[h] = _mm512_setzero_si512();
    const int8_t* row = codes + static_cast<size_t>(t0) * D;
    for (int d = 0; d < D; d += 32) {
      const __m512i x = Codes32(row + d);
      for (int h = 0; h < MB; ++h) DpWssd(acc[h], x, _mm512_loadu_si512(qi + h * D + d));
    }
    for (int h = 0; h < MB; ++h) {
      scores[h * ss + t0] = static_cast<float>(_mm512_reduce_add_epi32(acc[h])) * (sq[h] * s[t0]);
    }
  }
  return pf;
}

// ------------------------------------------------------------- V (weights)

// Rows h in [0, MB) of w (row h at w + h·ws) times the token scales rounded
// to int16 (row h at wi + h·kMaxT, [0, T)) with steps su[h]; false when some
// product is not finite. The rows go through together, as q8_0's
// (QuantizeBlockWeightRows): one at a time, each row's chain (max, its
// reduction, two divisions, then the rounding) waited on the previous one.
template <int MB>
bool QuantizeWeightRows(const float* w, size_t ws, const float* s, int T, int16_t* wi, float* su) {
  __m512 u[MB][4];
  __m512 umax[MB];
  for (int h = 0; h < MB; ++h) umax[h] = _mm512_setzero_ps();
  __mmask16 bad = 0;
  const int nv = (T + 15) / 16;
  for (int v = 0; v < nv; ++v) {
    const int n = std::min(16, T - 16 * v);
    const __mmask16 k = static_cast<__mmask16>((1u << n) - 1);
    const __m512 sv = _mm512_maskz_loadu_ps(k, s + 16 * v);
    for (int h = 0; h < MB; ++h) {
      u[h][v] = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, w + h * ws + 16 * v), sv);
      bad |= _mm512_fpclass_ps_mask(u[h][v], 0x99);
      umax[h] = _mm512_max_ps(umax[h], _mm512_abs_ps(u[h][v]));
    }
  }
  if (bad != 0) return false;
  for (int h = 0; h < MB; ++h) {
    const float mx = _mm512_reduce_max_ps(umax[h]);
    su[h] = mx > 0.0f ? mx / 32767.0f : 0.0f;
    const __m512 inv = _mm512_set1_ps(mx > 0.0f ? 32767.0f / mx : 0.0f);
    for (int v = 0; v < nv; ++v) {
      const __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(u[h][v], inv));  // MXCSR: half to even
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(wi + h * kMaxT + 16 * v),
                          _mm512_cvtepi32_epi16(r));
    }
  }
  return true;
}

// acc[h][d0 .. d0 + 64) for MB <= 4 rows (wi [MB][kMaxT], su [MB]).
// Not inlined and fully unrolled, as AxpyBlockQ8: otherwise GCC 12 kept the
// 16 sums in memory (a load and a store around every vpdpwssd) once the
// rows were rounded together beside it.
template <int MB>
HWY_NOINLINE const uint8_t* AxpyBlock(const int8_t* codes, int T, int D, int d0, const int16_t* wi,
                                      const float* su, const __m512i ctl[4], float* acc, size_t as,
                                      const uint8_t* pf, const uint8_t* const pf_end) {
  __m512i sum[MB][4];
#pragma GCC unroll 4
  for (int h = 0; h < MB; ++h) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) sum[h][j] = _mm512_setzero_si512();
  }
  for (int t = 0; t < T; t += 2) {
    pf = attn::RequestLines(pf, pf_end, 3);  // 16 pairs x 2 column blocks per 32 x 128 chunk
    const __m512i a = _mm512_loadu_si512(codes + static_cast<size_t>(t) * D + d0);
    const __m512i b = _mm512_loadu_si512(codes + static_cast<size_t>(t + 1) * D + d0);
    __m512i x[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) x[j] = _mm512_srai_epi16(_mm512_permutex2var_epi8(a, ctl[j], b), 8);
#pragma GCC unroll 4
    for (int h = 0; h < MB; ++h) {
      int32_t pair;
      std::memcpy(&pair, wi + h * kMaxT + t, 4);
      const __m512i wp = _mm512_set1_epi32(pair);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) DpWssd(sum[h][j], x[j], wp);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < MB; ++h) {
    const __m512 sv = _mm512_set1_ps(su[h]);
    float* ah = acc + h * as + d0;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      _mm512_storeu_ps(ah + 16 * j, _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[h][j]), sv,
                                                    _mm512_loadu_ps(ah + 16 * j)));
    }
  }
  return pf;
}

}  // namespace

// Rows h in [0, m) of q rounded to int16 (qi [m][D], steps sq[m]); false
// when some q is not finite (every row checked before the first is rounded).
bool PrepareInt16Impl(const float* q, size_t qs, int m, int D, int16_t* qi, float* sq) {
  if (m <= 0 || D < 32 || D > kMaxD || D % 32 != 0) return false;
  if (m > 1 && !AllFinite(q, qs, m, D)) return false;
  for (int h = 0; h < m; ++h) {
    if (!QuantizeRow(q + h * qs, D, qi + static_cast<size_t>(h) * D, sq + h)) return false;
  }
  return true;
}

bool DotInt16PreparedImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                          const int16_t* qi, const float* sq, int m, float* scores, size_t ss,
                          attn::PrefetchLines* ahead) {
  if (m <= 0 || !Int16QueryRowsApply(f, T, D)) return false;
  alignas(64) float s[kMaxT];
  ScalesToF32(meta, T, s);
  const int8_t* c = reinterpret_cast<const int8_t*>(codes);
  const uint8_t* pf = ahead ? ahead->next : nullptr;
  const uint8_t* const pf_end = ahead ? ahead->end : nullptr;
  for (int h0 = 0; h0 < m; h0 += 4) {
    const int16_t* qh = qi + static_cast<size_t>(h0) * D;
    float* sc = scores + h0 * ss;
    WithRowBlock<4>(m - h0, [&](auto mb_c) {
      pf = DotBlock<decltype(mb_c)::value>(c, s, T, D, qh, sq + h0, sc, ss, pf, pf_end);
    });
  }
  if (ahead) ahead->next = pf;
  return true;
}

bool AxpyRowsInt16Impl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       const float* w, size_t ws, int m, float* acc, size_t as,
                       attn::PrefetchLines* ahead) {
  if (m <= 0 || m > 16 || !Int16WeightsRowsApply(f, T, D)) return false;
  alignas(64) float s[kMaxT];
  ScalesToF32(meta, T, s);
  alignas(64) int16_t wi[16 * kMaxT];
  float su[16];
  for (int h0 = 0; h0 < m; h0 += 4) {  // every row before any output is written
    const float* wh = w + h0 * ws;
    int16_t* qh = wi + h0 * kMaxT;
    const bool ok = WithRowBlock<4>(m - h0, [&](auto mb_c) {
      return QuantizeWeightRows<decltype(mb_c)::value>(wh, ws, s, T, qh, su + h0);
    });
    if (!ok) return false;
  }
  __m512i ctl[4];
  for (int j = 0; j < 4; ++j) ctl[j] = PairControl(j);
  const int8_t* c = reinterpret_cast<const int8_t*>(codes);
  const uint8_t* pf = ahead ? ahead->next : nullptr;
  const uint8_t* const pf_end = ahead ? ahead->end : nullptr;
  for (int h0 = 0; h0 < m; h0 += 4) {
    const int mb = std::min(4, m - h0);
    const int16_t* wh = wi + h0 * kMaxT;
    float* ah = acc + h0 * as;
    for (int d0 = 0; d0 < D; d0 += 64) {
      WithRowBlock<4>(mb, [&](auto mb_c) {
        pf = AxpyBlock<decltype(mb_c)::value>(c, T, D, d0, wh, su + h0, ctl, ah, as, pf, pf_end);
      });
    }
  }
  if (ahead) ahead->next = pf;
  return true;
}

}  // namespace hqekv::attn::rows_q16
HQEKV_SINGLE_ISA_END
#endif  // HQEKV_SINGLE_ISA

namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace {
using rows_q16::AlignedRows;

// The kernels when this CPU runs them, else nullptr.
struct RowsInt16Kernels {
  bool (*prepare)(const float* q, size_t qs, int m, int D, int16_t* qi, float* sq);
  bool (*dot)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
              const int16_t* qi, const float* sq, int m, float* scores, size_t ss,
              attn::PrefetchLines* ahead);
  bool (*axpy)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
               const float* w, size_t ws, int m, float* acc, size_t as, attn::PrefetchLines* ahead);
};
const RowsInt16Kernels* RowsInt16KernelsHere() {
#if HQEKV_SINGLE_ISA
  static constexpr RowsInt16Kernels kKernels{.prepare = &rows_q16::PrepareInt16Impl,
                                             .dot = &rows_q16::DotInt16PreparedImpl,
                                             .axpy = &rows_q16::AxpyRowsInt16Impl};
  if (attn::Avx3DlRuns()) return &kKernels;
#endif
  return nullptr;
}
}  // namespace

bool Int16QueryRowsApply(const Format& f, int T, int D) {
  return f.kind == Kind::kInt8 && T >= 1 && T <= 64 && D >= 32 && D <= 512 && D % 32 == 0;
}

bool PrepareInt16Query(const float* q, size_t q_stride, int m, int D, Int16Query* out) {
  out->m = 0;
  if (m <= 0 || D < 32 || D > 512 || D % 32 != 0) return false;
  out->qi.resize(static_cast<size_t>(m) * D + 32);
  out->sq.resize(m);
  const RowsInt16Kernels* k = RowsInt16KernelsHere();
  if (k == nullptr || !k->prepare(q, q_stride, m, D, AlignedRows(out->qi), out->sq.data())) {
    return false;
  }
  out->m = m;
  out->D = D;
  return true;
}

bool DotRowsInt16Prepared(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                          const Int16Query& q, float* scores, size_t s_stride,
                          attn::PrefetchLines* ahead) {
  if (q.m <= 0 || !Int16QueryRowsApply(f, T, q.D)) return false;
  const RowsInt16Kernels* k = RowsInt16KernelsHere();
  return k != nullptr && k->dot(f, codes, meta, T, q.D, AlignedRows(q.qi), q.sq.data(), q.m, scores,
                                s_stride, ahead);
}

bool DotRowsInt16Query(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       const float* q, size_t q_stride, int m, float* scores, size_t s_stride) {
  if (m <= 0 || !Int16QueryRowsApply(f, T, D)) return false;
  thread_local Int16Query prepared;
  return PrepareInt16Query(q, q_stride, m, D, &prepared) &&
         DotRowsInt16Prepared(f, codes, meta, T, prepared, scores, s_stride);
}

bool Int16WeightsRowsApply(const Format& f, int T, int D) {
  return f.kind == Kind::kInt8 && T >= 2 && T <= 64 && T % 2 == 0 && D >= 64 && D <= 512 &&
         D % 64 == 0;
}

bool AxpyRowsInt16Weights(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                          const float* w, size_t w_stride, int m, float* acc, size_t a_stride,
                          attn::PrefetchLines* ahead) {
  if (m <= 0 || m > 16 || !Int16WeightsRowsApply(f, T, D)) return false;
  const RowsInt16Kernels* k = RowsInt16KernelsHere();
  return k != nullptr && k->axpy(f, codes, meta, T, D, w, w_stride, m, acc, a_stride, ahead);
}

}  // namespace hqekv::attn
