// Group-major Q2_K / Q3_K / Q6_K row kernels on AVX-512 (GEMV): the activation
// codes in group-major order (GroupMajorActs) and one K16Acts record per
// super-block (RowK16GM_512).
// No include guard: kernels_int8_hwy.cc includes this once per Highway target,
// inside hqekv::kernels::HWY_NAMESPACE, under #if HQEKV_INT8_512; it uses that
// file's macros (HQEKV_INT8_512, HQEKV_VNNI) and helpers defined before it.

// ---- group-major Q2_K / Q3_K / Q6_K (GEMV) ----
// Vector j (j < 4) of a super-block holds, in int32 lane g, values
// 16g + 4j .. 16g + 4j + 3: four values of 16-value group g. So every vector
// has the same per-lane scale (group g's A times its block's dx), the integer
// dot products of a super-block accumulate in one register (vpdpbusd), and
// one convert and one FMA per super-block apply the scales (instead of one
// per vector plus a permute of the scales). The weight codes get there by one
// dword permute per vector (lane g: qs dword 8 (g / 8) + 4 (g % 2) + j, 2-bit
// field (g / 2) % 4; Q3_K hmask dword 4 (g % 2) + j, bit g / 2; Q6_K: see
// Q6KCodesGfni); the activations are read from a copy in the same order
// (GroupMajorActs). Q6_K takes this kernel only with GFNI (else RowQ6K_512).
template <TensorType T>
constexpr bool K16GroupMajor() {
  return T == TensorType::kQ2_K || T == TensorType::kQ3_K || T == TensorType::kQ6_K;
}

// Activation codes of rows [0, m) (k each) in group-major order: in every
// 256 values, 4-byte word 16j + g = word 4g + j of the row; and per
// super-block of each row its K16Acts (m * k / 256 of them).
void GroupMajorActs(TensorType t, const int8_t* q, const float* d, int64_t m, int64_t k,
                    int8_t* out, K16Acts* ka) {
  const int64_t words = m * k / 4;
  for (int64_t b = 0; b < words; b += 64) {
    for (int j = 0; j < 4; ++j) {
      for (int g = 0; g < 16; ++g) {
        std::memcpy(out + 4 * (b + 16 * j + g), q + 4 * (b + 4 * g + j), 4);
      }
    }
  }
  for (int64_t sb = 0; sb < m * k / 256; ++sb, q += 256, d += 8) {
    for (int g = 0; g < 16; ++g) {
      int32_t sum = 0;
      for (int v = 0; v < 16; ++v) sum += q[16 * g + v];
      ka[sb].dx[g] = d[g / 2];
      if (t == TensorType::kQ3_K) {
        ka[sb].c[g] = static_cast<int32_t>(K16Centre<TensorType::kQ3_K>()) * sum;
      } else if (t == TensorType::kQ6_K) {
        ka[sb].c[g] = static_cast<int32_t>(K16Centre<TensorType::kQ6_K>()) * sum;
      } else {
        ka[sb].s[g] = d[g / 2] * static_cast<float>(sum);  // == Int8Acts::s16
      }
    }
  }
}

HWY_INLINE __m512i DotAcc512(__m512i acc, __m512i u, __m512i s) {
#if HQEKV_VNNI
  return _mm512_dpbusd_epi32(acc, u, s);
#else
  return _mm512_add_epi32(acc, DotUS512(u, s));
#endif
}

#if HQEKV_VNNI
// Q3_K codes (0..7) of a super-block in group-major order with GFNI: the
// third bits are merged into the code bytes before the permute. qs dword D
// (half h = D / 8) holds fields s = 0..3 of groups 8h + 2s + (D % 8) / 4, whose
// third bits are bits 4h + s of hmask dword D % 8 (the 32 hmask bytes
// broadcast to both halves put that dword at D). qa = fields 0, 1 with their
// third bits at bits 4, 5; qb = fields 2, 3 (bits 4..7) with theirs at 0, 1.
// Vector j then takes each lane from qa or qb (one two-table vpermt2d) and one
// affine per 64-bit lane assembles the 3-bit code: 2 operations per vector
// instead of 5 (the separate hmask permute, bit test and masked add).
HWY_INLINE void Q3KCodesGfni(__m512i qs, const uint8_t* p, __m512i* u) {
  const auto halves = [](uint64_t lo, uint64_t hi) {
    return _mm512_set_epi64(static_cast<int64_t>(hi), static_cast<int64_t>(hi),
                            static_cast<int64_t>(hi), static_cast<int64_t>(hi),
                            static_cast<int64_t>(lo), static_cast<int64_t>(lo),
                            static_cast<int64_t>(lo), static_cast<int64_t>(lo));
  };
  const __m512i hm = _mm512_broadcast_i64x4(Load32(p));
  const __m512i ha = _mm512_gf2p8affine_epi64_epi8(hm, halves(BitsTo(0, 4, 2), BitsTo(4, 4, 2)), 0);
  const __m512i hb = _mm512_gf2p8affine_epi64_epi8(hm, halves(BitsTo(2, 0, 2), BitsTo(6, 0, 2)), 0);
  // (qs & 0x0F) | ha and (qs & 0xF0) | hb (ternary logic 0xEC: A & C | B).
  const __m512i qa = _mm512_ternarylogic_epi32(qs, ha, _mm512_set1_epi8(0x0F), 0xEC);
  const __m512i qb =
      _mm512_ternarylogic_epi32(qs, hb, _mm512_set1_epi8(static_cast<char>(0xF0)), 0xEC);
  // qword m (lanes 2m, 2m + 1): field s = m % 4 from qa (s < 2) or qb.
  const __m512i mat = _mm512_set_epi64(static_cast<int64_t>(BitsTo(6, 0, 2) | BitsTo(1, 2, 1)),
                                       static_cast<int64_t>(BitsTo(4, 0, 2) | BitsTo(0, 2, 1)),
                                       static_cast<int64_t>(BitsTo(2, 0, 2) | BitsTo(5, 2, 1)),
                                       static_cast<int64_t>(BitsTo(0, 0, 2) | BitsTo(4, 2, 1)),
                                       static_cast<int64_t>(BitsTo(6, 0, 2) | BitsTo(1, 2, 1)),
                                       static_cast<int64_t>(BitsTo(4, 0, 2) | BitsTo(0, 2, 1)),
                                       static_cast<int64_t>(BitsTo(2, 0, 2) | BitsTo(5, 2, 1)),
                                       static_cast<int64_t>(BitsTo(0, 0, 2) | BitsTo(4, 2, 1)));
  // Lane g of vector 0: dword 8 (g / 8) + 4 (g % 2) of qa (+ 16: of qb when
  // (g / 2) % 4 >= 2).
  const __m512i idx0 = _mm512_set_epi32(28, 24, 28, 24, 12, 8, 12, 8, 20, 16, 20, 16, 4, 0, 4, 0);
  for (int j = 0; j < 4; ++j) {
    const __m512i src =
        _mm512_permutex2var_epi32(qa, _mm512_add_epi32(idx0, _mm512_set1_epi32(j)), qb);
    u[j] = _mm512_gf2p8affine_epi64_epi8(src, mat, 0);
  }
}

// Q6_K codes (0..63) of a super-block in group-major order with GFNI. Value
// v = 128 h + 32 s + l (l < 32; group 8 h + 2 s + l / 16) has its low 4 bits
// in nibble s / 2 of ql byte 64 h + 32 (s % 2) + l and its high 2 bits in
// field s of qh byte 32 h + l (kernels_ref.cc DequantBlockQ6K). Lane g of
// vector j (values 16 g + 4 j .. + 3: h = g / 8, s = (g % 8) / 2,
// l = 16 (g % 2) + 4 j ..) takes ql dword 16 h + 8 (s % 2) + 4 (g % 2) + j
// (a two-table vpermt2d over the 128 ql bytes) and qh dword 8 h + 4 (g % 2) + j
// (vpermd); the lanes of qword m have s = m % 4, so one affine per 64-bit lane
// takes each field to its place: 5 operations per vector of 64 codes.
HWY_INLINE void Q6KCodesGfni(const uint8_t* p, __m512i* u) {
  const __m512i ql0 = _mm512_loadu_si512(p), ql1 = _mm512_loadu_si512(p + 64);
  const __m512i qh = _mm512_loadu_si512(p + 128);
  const __m512i idx_l = _mm512_set_epi32(28, 24, 20, 16, 28, 24, 20, 16, 12, 8, 4, 0, 12, 8, 4, 0);
  const __m512i idx_h = _mm512_set_epi32(12, 8, 12, 8, 12, 8, 12, 8, 4, 0, 4, 0, 4, 0, 4, 0);
  const auto per_s = [](uint64_t s0, uint64_t s1, uint64_t s2, uint64_t s3) {
    return _mm512_set_epi64(static_cast<int64_t>(s3), static_cast<int64_t>(s2),
                            static_cast<int64_t>(s1), static_cast<int64_t>(s0),
                            static_cast<int64_t>(s3), static_cast<int64_t>(s2),
                            static_cast<int64_t>(s1), static_cast<int64_t>(s0));
  };
  const __m512i mat_l = per_s(BitsTo(0, 0, 4), BitsTo(0, 0, 4), BitsTo(4, 0, 4), BitsTo(4, 0, 4));
  const __m512i mat_h = per_s(BitsTo(0, 4, 2), BitsTo(2, 4, 2), BitsTo(4, 4, 2), BitsTo(6, 4, 2));
  for (int j = 0; j < 4; ++j) {
    const __m512i jv = _mm512_set1_epi32(j);
    const __m512i lo = _mm512_permutex2var_epi32(ql0, _mm512_add_epi32(idx_l, jv), ql1);
    const __m512i hi = _mm512_permutexvar_epi32(_mm512_add_epi32(idx_h, jv), qh);
    u[j] = _mm512_or_si512(_mm512_gf2p8affine_epi64_epi8(lo, mat_l, 0),
                           _mm512_gf2p8affine_epi64_epi8(hi, mat_h, 0));
  }
}

// Q3_K's 16 scales minus 32 (ScalesQ3K - 32) as int8 with VBMI and GFNI, in
// vector registers (the scalar ScalesQ3K took ~16 integer operations and two
// inserts per super-block). One vpmultishiftqb takes byte i's low nibble
// field (bytes 0..7, bit 8i for i < 8, 8 (i - 8) + 4 above), another its 2
// high bits (bytes 8..11 twice per qword: bits 8 (i % 4) + 2 (i / 4), rotated
// to bits 4, 5), a ternary-logic select merges them, and one affine maps the
// 6-bit s to the int8 s - 32 (the 6-bit two's complement of s ^ 0x20: bit 5
// inverted and copied to bits 6, 7).
HWY_INLINE __m128i ScalesQ3KMinus32(const uint8_t* s) {
  uint64_t lo;
  std::memcpy(&lo, s, 8);
  const __m128i ctrl_lo = _mm_set_epi8(60, 52, 44, 36, 28, 20, 12, 4, 56, 48, 40, 32, 24, 16, 8, 0);
  const __m128i ctrl_hi = _mm_set_epi8(26, 18, 10, 2, 24, 16, 8, 0, 22, 14, 6, 62, 20, 12, 4, 60);
  const __m128i ml = _mm_multishift_epi64_epi8(ctrl_lo, _mm_set1_epi64x(static_cast<int64_t>(lo)));
  const __m128i mh =
      _mm_multishift_epi64_epi8(ctrl_hi, _mm_set1_epi32(static_cast<int>(U32At(s + 8))));
  // Bits 0..3 from ml, 4..7 from mh (ternary logic 0xE4: C ? A : B).
  const __m128i v = _mm_ternarylogic_epi32(ml, mh, _mm_set1_epi8(0x0F), 0xE4);
  constexpr uint64_t kMat = BitsTo(0, 0, 5) | BitsTo(5, 5, 1) | BitsTo(5, 6, 1) | BitsTo(5, 7, 1);
  return _mm_gf2p8affine_epi64_epi8(v, _mm_set1_epi64x(static_cast<int64_t>(kMat)), 0xE0);
}
#endif

// out[i] = Q2_K / Q3_K row p . activation row i (group-major codes xq, per
// super-block scales and offsets xk), i < M.
// Not inlined: inlined into RowRange (as GCC did once the activations came
// as K16Acts), it reloaded its constants from memory every super-block: Q3_K
// 5.4-5.8 instead of 3.9-4.2 ns per super-block, L2-resident.
template <TensorType T, int M, bool kGfni = false>
HWY_NOINLINE void RowK16GM_512(const uint8_t* p, int64_t nsb, const int8_t* const* xq,
                               const K16Acts* const* xk, float* out) {
  static_assert(K16GroupMajor<T>() && (T != TensorType::kQ6_K || kGfni));
  __m512 acc[M], off[M];
  for (int i = 0; i < M; ++i) acc[i] = off[i] = _mm512_setzero_ps();
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i one = _mm512_set1_epi32(1);
  // qs dword of lane g in vector 0: 8 (g / 8) + 4 (g % 2); hmask: 4 (g % 2).
  const __m512i h0 = _mm512_slli_epi32(_mm512_and_si512(lane, one), 2);
  const __m512i q0 = _mm512_add_epi32(h0, _mm512_slli_epi32(_mm512_srli_epi32(lane, 3), 3));
  // 2-bit field of lane g: shift 2 ((g / 2) % 4); hmask bit g / 2 of each byte.
  const __m512i shift =
      _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(lane, 1), _mm512_set1_epi32(3)), 1);
  const __m512i hbit = _mm512_sllv_epi32(_mm512_set1_epi32(0x01010101), _mm512_srli_epi32(lane, 1));
  const __m512i m3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
  constexpr int qs_at = T == TensorType::kQ3_K ? 32 : 16;
  for (int64_t sb = 0; sb < nsb; ++sb, p += BlockBytes(T)) {
    PrefetchAhead(p, BlockBytes(T));
    __m512i u[4];
    __m512 a, b = _mm512_setzero_ps();  // b: Q2_K only
    if constexpr (T == TensorType::kQ6_K) {
#if HQEKV_VNNI
      Q6KCodesGfni(p, u);
#endif
      a = _mm512_mul_ps(_mm512_set1_ps(HalfAt(p + 208)),
                        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)))));
    } else {
      const __m512i qs = _mm512_loadu_si512(p + qs_at);
#if HQEKV_VNNI
      if constexpr (kGfni && T == TensorType::kQ3_K) {
        Q3KCodesGfni(qs, p, u);
      } else
#endif
        for (int j = 0; j < 4; ++j) {
          const __m512i idx = _mm512_add_epi32(q0, _mm512_set1_epi32(j));
          if constexpr (kGfni) {
#if HQEKV_VNNI
            // qword m (lanes 2m, 2m + 1): field m % 4.
            const __m512i mat = _mm512_set_epi64(
                static_cast<int64_t>(BitsTo(6, 0, 2)), static_cast<int64_t>(BitsTo(4, 0, 2)),
                static_cast<int64_t>(BitsTo(2, 0, 2)), static_cast<int64_t>(BitsTo(0, 0, 2)),
                static_cast<int64_t>(BitsTo(6, 0, 2)), static_cast<int64_t>(BitsTo(4, 0, 2)),
                static_cast<int64_t>(BitsTo(2, 0, 2)), static_cast<int64_t>(BitsTo(0, 0, 2)));
            u[j] = _mm512_gf2p8affine_epi64_epi8(_mm512_permutexvar_epi32(idx, qs), mat, 0);
#endif
          } else {
            u[j] =
                _mm512_and_si512(_mm512_srlv_epi32(_mm512_permutexvar_epi32(idx, qs), shift), m3);
          }
        }
      if constexpr (T == TensorType::kQ3_K) {
        const __m512i hm = _mm512_castsi256_si512(Load32(p));
        for (int j = 0; j < 4 && !kGfni; ++j) {
          const __m512i hj =
              _mm512_permutexvar_epi32(_mm512_add_epi32(h0, _mm512_set1_epi32(j)), hm);
          u[j] = _mm512_mask_add_epi8(u[j], _mm512_test_epi8_mask(hj, hbit), u[j], four);
        }
        __m512i sc;
#if HQEKV_VNNI
        if constexpr (kGfni) {
          sc = _mm512_cvtepi8_epi32(ScalesQ3KMinus32(p + 96));
        } else
#endif
          sc = _mm512_sub_epi32(_mm512_cvtepu8_epi32(ScalesQ3K(p + 96)), _mm512_set1_epi32(32));
        a = _mm512_mul_ps(_mm512_set1_ps(HalfAt(p + 108)), _mm512_cvtepi32_ps(sc));
      } else {
        const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(U32At(p + 80))));
        const __m512i sc =
            _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        a = _mm512_mul_ps(_mm512_broadcastss_ps(dd),
                          _mm512_cvtepi32_ps(_mm512_and_si512(sc, _mm512_set1_epi32(15))));
        b = _mm512_mul_ps(_mm512_broadcastss_ps(_mm_movehdup_ps(dd)),
                          _mm512_cvtepi32_ps(_mm512_srli_epi32(sc, 4)));
      }
    }
    for (int i = 0; i < M; ++i) {
      const K16Acts& ka = xk[i][sb];
      const __m512 ax = _mm512_mul_ps(a, _mm512_loadu_ps(ka.dx));
      // Q3_K / Q6_K: the code sums start at K16Centre (sum of the codes),
      // exact integers.
      __m512i s0 = T == TensorType::kQ2_K ? _mm512_setzero_si512() : _mm512_loadu_si512(ka.c);
      if constexpr (T == TensorType::kQ2_K) {
        off[i] = _mm512_fmadd_ps(b, _mm512_loadu_ps(ka.s), off[i]);
      }
      const int8_t* xs = xq[i] + 256 * sb;
      __m512i s1 = DotAcc512(_mm512_setzero_si512(), u[1], _mm512_loadu_si512(xs + 64));
      s0 = DotAcc512(s0, u[0], _mm512_loadu_si512(xs));
      s0 = DotAcc512(s0, u[2], _mm512_loadu_si512(xs + 128));
      s1 = DotAcc512(s1, u[3], _mm512_loadu_si512(xs + 192));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), ax, acc[i]);
    }
  }
  for (int i = 0; i < M; ++i) {
    out[i] = _mm512_reduce_add_ps(acc[i]);
    if constexpr (T == TensorType::kQ2_K) out[i] += K16Centre<T>() * _mm512_reduce_add_ps(off[i]);
  }
}
