// Pieces shared by the int16 row kernels over int8 chunks
// (attn/multi_query_rows_q16.cc) and q8_0 chunks (attn/multi_query_rows_q8_0.cc):
// the AVX-512 helpers (compiled with those files' instruction sets, see
// attn/single_isa.h) and the 64-byte alignment of a prepared query. Not for
// use elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attn/single_isa.h"

namespace hqekv::attn::rows_q16 {
using namespace ::hqekv::quant;

// The 64-byte aligned start of a prepared query's rows (the vectors hold 64
// spare bytes).
template <class T>
T* AlignedRows(std::vector<T>& w) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(w.data());
  return w.data() + ((64 - a % 64) % 64) / sizeof(T);
}
template <class T>
const T* AlignedRows(const std::vector<T>& w) {
  return AlignedRows(const_cast<std::vector<T>&>(w));
}

}  // namespace hqekv::attn::rows_q16

#if HQEKV_SINGLE_ISA
HQEKV_SINGLE_ISA_BEGIN(",avx512vnni")
namespace hqekv::attn::rows_q16 {
using namespace ::hqekv::quant;

inline constexpr int kMaxD = 512;
inline constexpr int kMaxT = 64;

// True when every q[h][d] (m rows of D) is finite (vfpclassps: QNaN 0x01,
// +inf 0x08, -inf 0x10, SNaN 0x80).
inline bool AllFinite(const float* q, size_t qs, int m, int D) {
  __mmask16 bad = 0;
  for (int h = 0; h < m; ++h) {
    for (int d = 0; d < D; d += 16)
      bad |= _mm512_fpclass_ps_mask(_mm512_loadu_ps(q + h * qs + d), 0x99);
  }
  return bad == 0;
}

// qi[d] = round_half_even(q[d] · 32767 / amax), *sq = amax / 32767. False
// when some q[d] is not finite (qi and sq then meaningless).
inline bool QuantizeRow(const float* q, int D, int16_t* qi, float* sq) {
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

// acc += the int16 pair products of x and y (vpdpwssd), in place: through
// the intrinsic GCC 12 copied the 16 accumulators to other registers and
// spilled some around each instruction (seen in perf annotate).
HWY_INLINE void DpWssd(__m512i& acc, __m512i x, __m512i y) {
  asm("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(y));
}

// The fp16 scales meta[0, n) as fp32 at dst (64-byte aligned, room for n
// rounded up to 16), 16 at a time; lanes past n are 0. fp16 -> fp32 is
// exact, so the values are those of the scalar conversion (which, one per
// token, was ~20% of an int8 V call's samples in a 32K decode step).
HWY_INLINE void ScalesToF32(const uint8_t* meta, int n, float* dst) {
  for (int i = 0; i < n; i += 16) {
    const int r = n - i;
    const __mmask16 k = static_cast<__mmask16>(r >= 16 ? 0xFFFF : (1u << r) - 1);
    _mm512_store_ps(
        dst + i, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, meta + 2 * static_cast<size_t>(i))));
  }
}

// vpermt2b control for 16 channels j·16 .. j·16 + 15 of a 64-byte load of
// token rows a (table bytes 0..63) and b (64..127): word 2i takes a's code of
// channel i in its high byte, word 2i + 1 b's (vpsraw 8 then sign-extends
// each; the low bytes are shifted out).
inline __m512i PairControl(int j) {
  alignas(64) uint8_t c[64];
  for (int k = 0; k < 64; ++k) {
    const int i = k / 4, pos = k % 4;
    c[k] = static_cast<uint8_t>((pos >= 2 ? 64 : 0) + 16 * j + i);
  }
  return _mm512_load_si512(c);
}

}  // namespace hqekv::attn::rows_q16
HQEKV_SINGLE_ISA_END
#endif  // HQEKV_SINGLE_ISA
