// Weight blocks as unsigned codes for the int8-activation kernels: every type
// with an int8 path is, per group of G values, w = A * u + B (kernels.h). The
// decoders write u (one byte per value) and A, B (one float each per group);
// plain loops that the compiler vectorizes for each Highway target.
//
// No include guard: kernels_int8_hwy.cc includes this once per Highway
// target, inside its HWY_NAMESPACE (so it needs HalfAt's target's F16C).
// Block layouts: kernels.h and kernels_ref.cc (the fp32 oracle decoders).

inline float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
#if HQEKV_INT8_X86
  return _cvtsh_ss(h);  // F16C
#else
  return F16ToF32(h);
#endif
}

inline uint32_t U32At(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Values per (A, B) group: 16 for the K-quants with 16-value sub-blocks.
constexpr int Int8Group(TensorType t) {
  return (t == TensorType::kQ2_K || t == TensorType::kQ3_K || t == TensorType::kQ6_K) ? 16 : 32;
}

// Legacy 32-value blocks: nibble j is value j (low) and j + 16 (high); qh
// (Q5_*) bit j is the 5th bit of value j.
inline void Nibbles32(const uint8_t* qs, uint8_t* u) {
  for (int j = 0; j < 16; ++j) {
    u[j] = qs[j] & 15;
    u[j + 16] = qs[j] >> 4;
  }
}
inline void FifthBits32(uint32_t qh, uint8_t* u) {
  for (int j = 0; j < 32; ++j) u[j] |= static_cast<uint8_t>(((qh >> j) & 1) << 4);
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7).
inline void ScaleMinK(const uint8_t* s, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

#if HQEKV_INT8_X86
// x86 (AVX2 and up): the codes of the 2/3/5-bit K-quants 32 at a time (the
// per-byte bit fields through 16-bit shifts and byte masks).
inline __m256i Bits32(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask)));
}
inline void Store32(uint8_t* u, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(u), v);
}
inline __m256i Load32At(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline void CodesK45(const uint8_t* p, bool five, uint8_t* u) {
  const __m256i qh = Load32At(p + 16);
  const uint8_t* qs = p + (five ? 48 : 16);
  for (int g = 0; g < 4; ++g) {
    const __m256i q = Load32At(qs + 32 * g);
    __m256i lo = Bits32(q, 0, 15), hi = Bits32(q, 4, 15);
    if (five) {
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(Bits32(qh, 2 * g, 1), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(Bits32(qh, 2 * g + 1, 1), 4));
    }
    Store32(u + 64 * g, lo);
    Store32(u + 64 * g + 32, hi);
  }
}

inline void CodesQ3K(const uint8_t* p, uint8_t* u) {
  const __m256i hm = Load32At(p);
  for (int g = 0; g < 8; ++g) {
    const __m256i q = Load32At(p + 32 + 32 * (g / 4));
    const __m256i hb = _mm256_slli_epi16(Bits32(hm, g, 1), 2);
    Store32(u + 32 * g, _mm256_or_si256(Bits32(q, 2 * (g % 4), 3), hb));
  }
}

inline void CodesQ2K(const uint8_t* p, uint8_t* u) {
  for (int g = 0; g < 8; ++g) {
    Store32(u + 32 * g, Bits32(Load32At(p + 16 + 32 * (g / 4)), 2 * (g % 4), 3));
  }
}
#endif

// Q4_K (144 B) and Q5_K (176 B, five = true): 8 groups of 32.
inline void DecodeK45(const uint8_t* p, bool five, uint8_t* u, float* A, float* B) {
  const float d = HalfAt(p), dmin = HalfAt(p + 2);
#if HQEKV_INT8_X86
  CodesK45(p, five, u);
#else
  const uint8_t* qh = p + 16;
  const uint8_t* qs = p + (five ? 48 : 16);
  for (int g = 0; g < 4; ++g) {
    const uint8_t* q = qs + 32 * g;
    uint8_t* lo = u + 64 * g;
    for (int l = 0; l < 32; ++l) {
      lo[l] = q[l] & 15;
      lo[l + 32] = q[l] >> 4;
    }
    if (five) {
      for (int l = 0; l < 32; ++l) {
        lo[l] |= static_cast<uint8_t>(((qh[l] >> (2 * g)) & 1) << 4);
        lo[l + 32] |= static_cast<uint8_t>(((qh[l] >> (2 * g + 1)) & 1) << 4);
      }
    }
  }
#endif
  for (int j = 0; j < 8; ++j) {
    int sc, mn;
    ScaleMinK(p + 4, j, &sc, &mn);
    A[j] = d * static_cast<float>(sc);
    B[j] = -dmin * static_cast<float>(mn);
  }
}

// Q6_K (210 B): 16 groups of 16, codes 0..63, w = d sc (u - 32).
inline void DecodeQ6K(const uint8_t* p, uint8_t* u, float* A, float* B) {
  const uint8_t* ql = p;
  const uint8_t* qh = p + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
  const float d = HalfAt(p + 208);
  for (int h = 0; h < 2; ++h, ql += 64, qh += 32, u += 128) {
    for (int l = 0; l < 32; ++l) {
      u[l] = static_cast<uint8_t>((ql[l] & 15) | ((qh[l] & 3) << 4));
      u[l + 32] = static_cast<uint8_t>((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4));
      u[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      u[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
  for (int g = 0; g < 16; ++g) {
    A[g] = d * static_cast<float>(sc[g]);
    B[g] = -32.0f * A[g];
  }
}

// Q3_K (110 B): 16 groups of 16, codes 0..7 (2 low bits | hmask bit << 2),
// w = d sc (u - 4); scales stored + 32 (kernels_ref.cc ScalesQ3_K).
inline void DecodeQ3K(const uint8_t* p, uint8_t* u, float* A, float* B) {
  const uint8_t* s = p + 96;
  const float d = HalfAt(p + 108);
#if HQEKV_INT8_X86
  CodesQ3K(p, u);
#else
  const uint8_t* hm = p;
  for (int g = 0; g < 8; ++g) {
    const uint8_t* q = p + 32 + 32 * (g / 4);
    const int sh = 2 * (g % 4);
    for (int i = 0; i < 32; ++i) {
      u[32 * g + i] = static_cast<uint8_t>(((q[i] >> sh) & 3) | (((hm[i] >> g) & 1) << 2));
    }
  }
#endif
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? (s[i] & 0x0F) : (s[i - 8] >> 4);
    const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    A[i] = d * static_cast<float>((low | (high << 4)) - 32);
    B[i] = -4.0f * A[i];
  }
}

// Q2_K (84 B): 16 groups of 16, codes 0..3, w = d (sc & 15) u - dmin (sc >> 4).
inline void DecodeQ2K(const uint8_t* p, uint8_t* u, float* A, float* B) {
  const float d = HalfAt(p + 80), dmin = HalfAt(p + 82);
#if HQEKV_INT8_X86
  CodesQ2K(p, u);
#else
  for (int g = 0; g < 8; ++g) {
    const uint8_t* q = p + 16 + 32 * (g / 4);
    const int sh = 2 * (g % 4);
    for (int i = 0; i < 32; ++i) u[32 * g + i] = static_cast<uint8_t>((q[i] >> sh) & 3);
  }
#endif
  for (int g = 0; g < 16; ++g) {
    A[g] = d * static_cast<float>(p[g] & 15);
    B[g] = -dmin * static_cast<float>(p[g] >> 4);
  }
}

// IQ4_NL (18 B) / IQ4_XS sub-block: 16 bytes of nibbles (value j low, j + 16
// high) through the grid, as unsigned codes u = value + 128 (w = A (u - 128)).
inline void Iq4Codes32(const uint8_t* qs, uint8_t* u) {
  for (int j = 0; j < 16; ++j) {
    u[j] = static_cast<uint8_t>(kIq4Values[qs[j] & 15] + 128);
    u[j + 16] = static_cast<uint8_t>(kIq4Values[qs[j] >> 4] + 128);
  }
}

// IQ4_XS (136 B): the 6-bit scale of sub-block i (0..7), stored + 32.
inline int Iq4XsScale(const uint8_t* p, int i) {
  const int hi = (p[2 + i / 4] >> (2 * (i % 4))) & 3;  // u16 scales_h, bits 2i..2i+1
  return ((p[4 + i / 2] >> (4 * (i % 2))) & 15) | (hi << 4);
}

// One block of type T at p: BlockSize(T) codes, BlockSize(T) / G groups.
template <TensorType T>
inline void DecodeBlockInt8(const uint8_t* p, uint8_t* u, float* A, float* B) {
  if constexpr (T == TensorType::kQ8_0) {
    const float d = HalfAt(p);
    for (int j = 0; j < 32; ++j) u[j] = p[2 + j] ^ 0x80;  // w + 128
    A[0] = d;
    B[0] = -128.0f * d;
  } else if constexpr (T == TensorType::kQ4_0) {
    Nibbles32(p + 2, u);
    A[0] = HalfAt(p);
    B[0] = -8.0f * A[0];
  } else if constexpr (T == TensorType::kQ4_1) {
    Nibbles32(p + 4, u);
    A[0] = HalfAt(p);
    B[0] = HalfAt(p + 2);
  } else if constexpr (T == TensorType::kQ5_0) {
    Nibbles32(p + 6, u);
    FifthBits32(U32At(p + 2), u);
    A[0] = HalfAt(p);
    B[0] = -16.0f * A[0];
  } else if constexpr (T == TensorType::kQ5_1) {
    Nibbles32(p + 8, u);
    FifthBits32(U32At(p + 4), u);
    A[0] = HalfAt(p);
    B[0] = HalfAt(p + 2);
  } else if constexpr (T == TensorType::kQ4_K || T == TensorType::kQ5_K) {
    DecodeK45(p, T == TensorType::kQ5_K, u, A, B);
  } else if constexpr (T == TensorType::kQ6_K) {
    DecodeQ6K(p, u, A, B);
  } else if constexpr (T == TensorType::kQ3_K) {
    DecodeQ3K(p, u, A, B);
  } else if constexpr (T == TensorType::kIQ4_NL) {
    Iq4Codes32(p + 2, u);
    A[0] = HalfAt(p);
    B[0] = -128.0f * A[0];
  } else if constexpr (T == TensorType::kIQ4_XS) {
    const float d = HalfAt(p);
    for (int i = 0; i < 8; ++i) {
      Iq4Codes32(p + 8 + 16 * i, u + 32 * i);
      A[i] = d * static_cast<float>(Iq4XsScale(p, i) - 32);
      B[i] = -128.0f * A[i];
    }
  } else {
    static_assert(T == TensorType::kQ2_K);
    DecodeQ2K(p, u, A, B);
  }
}

template <TensorType T>
void DecodeBlocksInt8(const uint8_t* row, int64_t blocks, uint8_t* u, float* A, float* B) {
  constexpr int bs = BlockSize(T), bb = BlockBytes(T), groups = bs / Int8Group(T);
  for (int64_t b = 0; b < blocks; ++b) {
    DecodeBlockInt8<T>(row + bb * b, u + bs * b, A + groups * b, B + groups * b);
  }
}

// k values (a multiple of the block) of a row starting at a block boundary.
inline void DecodeRowInt8(TensorType t, const uint8_t* row, int64_t k, uint8_t* u, float* A,
                          float* B) {
  const int64_t blocks = k / BlockSize(t);
  switch (t) {
#define HQEKV_DECODE(T) \
  case TensorType::T:   \
    return DecodeBlocksInt8<TensorType::T>(row, blocks, u, A, B);
    HQEKV_DECODE(kQ8_0)
    HQEKV_DECODE(kQ4_0)
    HQEKV_DECODE(kQ4_1)
    HQEKV_DECODE(kQ5_0)
    HQEKV_DECODE(kQ5_1)
    HQEKV_DECODE(kQ2_K)
    HQEKV_DECODE(kQ3_K)
    HQEKV_DECODE(kQ4_K)
    HQEKV_DECODE(kQ5_K)
    HQEKV_DECODE(kQ6_K)
    HQEKV_DECODE(kIQ4_NL)
    HQEKV_DECODE(kIQ4_XS)
#undef HQEKV_DECODE
    default:
      return;  // no int8 path (HasInt8Path)
  }
}
