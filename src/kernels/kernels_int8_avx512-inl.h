// Fused AVX-512 row kernels of the legacy types (Q4_0, Q4_1, Q5_0, Q5_1) and of
// Q6_K, Q3_K, Q2_K two blocks per step; on AVX-512 VNNI + VBMI the legacy types
// four blocks per step (RowLegacy4_512) and IQ4_NL / IQ4_XS.
// No include guard: kernels_int8_hwy.cc includes this once per Highway target,
// inside hqekv::kernels::HWY_NAMESPACE, under #if HQEKV_INT8_512; it uses that
// file's macros (HQEKV_INT8_512, HQEKV_VNNI) and helpers defined before it.

// ---- fused AVX-512 row kernels of Q4_0, Q4_1, Q5_0, Q5_1, Q6_K, Q3_K, Q2_K (GEMV) ----
// The codes of a block are built in registers (no decoded row): legacy types
// two 32-value blocks per vector (lanes 0..7 and 8..15), the 16-value-group
// K-quants four vectors of 64 values (4 groups of 16, 4 int32 lanes each) per super-block.

// Byte offsets of a legacy block's codes (qs) and 5th bits (qh, Q5_*).
template <TensorType T>
constexpr int LegacyQsAt() {
  return T == TensorType::kQ4_0 || T == TensorType::kIQ4_NL ? 2
         : T == TensorType::kQ4_1                           ? 4
         : T == TensorType::kQ5_0                           ? 6
                                                            : 8;
}
template <TensorType T>
constexpr int LegacyQhAt() {
  return T == TensorType::kQ5_0 ? 2 : 4;
}

// The 32 codes of legacy block p: nibbles (value j low, j + 16 high), the
// 5th bits (Q5_*) from qh through a byte mask.
template <TensorType T>
HWY_INLINE __m256i LegacyCodes(const uint8_t* p) {
  constexpr int qs_at = LegacyQsAt<T>();
  const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + qs_at));
  __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), _mm256_set1_epi8(0x0F));
  if constexpr (T == TensorType::kQ5_0 || T == TensorType::kQ5_1) {
    const uint32_t qh = U32At(p + LegacyQhAt<T>());
    u = _mm256_or_si256(u, _mm256_and_si256(_mm256_movm_epi8(qh), _mm256_set1_epi8(0x10)));
  }
  return u;
}

// A and B (w = A u + B) of legacy block p.
template <TensorType T>
HWY_INLINE void LegacyAB(const uint8_t* p, float* a, float* b) {
  *a = HalfAt(p);
  if constexpr (T == TensorType::kQ4_1 || T == TensorType::kQ5_1) {
    *b = HalfAt(p + 2);
  } else {
    *b = (T == TensorType::kQ4_0 ? -8.0f : -16.0f) * *a;
  }
}

// The codes of legacy blocks p and p + bb in one vector (lanes 0..7 block 0):
// both nibble sets in one 256-bit vector, widened, then the 128-bit quarters
// reordered from (lo0, lo1, hi0, hi1) to (lo0, hi0, lo1, hi1).
template <TensorType T>
HWY_INLINE __m512i LegacyCodes2(const uint8_t* p) {
  constexpr int bb = BlockBytes(T);
  constexpr int qs_at = LegacyQsAt<T>();
  const __m256i qs = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + qs_at))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + bb + qs_at)), 1);
  const __m512i both =
      _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(qs), _mm256_srli_epi16(qs, 4), 1),
                       _mm512_set1_epi8(0x0F));
  __m512i u = _mm512_shuffle_i64x2(both, both, _MM_SHUFFLE(3, 1, 2, 0));
  if constexpr (T == TensorType::kQ5_0 || T == TensorType::kQ5_1) {
    constexpr int qh_at = LegacyQhAt<T>();
    const uint64_t qh = U32At(p + qh_at) | (static_cast<uint64_t>(U32At(p + bb + qh_at)) << 32);
    u = _mm512_or_si512(u, _mm512_maskz_mov_epi8(qh, _mm512_set1_epi8(0x10)));
  }
  return u;
}

// Legacy types, two blocks per step. The offset term: Q4_1 / Q5_1 sum m * s;
// Q4_0 / Q5_0 (B = -8 d / -16 d) sum d * s and scale once at the end.
template <TensorType T, int M>
void RowLegacy512(const uint8_t* p, int64_t nb, const int8_t* const* xq, const float* const* xd,
                  const float* const* xs, float* out) {
  constexpr int bb = BlockBytes(T);
  constexpr bool has_min = T == TensorType::kQ4_1 || T == TensorType::kQ5_1;
  constexpr float centre = T == TensorType::kQ4_0 ? -8.0f : -16.0f;
  __m512 acc[M];
  __m128 off[M];  // lanes 0, 1: (B or d) * s of the two blocks
  for (int i = 0; i < M; ++i) {
    acc[i] = _mm512_setzero_ps();
    off[i] = _mm_setzero_ps();
  }
  const __m512i pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2, p += 2 * bb) {
    PrefetchAhead(p, 2 * bb);
    const __m512i u = LegacyCodes2<T>(p);
    const __m128 a2 = HalfPair(p, bb);
    const __m128 b2 = has_min ? HalfPair(p + 2, bb) : a2;
    const __m512 av = _mm512_permutexvar_ps(pair, _mm512_castps128_ps512(a2));
    for (int i = 0; i < M; ++i) {
      const __m512i x = _mm512_loadu_si512(xq[i] + 32 * b);
      const __m128 dx2 = Load2F(xd[i] + b);
      const __m128 sx2 = Load2F(xs[i] + b);
      const __m512 sv = _mm512_mul_ps(av, _mm512_permutexvar_ps(pair, _mm512_castps128_ps512(dx2)));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(DotUS512(u, x)), sv, acc[i]);
      off[i] = _mm_fmadd_ps(b2, sx2, off[i]);
    }
  }
  float tail_a = 0, tail_b = 0;
  __m256i tail_u = _mm256_setzero_si256();
  if (b < nb) {  // an odd last block
    tail_u = LegacyCodes<T>(p);
    LegacyAB<T>(p, &tail_a, &tail_b);
  }
  for (int i = 0; i < M; ++i) {
    const __m128 o = _mm_add_ss(off[i], _mm_movehdup_ps(off[i]));
    float r = _mm512_reduce_add_ps(acc[i]) + (has_min ? 1.0f : centre) * _mm_cvtss_f32(o);
    if (b < nb) {
      const __m256i dp = DotUS(tail_u, Load32(xq[i] + 32 * b));
      r += HorizontalSum(_mm256_cvtepi32_ps(dp)) * (tail_a * xd[i][b]) + tail_b * xs[i][b];
    }
    out[i] = r;
  }
}

// Q6_K: codes of the 4 x 64 values of a super-block (ql, qh as in
// kernels_ref.cc DequantBlockQ6K), one vector per 64 values.
HWY_INLINE void Q6KCodes(const uint8_t* p, __m512i* u) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  for (int h = 0; h < 2; ++h) {
    const __m256i la = Load32(p + 64 * h), lb = Load32(p + 64 * h + 32);
    const __m256i qh = Load32(p + 128 + 32 * h);
    const __m256i v0 =
        _mm256_or_si256(_mm256_and_si256(la, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
    const __m256i v1 =
        _mm256_or_si256(_mm256_and_si256(lb, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
    const __m256i v2 =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), m4), _mm256_and_si256(qh, m30));
    const __m256i v3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), m4),
                                       _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    u[2 * h] = _mm512_inserti64x4(_mm512_castsi256_si512(v0), v1, 1);
    u[2 * h + 1] = _mm512_inserti64x4(_mm512_castsi256_si512(v2), v3, 1);
  }
}

// Q3_K's 16 scales (6 bits, stored + 32) as bytes: low nibbles from bytes 0..7
// (low nibble for i < 8, high for i >= 8), 2 high bits from bytes 8..11
// (bits 2 (i / 4) of byte 8 + i % 4).
HWY_INLINE __m128i ScalesQ3K(const uint8_t* s) {
  uint64_t v;
  std::memcpy(&v, s, 8);
  const uint64_t w = U32At(s + 8), m = 0x03030303u;
  const uint64_t h_lo = (w & m) | (((w >> 2) & m) << 32);
  const uint64_t h_hi = ((w >> 4) & m) | (((w >> 6) & m) << 32);
  const uint64_t lo = (v & 0x0F0F0F0F0F0F0F0Full) | (h_lo << 4);
  const uint64_t hi = ((v >> 4) & 0x0F0F0F0F0F0F0F0Full) | (h_hi << 4);
  return _mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo));
}

// The 16-value-group K-quants: Q6_K below, Q3_K / Q2_K in group-major order
// further down. K16Centre: B = K16Centre * A for Q6_K / Q3_K (applied once
// per row); Q2_K's B = -dmin * min is returned as dmin * min.
template <TensorType T>
constexpr float K16Centre() {
  return T == TensorType::kQ6_K ? -32.0f : T == TensorType::kQ3_K ? -4.0f : -1.0f;
}

// Q6_K: codes of a super-block in 4 vectors of 64 contiguous values (vector
// j: values 64j..64j+63, groups 4j..4j+3), A of its 16 groups.
HWY_INLINE void Q6KBlock(const uint8_t* p, __m512i* u, __m512* a) {
  Q6KCodes(p, u);
  *a = _mm512_mul_ps(_mm512_set1_ps(HalfAt(p + 208)),
                     _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)))));
}

// Q6_K rows. One fp32 accumulator per 64-value vector of a super-block (4 per
// activation row), so that the FMAs of a super-block do not wait on each
// other (one accumulator: 4 dependent FMAs, 16 cycles per super-block). The
// same order for every M (decode == the M = 4 prefill kernel, bit for bit).
template <int M>
void RowQ6K_512(const uint8_t* p, int64_t nsb, const int8_t* const* xq, const float* const* xd,
                const float* const* xs16, float* out) {
  __m512 acc[M][4], off[M];
  for (int i = 0; i < M; ++i) {
    off[i] = _mm512_setzero_ps();
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  // Group g (16 values) uses block scale dx[g / 2]; vector j covers groups 4j..4j+3.
  const __m512i dx_of_group = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  // Lane l of vector j: group 4j + l / 4.
  const __m512i lane4 =
      _mm512_srli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 2);
  for (int64_t sb = 0; sb < nsb; ++sb, p += 210) {
    PrefetchAhead(p, 210);
    __m512i u[4];
    __m512 a;
    Q6KBlock(p, u, &a);
    for (int i = 0; i < M; ++i) {
      const __m512 ax = _mm512_mul_ps(
          a, _mm512_permutexvar_ps(dx_of_group,
                                   _mm512_castps256_ps512(_mm256_loadu_ps(xd[i] + 8 * sb))));
      off[i] = _mm512_fmadd_ps(a, _mm512_loadu_ps(xs16[i] + 16 * sb), off[i]);
      const int8_t* xs = xq[i] + 256 * sb;
      for (int j = 0; j < 4; ++j) {
        const __m512i x = _mm512_loadu_si512(xs + 64 * j);
        const __m512i gl = _mm512_add_epi32(_mm512_set1_epi32(4 * j), lane4);
        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(DotUS512(u[j], x)),
                                    _mm512_permutexvar_ps(gl, ax), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < M; ++i) {
    const __m512 s =
        _mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]), _mm512_add_ps(acc[i][2], acc[i][3]));
    out[i] =
        _mm512_reduce_add_ps(s) + K16Centre<TensorType::kQ6_K>() * _mm512_reduce_add_ps(off[i]);
  }
}

#if HQEKV_VNNI
// ---- legacy types, four blocks per step (AVX-512 VBMI + VNNI) ----
// The 4 bb bytes of blocks b..b+3 are two 512-bit loads, v0 = bytes [0, 64)
// and v1 = bytes [4 bb - 64, 4 bb) (bb <= 32). vpermt2b gathers any of those
// bytes into any byte of a vector, so one permute builds a vector of codes in
// the activations' own order (no activation copy, no shuffle per activation
// row): vector h (h < 2) holds blocks 2h, 2h + 1 as (qs of 2h, qs of 2h, qs of
// 2h + 1, qs of 2h + 1) per 128-bit lane, whose low nibbles (lanes 0, 2) and
// high nibbles (lanes 1, 3) are values 0..15 and 16..31 of each block: one
// GFNI bit-field extract per vector (a different field per 64-bit lane). A
// third permute gathers the 4 fp16 scales (and Q4_1 / Q5_1 mins). Half the
// vector operations per byte of RowLegacy512, which was compute-bound (~22
// GB/s against a 28-31 GB/s read).

// Where byte o of the 4-block span is in (v0, v1) as a vpermt2b index.
constexpr uint8_t SpanIndex(int bb, int o) {
  return static_cast<uint8_t>(o < 64 ? o : 64 + (o - (4 * bb - 64)));
}

struct Idx64 {
  alignas(64) uint8_t b[64];
};

// Codes of vector h: lane c, byte i <- qs byte i of block 2h + c / 2.
template <TensorType T>
constexpr Idx64 LegacyQsIndex(int h) {
  Idx64 r{};
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 16; ++i)
      r.b[16 * c + i] =
          SpanIndex(BlockBytes(T), (2 * h + c / 2) * BlockBytes(T) + LegacyQsAt<T>() + i);
  return r;
}
// Q5_*: byte (c, i) of vector h <- the qh byte holding the 5th bit of value
// v = i + 16 (c % 2) of block 2h + c / 2; LegacyBitMask: that bit.
template <TensorType T>
constexpr Idx64 LegacyQhIndex(int h) {
  Idx64 r{};
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 16; ++i)
      r.b[16 * c + i] = SpanIndex(BlockBytes(T), (2 * h + c / 2) * BlockBytes(T) + LegacyQhAt<T>() +
                                                     (i + 16 * (c % 2)) / 8);
  return r;
}
constexpr Idx64 LegacyBitMask() {
  Idx64 r{};
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 16; ++i)
      r.b[16 * c + i] = static_cast<uint8_t>(1u << ((i + 16 * (c % 2)) % 8));
  return r;
}
// Bytes 0..7: the 4 fp16 d; 8..15: the 4 fp16 m (Q4_1 / Q5_1; else d again).
template <TensorType T>
constexpr Idx64 LegacyScaleIndex() {
  constexpr bool has_min = T == TensorType::kQ4_1 || T == TensorType::kQ5_1;
  Idx64 r{};
  for (int L = 0; L < 4; ++L)
    for (int j = 0; j < 2; ++j) {
      r.b[2 * L + j] = SpanIndex(BlockBytes(T), L * BlockBytes(T) + j);
      r.b[8 + 2 * L + j] = SpanIndex(BlockBytes(T), L * BlockBytes(T) + (has_min ? 2 : 0) + j);
    }
  return r;
}

HWY_INLINE __m512i LoadIdx(const Idx64& i) { return _mm512_load_si512(i.b); }

// IQ4: the grid + 128 (unsigned codes <= 241; vpdpbusd does not saturate) in
// every 128-bit lane, for vpshufb.
HWY_INLINE __m512i Iq4Codes512() {
  const __m128i g = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values));
  return _mm512_broadcast_i32x4(_mm_xor_si128(g, _mm_set1_epi8(static_cast<char>(0x80))));
}

// IQ4_XS, one 136-byte super-block per step: its 128 qs bytes are two
// 512-bit loads; vector h (64 values: sub-blocks 2h, 2h + 1) is one 128-bit
// lane shuffle (qs of 2h, 2h, 2h + 1, 2h + 1), one GFNI extract (low nibbles
// in lanes 0 / 2, high in 1 / 3: the activations' order) and one vpshufb
// through the grid + 128. The offset term -128 A s is summed per sub-block
// (8 lanes) and scaled once at the end.
template <int M>
void RowIq4Xs512(const uint8_t* p, int64_t nsb, const int8_t* const* xq, const float* const* xd,
                 const float* const* xs, float* out) {
  const __m512i grid = Iq4Codes512();
  const __m512i mat = _mm512_set_epi64(
      static_cast<int64_t>(BitsTo(4, 0, 4)), static_cast<int64_t>(BitsTo(4, 0, 4)),
      static_cast<int64_t>(BitsTo(0, 0, 4)), static_cast<int64_t>(BitsTo(0, 0, 4)),
      static_cast<int64_t>(BitsTo(4, 0, 4)), static_cast<int64_t>(BitsTo(4, 0, 4)),
      static_cast<int64_t>(BitsTo(0, 0, 4)), static_cast<int64_t>(BitsTo(0, 0, 4)));
  __m512i pair[4];  // lanes 0..7: sub-block 2h's scale, 8..15: 2h + 1's
  for (int h = 0; h < 4; ++h) {
    pair[h] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * h)),
                                 _mm256_set1_epi32(2 * h + 1), 1);
  }
  // Independent FMA chains (a super-block's 4 FMAs into one accumulator are
  // a dependency chain of 4 FMA latencies per 136 bytes: 4 chains measured
  // +10-15% at M = 1). The same for every M: M = 1 == M = 4 bit for bit.
  constexpr int kAcc = 4;
  __m512 acc[kAcc][M];
  __m256 off[M];
  for (int i = 0; i < M; ++i) {
    for (int c = 0; c < kAcc; ++c) acc[c][i] = _mm512_setzero_ps();
    off[i] = _mm256_setzero_ps();
  }
  for (int64_t sb = 0; sb < nsb; ++sb, p += 136) {
    PrefetchAhead(p, 136);
    const __m256 a8 = Iq4XsScales(p);
    const __m512i v0 = _mm512_loadu_si512(p + 8), v1 = _mm512_loadu_si512(p + 72);
    __m512i u[4];
    u[0] = _mm512_shuffle_i64x2(v0, v0, _MM_SHUFFLE(1, 1, 0, 0));
    u[1] = _mm512_shuffle_i64x2(v0, v0, _MM_SHUFFLE(3, 3, 2, 2));
    u[2] = _mm512_shuffle_i64x2(v1, v1, _MM_SHUFFLE(1, 1, 0, 0));
    u[3] = _mm512_shuffle_i64x2(v1, v1, _MM_SHUFFLE(3, 3, 2, 2));
    for (int h = 0; h < 4; ++h) {
      u[h] = _mm512_shuffle_epi8(grid, _mm512_gf2p8affine_epi64_epi8(u[h], mat, 0));
    }
    for (int i = 0; i < M; ++i) {
      const __m512 sc = _mm512_castps256_ps512(_mm256_mul_ps(a8, _mm256_loadu_ps(xd[i] + 8 * sb)));
      const int8_t* x = xq[i] + 256 * sb;
      for (int h = 0; h < 4; ++h) {
        const __m512i dp = DotUS512(u[h], _mm512_loadu_si512(x + 64 * h));
        __m512& a = acc[h % kAcc][i];
        a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), _mm512_permutexvar_ps(pair[h], sc), a);
      }
      off[i] = _mm256_fmadd_ps(a8, _mm256_loadu_ps(xs[i] + 8 * sb), off[i]);
    }
  }
  for (int i = 0; i < M; ++i) {
    __m512 sum = acc[0][i];
    for (int c = 1; c < kAcc; ++c) sum = _mm512_add_ps(sum, acc[c][i]);
    out[i] = _mm512_reduce_add_ps(sum) - 128.0f * HorizontalSum(off[i]);
  }
}

template <TensorType T, int M>
void RowLegacy4_512(const uint8_t* p, int64_t nb, const int8_t* const* xq, const float* const* xd,
                    const float* const* xs, float* out) {
  constexpr int bb = BlockBytes(T);
  constexpr bool has_min = T == TensorType::kQ4_1 || T == TensorType::kQ5_1;
  constexpr bool five = T == TensorType::kQ5_0 || T == TensorType::kQ5_1;
  constexpr bool iq4 = T == TensorType::kIQ4_NL;  // codes = grid value + 128
  constexpr float centre = iq4 ? -128.0f : T == TensorType::kQ4_0 ? -8.0f : -16.0f;
  static constexpr Idx64 kQs0 = LegacyQsIndex<T>(0), kQs1 = LegacyQsIndex<T>(1);
  static constexpr Idx64 kQh0 = LegacyQhIndex<T>(0), kQh1 = LegacyQhIndex<T>(1);
  static constexpr Idx64 kBit = LegacyBitMask(), kSc = LegacyScaleIndex<T>();
  const __m512i iq0 = LoadIdx(kQs0), iq1 = LoadIdx(kQs1), isc = LoadIdx(kSc);
  // Lanes 0, 2 (qwords 0, 1, 4, 5): low nibbles; lanes 1, 3: high nibbles.
  const __m512i mat = _mm512_set_epi64(
      static_cast<int64_t>(BitsTo(4, 0, 4)), static_cast<int64_t>(BitsTo(4, 0, 4)),
      static_cast<int64_t>(BitsTo(0, 0, 4)), static_cast<int64_t>(BitsTo(0, 0, 4)),
      static_cast<int64_t>(BitsTo(4, 0, 4)), static_cast<int64_t>(BitsTo(4, 0, 4)),
      static_cast<int64_t>(BitsTo(0, 0, 4)), static_cast<int64_t>(BitsTo(0, 0, 4)));
  const __m512i b16 = _mm512_set1_epi8(0x10);
  const __m512i pair01 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i pair23 = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
  __m512 acc0[M], acc1[M];
  __m128 off[M];  // lanes 0..3: (m or d) * s of the 4 blocks
  for (int i = 0; i < M; ++i) {
    acc0[i] = acc1[i] = _mm512_setzero_ps();
    off[i] = _mm_setzero_ps();
  }
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4, p += 4 * bb) {
    PrefetchAhead(p, 4 * bb);
    __m512i v0 = _mm512_loadu_si512(p), v1 = _mm512_loadu_si512(p + 4 * bb - 64);
    // Keep both in registers: GCC otherwise reloads v0 for every permute
    // (vpermt2b overwrites its table operand), which ran Q4_0 ~20% slower.
    asm("" : "+v"(v0), "+v"(v1));
    const __m512i q0 = _mm512_permutex2var_epi8(v0, iq0, v1);
    const __m512i q1 = _mm512_permutex2var_epi8(v0, iq1, v1);
    __m512i w0 = _mm512_gf2p8affine_epi64_epi8(q0, mat, 0);
    __m512i w1 = _mm512_gf2p8affine_epi64_epi8(q1, mat, 0);
    if constexpr (five) {
      const __m512i bit = LoadIdx(kBit);
      const __m512i h0 = _mm512_permutex2var_epi8(v0, LoadIdx(kQh0), v1);
      const __m512i h1 = _mm512_permutex2var_epi8(v0, LoadIdx(kQh1), v1);
      w0 = _mm512_mask_add_epi8(w0, _mm512_test_epi8_mask(h0, bit), w0, b16);  // bit 4 is 0
      w1 = _mm512_mask_add_epi8(w1, _mm512_test_epi8_mask(h1, bit), w1, b16);
    }
    if constexpr (iq4) {
      w0 = _mm512_shuffle_epi8(Iq4Codes512(), w0);
      w1 = _mm512_shuffle_epi8(Iq4Codes512(), w1);
    }
    const __m256 dm =
        _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi8(v0, isc, v1)));
    const __m128 d4 = _mm256_castps256_ps128(dm);
    const __m128 o4 = has_min ? _mm256_extractf128_ps(dm, 1) : d4;
    for (int i = 0; i < M; ++i) {
      const __m512 sc = _mm512_castps128_ps512(_mm_mul_ps(d4, _mm_loadu_ps(xd[i] + b)));
      const int8_t* x = xq[i] + 32 * b;
      const __m512i s0 = DotUS512(w0, _mm512_loadu_si512(x));
      const __m512i s1 = DotUS512(w1, _mm512_loadu_si512(x + 64));
      acc0[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), _mm512_permutexvar_ps(pair01, sc), acc0[i]);
      acc1[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), _mm512_permutexvar_ps(pair23, sc), acc1[i]);
      off[i] = _mm_fmadd_ps(o4, _mm_loadu_ps(xs[i] + b), off[i]);
    }
  }
  float tail[M] = {};
  if (b < nb) {  // 1..3 last blocks
    const int8_t* xq_t[M];
    const float *xd_t[M], *xs_t[M];
    for (int i = 0; i < M; ++i) {
      xq_t[i] = xq[i] + 32 * b;
      xd_t[i] = xd[i] + b;
      xs_t[i] = xs[i] + b;
    }
    if constexpr (iq4) {
      RowIq4<M, false>(p, nb - b, xq_t, xd_t, tail);
    } else {
      RowLegacy512<T, M>(p, nb - b, xq_t, xd_t, xs_t, tail);
    }
  }
  for (int i = 0; i < M; ++i) {
    __m128 o = _mm_add_ps(off[i], _mm_movehl_ps(off[i], off[i]));
    o = _mm_add_ss(o, _mm_movehdup_ps(o));
    out[i] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[i], acc1[i])) +
             (has_min ? 1.0f : centre) * _mm_cvtss_f32(o) + tail[i];
  }
}
#endif  // HQEKV_VNNI
