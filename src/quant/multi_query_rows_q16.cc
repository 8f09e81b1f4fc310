// Int16 decode-attention kernels over int8 chunks
// (quant/multi_query_rows_q16.h). K: the query rows rounded to int16 once per
// call, then dotted with the sign-extended codes by vpdpwssd (32 products per
// instruction against 16 for an fp32 FMA, and one vpmovsxbw per 32 codes
// instead of a vpmovsxbd and a vcvtdq2ps per 16); four tokens x up to four
// query rows per pass: 16 independent int32 accumulators, the 4 sums of a row
// reduced together and scaled by the 4 token scales in one vector. V: each
// weight row times the token scales rounded to int16 once per call, two
// tokens' codes paired into int16 lanes (vpermt2b + vpsraw) and accumulated
// by vpdpwssd. Oracles: ref::DotRowsInt16Query / ref::AxpyRowsInt16Weights
// (multi_query_rows_q16_ref.cc), bit-identical.
//
// Kernel on the AVX3_DL target only (AVX-512 VNNI, compiled in here with
// HWY_WANT_AVX3_DL; GCC, as quant/multi_query_q16.cc): every other target
// reports "no kernel" and the caller keeps the fp32 kernels of
// quant/multi_query_rows-inl.h.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#include <algorithm>
#include <cstring>

#include "quant/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/multi_query_rows_q16.cc"
#include <hwy/foreach_target.h>  // NOLINT: re-includes this file once per target
#include <hwy/highway.h>

#include "quant/internal.h"
#include "quant/multi_query_rows_q16.h"

HWY_BEFORE_NAMESPACE();
#undef HQEKV_RQ16_VNNI
#if HWY_TARGET == HWY_AVX3_DL && !HWY_COMPILER_CLANG
#pragma GCC push_options
#pragma GCC target("avx512vnni")
#define HQEKV_RQ16_VNNI 1
#else
#define HQEKV_RQ16_VNNI 0
#endif
namespace hqekv::quant {
namespace HWY_NAMESPACE {
namespace {

#if HQEKV_RQ16_VNNI
constexpr int kMaxD = 512;
constexpr int kMaxT = 64;

// True when every q[h][d] (m rows of D) is finite (vfpclassps: QNaN 0x01,
// +inf 0x08, -inf 0x10, SNaN 0x80).
bool AllFinite(const float* q, size_t qs, int m, int D) {
  __mmask16 bad = 0;
  for (int h = 0; h < m; ++h) {
    for (int d = 0; d < D; d += 16)
      bad |= _mm512_fpclass_ps_mask(_mm512_loadu_ps(q + h * qs + d), 0x99);
  }
  return bad == 0;
}

// qi[d] = round_half_even(q[d] · 32767 / amax), *sq = amax / 32767. False
// when some q[d] is not finite (qi and sq then meaningless).
bool QuantizeRow(const float* q, int D, int16_t* qi, float* sq) {
  __m512 amax = _mm512_setzero_ps();
  __mmask16 bad = 0;
  for (int d = 0; d < D; d += 16) {
    const __m512 v = _mm512_loadu_ps(q + d);
    bad |= _mm512_fpclass_ps_mask(v, 0x99);
    amax = _mm512_max_ps(amax, _mm512_abs_ps(v));
  }
  if (bad != 0) return false;
  const float mx = _mm512_reduce_max_ps(amax);
  *sq = mx > 0.0f ? mx / 32767.0f : 0.0f;
  const __m512 inv = _mm512_set1_ps(mx > 0.0f ? 32767.0f / mx : 0.0f);
  for (int d = 0; d < D; d += 16) {
    const __m512i r =
        _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(q + d), inv));  // MXCSR: even
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qi + d), _mm512_cvtepi32_epi16(r));
  }
  return true;
}

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

// acc += the int16 pair products of x and y (vpdpwssd), in place: through
// the intrinsic GCC 12 copied the 16 accumulators to other registers and
// spilled some around each instruction (seen in perf annotate).
HWY_INLINE void DpWssd(__m512i& acc, __m512i x, __m512i y) {
  asm("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(y));
}

// 32 codes of token row p from channel d, as int16.
HWY_INLINE __m512i Codes32(const int8_t* p) {
  return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// scores[h][t] for MB <= 4 rows (qi [MB][D], sq [MB]), tokens [0, T).
template <int MB>
void DotBlock(const int8_t* codes, const float* s, int T, int D, const int16_t* qi, const float* sq,
              float* scores, size_t ss) {
  int t0 = 0;
  for (; t0 + 4 <= T; t0 += 4) {
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
}

// ------------------------------------------------------------- V (weights)

// vpermt2b control for 16 channels j·16 .. j·16 + 15 of a 64-byte load of
// token rows a (table bytes 0..63) and b (64..127): word 2i takes a's code of
// channel i in its high byte, word 2i + 1 b's (vpsraw 8 then sign-extends
// each; the low bytes are shifted out).
__m512i PairControl(int j) {
  alignas(64) uint8_t c[64];
  for (int k = 0; k < 64; ++k) {
    const int i = k / 4, pos = k % 4;
    c[k] = static_cast<uint8_t>((pos >= 2 ? 64 : 0) + 16 * j + i);
  }
  return _mm512_load_si512(c);
}

// Row h's weights times the token scales rounded to int16 (wi[0, T)) and its
// step *su; false when some product is not finite.
bool QuantizeWeightRow(const float* w, const float* s, int T, int16_t* wi, float* su) {
  __m512 u[4];
  __m512 umax = _mm512_setzero_ps();
  __mmask16 bad = 0;
  const int nv = (T + 15) / 16;
  for (int v = 0; v < nv; ++v) {
    const int n = std::min(16, T - 16 * v);
    const __mmask16 k = static_cast<__mmask16>((1u << n) - 1);
    u[v] =
        _mm512_mul_ps(_mm512_maskz_loadu_ps(k, w + 16 * v), _mm512_maskz_loadu_ps(k, s + 16 * v));
    bad |= _mm512_fpclass_ps_mask(u[v], 0x99);
    umax = _mm512_max_ps(umax, _mm512_abs_ps(u[v]));
  }
  if (bad != 0) return false;
  const float mx = _mm512_reduce_max_ps(umax);
  *su = mx > 0.0f ? mx / 32767.0f : 0.0f;
  const __m512 inv = _mm512_set1_ps(mx > 0.0f ? 32767.0f / mx : 0.0f);
  for (int v = 0; v < nv; ++v) {
    const __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(u[v], inv));  // MXCSR: half to even
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(wi + 16 * v), _mm512_cvtepi32_epi16(r));
  }
  return true;
}

// acc[h][d0 .. d0 + 64) for MB <= 4 rows (wi [MB][kMaxT], su [MB]).
template <int MB>
void AxpyBlock(const int8_t* codes, int T, int D, int d0, const int16_t* wi, const float* su,
               const __m512i ctl[4], float* acc, size_t as) {
  __m512i sum[MB][4];
  for (int h = 0; h < MB; ++h) {
    for (int j = 0; j < 4; ++j) sum[h][j] = _mm512_setzero_si512();
  }
  for (int t = 0; t < T; t += 2) {
    const __m512i a = _mm512_loadu_si512(codes + static_cast<size_t>(t) * D + d0);
    const __m512i b = _mm512_loadu_si512(codes + static_cast<size_t>(t + 1) * D + d0);
    __m512i x[4];
    for (int j = 0; j < 4; ++j) x[j] = _mm512_srai_epi16(_mm512_permutex2var_epi8(a, ctl[j], b), 8);
    for (int h = 0; h < MB; ++h) {
      int32_t pair;
      std::memcpy(&pair, wi + h * kMaxT + t, 4);
      const __m512i wp = _mm512_set1_epi32(pair);
      for (int j = 0; j < 4; ++j) DpWssd(sum[h][j], x[j], wp);
    }
  }
  for (int h = 0; h < MB; ++h) {
    const __m512 sv = _mm512_set1_ps(su[h]);
    float* ah = acc + h * as + d0;
    for (int j = 0; j < 4; ++j) {
      _mm512_storeu_ps(ah + 16 * j, _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[h][j]), sv,
                                                    _mm512_loadu_ps(ah + 16 * j)));
    }
  }
}
#endif  // HQEKV_RQ16_VNNI

}  // namespace

bool DotRowsInt16Impl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      const float* q, size_t qs, int m, float* scores, size_t ss) {
#if HQEKV_RQ16_VNNI
  if (m <= 0 || !Int16QueryRowsApply(f, T, D)) return false;
  // More than one block of rows: every row checked before any score is
  // written (one block: QuantizeRow's own check, before DotBlock).
  if (m > 4 && !AllFinite(q, qs, m, D)) return false;
  alignas(64) float s[kMaxT];
  int t = 0;
  for (; t + 16 <= T; t += 16) {
    _mm512_store_ps(s + t, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                               meta + 2 * static_cast<size_t>(t)))));
  }
  for (; t < T; ++t) s[t] = F16ToF32(LoadF16(meta + 2 * static_cast<size_t>(t)));
  alignas(64) int16_t qi[4 * kMaxD];
  float sq[4];
  const int8_t* c = reinterpret_cast<const int8_t*>(codes);
  for (int h0 = 0; h0 < m; h0 += 4) {
    const int mb = std::min(4, m - h0);
    for (int h = 0; h < mb; ++h) {
      if (!QuantizeRow(q + (h0 + h) * qs, D, qi + h * D, sq + h)) return false;
    }
    float* sc = scores + h0 * ss;
    switch (mb) {
      case 1:
        DotBlock<1>(c, s, T, D, qi, sq, sc, ss);
        break;
      case 2:
        DotBlock<2>(c, s, T, D, qi, sq, sc, ss);
        break;
      case 3:
        DotBlock<3>(c, s, T, D, qi, sq, sc, ss);
        break;
      default:
        DotBlock<4>(c, s, T, D, qi, sq, sc, ss);
        break;
    }
  }
  return true;
#else
  (void)f, (void)codes, (void)meta, (void)T, (void)D, (void)q, (void)qs, (void)m, (void)scores,
      (void)ss;
  return false;
#endif
}

bool AxpyRowsInt16Impl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       const float* w, size_t ws, int m, float* acc, size_t as) {
#if HQEKV_RQ16_VNNI
  if (m <= 0 || m > 16 || !Int16WeightsRowsApply(f, T, D)) return false;
  alignas(64) float s[kMaxT];
  for (int t = 0; t < T; ++t) s[t] = F16ToF32(LoadF16(meta + 2 * static_cast<size_t>(t)));
  alignas(64) int16_t wi[16 * kMaxT];
  float su[16];
  for (int h = 0; h < m; ++h) {  // every row before any output is written
    if (!QuantizeWeightRow(w + h * ws, s, T, wi + h * kMaxT, su + h)) return false;
  }
  __m512i ctl[4];
  for (int j = 0; j < 4; ++j) ctl[j] = PairControl(j);
  const int8_t* c = reinterpret_cast<const int8_t*>(codes);
  for (int h0 = 0; h0 < m; h0 += 4) {
    const int mb = std::min(4, m - h0);
    const int16_t* wh = wi + h0 * kMaxT;
    float* ah = acc + h0 * as;
    for (int d0 = 0; d0 < D; d0 += 64) {
      switch (mb) {
        case 1:
          AxpyBlock<1>(c, T, D, d0, wh, su + h0, ctl, ah, as);
          break;
        case 2:
          AxpyBlock<2>(c, T, D, d0, wh, su + h0, ctl, ah, as);
          break;
        case 3:
          AxpyBlock<3>(c, T, D, d0, wh, su + h0, ctl, ah, as);
          break;
        default:
          AxpyBlock<4>(c, T, D, d0, wh, su + h0, ctl, ah, as);
          break;
      }
    }
  }
  return true;
#else
  (void)f, (void)codes, (void)meta, (void)T, (void)D, (void)w, (void)ws, (void)m, (void)acc,
      (void)as;
  return false;
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::quant
#if HQEKV_RQ16_VNNI
#pragma GCC pop_options
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::quant {
HWY_EXPORT(DotRowsInt16Impl);
HWY_EXPORT(AxpyRowsInt16Impl);

bool Int16QueryRowsApply(const Format& f, int T, int D) {
  return f.kind == Kind::kInt8 && T >= 1 && T <= 64 && D >= 32 && D <= 512 && D % 32 == 0;
}

bool DotRowsInt16Query(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       const float* q, size_t q_stride, int m, float* scores, size_t s_stride) {
  if (m <= 0 || !Int16QueryRowsApply(f, T, D)) return false;
  return HWY_DYNAMIC_DISPATCH(DotRowsInt16Impl)(f, codes, meta, T, D, q, q_stride, m, scores,
                                                s_stride);
}

bool Int16WeightsRowsApply(const Format& f, int T, int D) {
  return f.kind == Kind::kInt8 && T >= 2 && T <= 64 && T % 2 == 0 && D >= 64 && D <= 512 &&
         D % 64 == 0;
}

bool AxpyRowsInt16Weights(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                          const float* w, size_t w_stride, int m, float* acc, size_t a_stride) {
  if (m <= 0 || m > 16 || !Int16WeightsRowsApply(f, T, D)) return false;
  return HWY_DYNAMIC_DISPATCH(AxpyRowsInt16Impl)(f, codes, meta, T, D, w, w_stride, m, acc,
                                                 a_stride);
}
}  // namespace hqekv::quant
#endif  // HWY_ONCE
