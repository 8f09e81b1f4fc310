// Included by AVX-512 code: inside a per-target namespace (hwy::HWY_NAMESPACE,
// under `#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3`) or under an AVX-512 pragma:
// no include guard on purpose, each foreach_target pass compiles its own copy.
// One home for the 16 x 16 transpose that packs GEMM weight panels k-major
// (gemm_panel_hwy.cc: fp32 values; gemm_bf16_avx512.cc: 32-bit bf16 pairs,
// passed as float bits: the shuffles only move 32-bit lanes).

// p[c * ldp + i] = r[i][c] for a 16 x 16 block (rows r[0..16), 16 values
// each): 32-bit then 64-bit interleaves within 128-bit lanes (4 x 4
// transposes), then two rounds of 128-bit lane shuffles across the groups.
HWY_INLINE void Transpose16Store(__m512 r[16], float* p, int64_t ldp) {
  __m512 u[16];
  for (int g = 0; g < 4; ++g) {
    const __m512 t0 = _mm512_unpacklo_ps(r[4 * g], r[4 * g + 1]);
    const __m512 t1 = _mm512_unpackhi_ps(r[4 * g], r[4 * g + 1]);
    const __m512 t2 = _mm512_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]);
    const __m512 t3 = _mm512_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
    const __m512d d0 = _mm512_castps_pd(t0), d1 = _mm512_castps_pd(t1);
    const __m512d d2 = _mm512_castps_pd(t2), d3 = _mm512_castps_pd(t3);
    // u[4g + j], 128-bit lane L = column 4L + j of rows 4g .. 4g + 3.
    u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(d0, d2));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(d0, d2));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(d1, d3));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(d1, d3));
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);  // lanes 0, 2 of each
    const __m512 v1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);  // lanes 1, 3
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
    _mm512_storeu_ps(p + (j + 0) * ldp, _mm512_shuffle_f32x4(v0, w0, 0x88));
    _mm512_storeu_ps(p + (j + 8) * ldp, _mm512_shuffle_f32x4(v0, w0, 0xdd));
    _mm512_storeu_ps(p + (j + 4) * ldp, _mm512_shuffle_f32x4(v1, w1, 0x88));
    _mm512_storeu_ps(p + (j + 12) * ldp, _mm512_shuffle_f32x4(v1, w1, 0xdd));
  }
}
