// x86 building blocks of the int8-activation kernels (AVX2 / AVX-512): byte
// dot products, block loads, IQ4 grid lookups, Q4_K scales, and the fused
// Q8_0 / Q4_K row kernels.
// No include guard: kernels_int8_hwy.cc includes this once per Highway target,
// inside hqekv::kernels::HWY_NAMESPACE, under #if HQEKV_INT8_X86; it uses that
// file's macros (HQEKV_INT8_512, HQEKV_VNNI) and helpers defined before it.

// 8 int32 lanes, each the sum of 4 adjacent products u[j] * s[j] (u unsigned,
// s signed bytes).
HWY_INLINE __m256i DotUS(__m256i u, __m256i s) {
#if HQEKV_VNNI
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define HQEKV_INT8_512 1
// 16 int32 lanes: two 32-value blocks per vector (lanes 0..7 and 8..15).
HWY_INLINE __m512i DotUS512(__m512i u, __m512i s) {
#if HQEKV_VNNI
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
#else
  return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
#endif
}
#else
#define HQEKV_INT8_512 0
#endif

HWY_INLINE float HorizontalSum(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// Two floats at p (any alignment) in lanes 0, 1.
HWY_INLINE __m128 Load2F(const float* p) {
  return _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

HWY_INLINE __m256i Load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// out[i] = Q8_0 row p (nb blocks) . activation row i, i < M.
template <int M>
void RowQ8_0(const uint8_t* p, int64_t nb, const int8_t* const* xq, const float* const* xd,
             float* out) {
  __m256 acc[M];
  for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, p += 34) {
    PrefetchAhead(p, 34);
    const __m256i w = Load32(p + 2);
    const __m256i aw = _mm256_abs_epi8(w);
    const float dw = HalfAt(p);
    for (int i = 0; i < M; ++i) {
      const __m256i sx = _mm256_sign_epi8(Load32(xq[i] + 32 * b), w);
      acc[i] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(DotUS(aw, sx)), _mm256_set1_ps(dw * xd[i][b]), acc[i]);
    }
  }
  for (int i = 0; i < M; ++i) out[i] = HorizontalSum(acc[i]);
}

// IQ4_NL / IQ4_XS: the grid (kIq4Values) in both 128-bit lanes, as signed
// bytes (vpshufb indexes it per lane by the low 4 bits of each code byte).
HWY_INLINE __m256i Iq4Grid() {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values)));
}

// The 32 int8 weights (before scale) of an IQ4 block: nibbles of qs (value j
// low, j + 16 high) through the grid.
HWY_INLINE __m256i Iq4Weights(const uint8_t* qs, __m256i grid) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i n =
      _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
  return _mm256_shuffle_epi8(grid, n);
}

// A = d (ls - 32) of the 8 sub-blocks of IQ4_XS super-block p (lane i:
// scales_l nibble i, scales_h bits 2i..2i+1).
HWY_INLINE __m256 Iq4XsScales(const uint8_t* p) {
  uint16_t sh;
  std::memcpy(&sh, p + 2, 2);
  const __m256i lo =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(U32At(p + 4))),
                                         _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                       _mm256_set1_epi32(15));
  const __m256i hi = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(sh), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
      _mm256_set1_epi32(3));
  const __m256i ls = _mm256_or_si256(lo, _mm256_slli_epi32(hi, 4));
  return _mm256_mul_ps(_mm256_set1_ps(HalfAt(p)),
                       _mm256_cvtepi32_ps(_mm256_sub_epi32(ls, _mm256_set1_epi32(32))));
}

// IQ4_NL (kXs false, nb blocks of 18 B) / IQ4_XS (nb / 8 super-blocks of
// 136 B), one 32-value block per step: grid weights through vpshufb, then
// |w| times q with w's sign as RowQ8_0 (|w| <= 127: maddubs cannot saturate,
// so this serves every x86 target; the AVX-512 VNNI kernels use u = w + 128).
template <int M, bool kXs>
void RowIq4(const uint8_t* p, int64_t nb, const int8_t* const* xq, const float* const* xd,
            float* out) {
  constexpr int per = kXs ? 8 : 1, bb = kXs ? 136 : 18;
  const __m256i grid = Iq4Grid();
  __m256 acc[M];
  for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
  alignas(32) float a[8];
  for (int64_t b = 0; b < nb; b += per, p += bb) {
    PrefetchAhead(p, bb);
    if constexpr (kXs) {
      _mm256_store_ps(a, Iq4XsScales(p));
    } else {
      a[0] = HalfAt(p);
    }
    for (int j = 0; j < per; ++j) {
      const __m256i w = Iq4Weights(p + (kXs ? 8 + 16 * j : 2), grid);
      const __m256i aw = _mm256_abs_epi8(w);
      for (int i = 0; i < M; ++i) {
        const __m256i sx = _mm256_sign_epi8(Load32(xq[i] + 32 * (b + j)), w);
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DotUS(aw, sx)),
                                 _mm256_set1_ps(a[j] * xd[i][b + j]), acc[i]);
      }
    }
  }
  for (int i = 0; i < M; ++i) out[i] = HorizontalSum(acc[i]);
}

#if HQEKV_INT8_512
// Two fp16 values at p and p + bb as floats (lanes 0, 1).
HWY_INLINE __m128 HalfPair(const uint8_t* p, int bb) {
  uint16_t h0, h1;
  std::memcpy(&h0, p, 2);
  std::memcpy(&h1, p + bb, 2);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h0 | (static_cast<uint32_t>(h1) << 16))));
}

// Two blocks per step: lanes 0..7 block b, 8..15 block b + 1; |w| with a
// mask-negated q stands for the signed product.
template <int M, bool kTwoStep = false>
void RowQ8_0x512(const uint8_t* p, int64_t nb, const int8_t* const* xq, const float* const* xd,
                 float* out) {
  __m512 acc[M];
  for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps();
  const __m512i zero = _mm512_setzero_si512();
  const __m512i pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2, p += 68) {
    if constexpr (kTwoStep) {
      PrefetchTwoStep(p, 68);
    } else {
      PrefetchAhead(p, 68);
    }
    const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(Load32(p + 2)), Load32(p + 36), 1);
    const __mmask64 neg = _mm512_movepi8_mask(w);
    const __m512i aw = _mm512_abs_epi8(w);
    const __m512 dw = _mm512_permutexvar_ps(pair, _mm512_castps128_ps512(HalfPair(p, 34)));
    for (int i = 0; i < M; ++i) {
      const __m512i x = _mm512_loadu_si512(xq[i] + 32 * b);
      const __m512i sx = _mm512_mask_sub_epi8(x, neg, zero, x);
      const __m512 dx = _mm512_permutexvar_ps(pair, _mm512_castps128_ps512(Load2F(xd[i] + b)));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(DotUS512(aw, sx)), _mm512_mul_ps(dw, dx), acc[i]);
    }
  }
  for (int i = 0; i < M; ++i) out[i] = _mm512_reduce_add_ps(acc[i]);
  if (b < nb) {  // an odd last block
    float tail[M];
    const int8_t* xq_t[M];
    const float* xd_t[M];
    for (int i = 0; i < M; ++i) {
      xq_t[i] = xq[i] + 32 * b;
      xd_t[i] = xd[i] + b;
    }
    RowQ8_0<M>(p, nb - b, xq_t, xd_t, tail);
    for (int i = 0; i < M; ++i) out[i] += tail[i];
  }
}
#endif

// The 8 scales (sc) and mins (mn) of a Q4_K super-block as bytes, from the 12
// packed bytes (see kernels_ref.cc ScaleMinK4), four at a time in 32-bit words.
HWY_INLINE void ScalesQ4_K(const uint8_t* s, uint64_t* sc, uint64_t* mn) {
  uint32_t a0, a1, a2;
  std::memcpy(&a0, s, 4);
  std::memcpy(&a1, s + 4, 4);
  std::memcpy(&a2, s + 8, 4);
  const uint32_t sc_lo = a0 & 0x3F3F3F3Fu, mn_lo = a1 & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (a2 & 0x0F0F0F0Fu) | ((a0 >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((a2 >> 4) & 0x0F0F0F0Fu) | ((a1 >> 2) & 0x30303030u);
  *sc = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);
  *mn = mn_lo | (static_cast<uint64_t>(mn_hi) << 32);
}

HWY_INLINE __m256 BytesToFloats(uint64_t v) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(v))));
}

// out[i] = Q4_K (kFive: Q5_K, 176 B, codes + the qh bits) row p (nsb
// super-blocks) . activation row i, i < M.
// kGfni (AVX-512 VNNI + GFNI): the 32 code bytes of 64 values are broadcast
// to both halves of a vector and one vgf2p8affineqb takes the low nibbles in
// the low half and the high nibbles in the high half (Q5_K: a second one puts
// the qh bits 2g / 2g + 1 at bit 4), instead of a shift, an insert and a mask
// (Q5_K: 7 more operations for the 5th bits).
template <int M, bool kFive = false, bool kGfni = false>
void RowQ4_K(const uint8_t* p, int64_t nsb, const int8_t* const* xq, const float* const* xd,
             const float* const* xs, float* out) {
  __m256 mins[M];
  for (int i = 0; i < M; ++i) mins[i] = _mm256_setzero_ps();
#if HQEKV_INT8_512
  __m512 acc512[M][4];  // one per 64-value vector (no FMA chain within a super-block)
  for (int i = 0; i < M; ++i)
    for (int g = 0; g < 4; ++g) acc512[i][g] = _mm512_setzero_ps();
#else
  __m256 acc[M];
  for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F);
#endif
  for (int64_t sb = 0; sb < nsb; ++sb, p += kFive ? 176 : 144) {
    PrefetchAhead(p, kFive ? 176 : 144);
    const uint8_t* qs = p + (kFive ? 48 : 16);
    const __m256i qh = kFive ? Load32(p + 16) : _mm256_setzero_si256();
    uint64_t sc, mn;
    ScalesQ4_K(p + 4, &sc, &mn);
    const __m256 fsc = _mm256_mul_ps(_mm256_set1_ps(HalfAt(p)), BytesToFloats(sc));
    const __m256 fmn = _mm256_mul_ps(_mm256_set1_ps(HalfAt(p + 2)), BytesToFloats(mn));
    __m256 scale[M];  // lane j: d * sc_j * dx_j of sub-block j
    for (int i = 0; i < M; ++i) {
      scale[i] = _mm256_mul_ps(fsc, _mm256_loadu_ps(xd[i] + 8 * sb));
      mins[i] = _mm256_fmadd_ps(fmn, _mm256_loadu_ps(xs[i] + 8 * sb), mins[i]);
    }
#if HQEKV_INT8_512
    // One vector per 64 values: low nibbles (sub-block 2g) in the low half,
    // high nibbles (2g + 1) in the high half, against 64 contiguous q.
    for (int g = 0; g < 4; ++g) {
      __m512i wv;
#if HQEKV_VNNI
      if constexpr (kGfni) {
        const auto half = [](uint64_t lo, uint64_t hi) {
          return _mm512_set_epi64(static_cast<int64_t>(hi), static_cast<int64_t>(hi),
                                  static_cast<int64_t>(hi), static_cast<int64_t>(hi),
                                  static_cast<int64_t>(lo), static_cast<int64_t>(lo),
                                  static_cast<int64_t>(lo), static_cast<int64_t>(lo));
        };
        wv = _mm512_gf2p8affine_epi64_epi8(_mm512_broadcast_i64x4(Load32(qs + 32 * g)),
                                           half(BitsTo(0, 0, 4), BitsTo(4, 0, 4)), 0);
        if constexpr (kFive) {
          wv = _mm512_or_si512(wv, _mm512_gf2p8affine_epi64_epi8(
                                       _mm512_broadcast_i64x4(qh),
                                       half(BitsTo(2 * g, 4, 1), BitsTo(2 * g + 1, 4, 1)), 0));
        }
      } else
#endif
      {
        const __m256i qv = Load32(qs + 32 * g);
        wv = _mm512_and_si512(
            _mm512_inserti64x4(_mm512_castsi256_si512(qv), _mm256_srli_epi16(qv, 4), 1),
            _mm512_set1_epi8(0x0F));
        if constexpr (kFive) {  // 5th bits: qh bit 2g (low half), 2g + 1 (high half)
          wv = _mm512_or_si512(
              wv, _mm512_slli_epi16(_mm512_inserti64x4(_mm512_castsi256_si512(Bits32(qh, 2 * g, 1)),
                                                       Bits32(qh, 2 * g + 1, 1), 1),
                                    4));
        }
      }
      const __m512i idx = _mm512_set_epi32(2 * g + 1, 2 * g + 1, 2 * g + 1, 2 * g + 1, 2 * g + 1,
                                           2 * g + 1, 2 * g + 1, 2 * g + 1, 2 * g, 2 * g, 2 * g,
                                           2 * g, 2 * g, 2 * g, 2 * g, 2 * g);
      for (int i = 0; i < M; ++i) {
        const __m512i x = _mm512_loadu_si512(xq[i] + 256 * sb + 64 * g);
        const __m512 sv = _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(scale[i]));
        acc512[i][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(DotUS512(wv, x)), sv, acc512[i][g]);
      }
    }
#else
    for (int g = 0; g < 4; ++g) {
      const __m256i qv = Load32(qs + 32 * g);
      __m256i lo = _mm256_and_si256(qv, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
      if constexpr (kFive) {
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(Bits32(qh, 2 * g, 1), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(Bits32(qh, 2 * g + 1, 1), 4));
      }
      const __m256i i_lo = _mm256_set1_epi32(2 * g), i_hi = _mm256_set1_epi32(2 * g + 1);
      for (int i = 0; i < M; ++i) {
        const int8_t* x = xq[i] + 256 * sb + 64 * g;
        const __m256 s_lo = _mm256_permutevar8x32_ps(scale[i], i_lo);
        const __m256 s_hi = _mm256_permutevar8x32_ps(scale[i], i_hi);
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DotUS(lo, Load32(x))), s_lo, acc[i]);
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DotUS(hi, Load32(x + 32))), s_hi, acc[i]);
      }
    }
#endif
  }
#if HQEKV_INT8_512
  for (int i = 0; i < M; ++i) {
    const __m512 s = _mm512_add_ps(_mm512_add_ps(acc512[i][0], acc512[i][1]),
                                   _mm512_add_ps(acc512[i][2], acc512[i][3]));
    out[i] = _mm512_reduce_add_ps(s) - HorizontalSum(mins[i]);
  }
#else
  for (int i = 0; i < M; ++i) out[i] = HorizontalSum(_mm256_sub_ps(acc[i], mins[i]));
#endif
}
