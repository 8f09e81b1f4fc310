// SIMD int8-activation kernels (oracles: kernels_int8_ref.cc): activation
// quantization, and weight rows of every HasInt8Path type dotted with int8
// activation rows. Q8_0 and Q4_K rows have fused row kernels; the other types
// are decoded to unsigned codes + per-group (A, B) first
// (kernels_int8_decode-inl.h) and dotted by one generic row kernel.
//
// GEMM (>= kInt8PanelMinRows activation rows) on AVX-512 VNNI: 16 weight rows
// are decoded into an interleaved panel (per 4 values: 16 rows x 4 code bytes
// = one 512-bit vector, lane = weight row), so one vpdpbusd takes a weight
// vector and 4 activation bytes broadcast; 8 activation rows share each
// weight load (16 x 8 register tile, int32 sums per group, then one fp32 FMA
// per group). k is chunked to 1024 (panel chunk 16 KiB + 4 KiB in L1) and
// the activation chunk of up to 512 rows (512 KiB) stays in L2 across panels.
//
// x86 with AVX2 or AVX-512: one 32-value block is one 256-bit vector; the
// unsigned x signed byte products go through vpdpbusd on the AVX3_DL target
// (AVX-512 VNNI, compiled in here: HWY_WANT_AVX3_DL) and vpmaddubsw+vpmaddwd
// elsewhere (no saturation: |w| <= 128, |q| <= 127, pairs <= 32512). Q8_0 is
// signed x signed: |w| times q with w's sign. Other targets: scalar integer
// code (the same arithmetic as the oracle, float sums).
//
// A row kernel takes M <= 4 activation rows at once so that a weight block is
// loaded and decoded once for M rows (the prefill GEMM); decode uses M = 1.
// The fused row kernels prefetch the weight stream kPrefetchBytes ahead (Q8_0
// rows past kSplitPrefetchK values: in two steps, PrefetchTwoStep).
// Q2_K / Q3_K row kernels (and Q6_K's on AVX-512 VNNI with GFNI) read a
// group-major copy of the activation codes and a per-super-block record of
// scales and offsets (RowK16GM_512, GroupMajorActs, K16Acts: one integer
// accumulator per super-block, made per call).
// On AVX-512 VNNI with GFNI the legacy types take four blocks per step, their
// codes gathered by byte permutes in the activations' order (RowLegacy4_512).
// IQ4_NL / IQ4_XS: the nibbles index the 16-value int8 grid (kIq4Values)
// through vpshufb; on AVX-512 VNNI as unsigned codes grid + 128 (<= 241, so
// vpdpbusd only: IQ4_NL in the legacy four-block kernel, IQ4_XS one
// super-block per step), elsewhere on x86 |w| with w's sign on q (RowIq4).
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "kernels/kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/kernels_int8_hwy.cc"
#include "hwy/aligned_allocator.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
#undef HQEKV_VNNI
#if HWY_TARGET == HWY_AVX3_DL && !HWY_COMPILER_CLANG
// Highway 1.0's AVX3_DL target string names avxvnni, not avx512vnni, while its
// run-time check requires AVX-512 VNNI: enable the EVEX form explicitly. (GCC
// only: clang does not add a nested target attribute to Highway's, so clang
// builds use the maddubs form on AVX3_DL too; HQEKV_VNNI says which.)
#pragma GCC push_options
#pragma GCC target("avx512vnni,gfni")
#define HQEKV_VNNI 1
#else
#define HQEKV_VNNI 0
#endif
namespace hqekv::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#undef HQEKV_INT8_X86
#undef HQEKV_INT8_512
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define HQEKV_INT8_X86 1
#else
#define HQEKV_INT8_X86 0
#define HQEKV_INT8_512 0
#endif

#include "kernels/kernels_int8_decode-inl.h"

// Software prefetch of the weight stream (row kernels: decode), kPrefetchBytes
// ahead, one per 64 bytes (a step's bytes). The row kernels' work per byte
// keeps the out-of-order window from running far enough ahead on its own:
// measured (bench_kernels, 14336x4096 and 4096x14336 GEMV) +25-60% for every
// type; 2048, 3072 and 4096 bytes within noise of each other (weights in
// L3), 512 and 1024 lower. Rows are contiguous, so it runs on into the next
// row.
//
// Weights from DRAM (a decode step over a model larger than the caches:
// bench_kernels --cold) need more: at 3072 the int8 kernels read cold at
// 0.61-0.90 of the same-size cold read, the k = 14336 rows lowest; at 6144
// 0.73-1.05 (bench_kernels --cold; 8192-16384 no better, prefetcht1
// no better). Warm (weights in L3) 6144 is level with 3072.
//
// Q8_0 rows of more than kSplitPrefetchK values (k = 14336: the FFN down
// projection) prefetch in two steps instead (PrefetchTwoStep): prefetcht2
// kFarPrefetchBytes ahead and prefetcht0 kNearPrefetchBytes ahead, one of
// each per 64-byte line. Such a row re-reads its 16 KiB activation row for
// every weight row, and the 6 KiB prefetcht0 window competes with it in L1:
// cold, Q8_0 at k = 14336 ran at 0.74-0.80 of the same-size cold read (k =
// 4096: 0.92-0.98), the same kernel over a 4 KiB slice of the activations
// (wrong results, timing only) at 0.90; two steps: 0.94 (8 pairs, either
// binary first; bench_kernels --cold). Not taken: at k = 4096 (Q8_0
// 0.79 against 0.92), and for the other types at k = 14336, where it was
// level or lower once the run order was alternated.
constexpr int kPrefetchBytes = 6144;
HWY_INLINE void PrefetchAhead(const uint8_t* p, int bytes) {
  for (int c = 0; c < bytes; c += 64) __builtin_prefetch(p + kPrefetchBytes + c);
}
constexpr int64_t kSplitPrefetchK = 8192;
constexpr int kFarPrefetchBytes = 16384, kNearPrefetchBytes = 1024;
HWY_INLINE void PrefetchTwoStep(const uint8_t* p, int bytes) {
  // Each line once: those whose start is in [p, p + bytes) + the distance.
  const uintptr_t s = reinterpret_cast<uintptr_t>(p) + kFarPrefetchBytes;
  for (uintptr_t a = (s + 63) & ~uintptr_t{63}; a < s + bytes; a += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 1);  // prefetcht2
    __builtin_prefetch(reinterpret_cast<const void*>(a - kFarPrefetchBytes + kNearPrefetchBytes));
  }
}

// Per 256 activation values (one Q2_K / Q3_K super-block), made per call
// with the group-major codes (GroupMajorActs): per 16-value group g the block
// scale dx[g] (of values 16g..16g+15: d of 32-value block g / 2) and
// - Q3_K: c[g] = K16Centre * (sum of the group's 16 codes), the integer
//   offset added to its code sums (w = A (u - 4): the -4 folded into the
//   exact integer sum);
// - Q2_K: s[g] = dx[g] * (sum of its codes) = Int8Acts::s16, whose offset
//   -dmin * min has its own scale (here so that the kernel reads one
//   128-byte record per super-block besides the codes).
// So the kernel needs no per-row scale permute and, for Q3_K, no offset term.
struct alignas(64) K16Acts {
  float dx[16];
  union {
    int32_t c[16];
    float s[16];
  };
};

#if HQEKV_VNNI
// GFNI (every AVX-512 VNNI CPU so far has it; checked at run time): one
// vgf2p8affineqb per vector extracts a bit field of every byte (a different
// one per 64-bit lane), in place of a shift and a mask. Matrix row 7 - i
// selects the source bit of result bit i.
constexpr uint64_t BitsTo(int src, int dst, int n) {
  uint64_t m = 0;
  for (int i = 0; i < n; ++i) m |= uint64_t{1} << (src + i) << (8 * (7 - dst - i));
  return m;
}
inline bool HasGfni() {
  static const bool has = __builtin_cpu_supports("gfni");
  return has;
}
#else
constexpr bool HasGfni() { return false; }
#endif

// Quantizes m*k/32 blocks of 32 values (see Int8Acts).
void QuantizeBlocks(const float* x, int64_t blocks, int8_t* q, float* d, float* s, float* s16) {
  const hn::CappedTag<float, 16> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const int N = static_cast<int>(hn::Lanes(df));
  for (int64_t b = 0; b < blocks; ++b, x += 32, q += 32) {
    auto vmax = hn::Zero(df);
    for (int j = 0; j < 32; j += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, x + j)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    const auto vid = hn::Set(df, id);
    int32_t half_sum[2];
    for (int h = 0; h < 2; ++h) {
      auto vsum = hn::Zero(di);
      for (int j = 16 * h; j < 16 * h + 16; j += N) {
        const auto qi = hn::NearestInt(hn::Mul(hn::LoadU(df, x + j), vid));
        vsum = hn::Add(vsum, qi);
        hn::StoreU(hn::DemoteTo(d8, qi), d8, q + j);
      }
      half_sum[h] = hn::GetLane(hn::SumOfLanes(di, vsum));
    }
    const float dd = amax / 127.0f;
    d[b] = dd;
    s[b] = dd * static_cast<float>(half_sum[0] + half_sum[1]);
    s16[2 * b] = dd * static_cast<float>(half_sum[0]);
    s16[2 * b + 1] = dd * static_cast<float>(half_sum[1]);
  }
}

#if HQEKV_INT8_X86
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

#if HQEKV_INT8_512
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
#else
template <TensorType T>
constexpr bool K16GroupMajor() {
  return false;
}
#endif  // HQEKV_INT8_512

// sum_j a[j] b[j], j < n (the B * s offset terms of a decoded row).
HWY_INLINE float DotF32(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
  float sum = HorizontalSum(acc);
  for (; j < n; ++j) sum += a[j] * b[j];
  return sum;
}

// out[i] = decoded row (codes u[k] <= 63, A/B per group of G) . activation row
// i, i < M; xg[i] = the activation's per-G sums (s or s16). maddubs cannot
// saturate: 63 * 127 * 2 < 32768.
template <int M, int G>
void RowDecoded(const uint8_t* u, const float* A, const float* B, int64_t k,
                const int8_t* const* xq, const float* const* xd, const float* const* xg,
                float* out) {
  __m256 acc[M];
  for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
  const __m256i halves = _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0);
  for (int64_t b = 0; b < k / 32; ++b) {
    const __m256i uv = Load32(u + 32 * b);
    __m256 av;  // lane l: A of the group holding the values of int32 lane l
    if constexpr (G == 32) {
      av = _mm256_set1_ps(A[b]);
    } else {
      av = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(Load2F(A + 2 * b)), halves);
    }
    for (int i = 0; i < M; ++i) {
      const __m256 sv = _mm256_mul_ps(av, _mm256_set1_ps(xd[i][b]));
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DotUS(uv, Load32(xq[i] + 32 * b))), sv, acc[i]);
    }
  }
  for (int i = 0; i < M; ++i) out[i] = HorizontalSum(acc[i]) + DotF32(B, xg[i], k / G);
}

#if HQEKV_VNNI
// ---- GEMM panels (AVX-512 VNNI) ----
constexpr int kPanelRows = 16;      // weight rows per panel = int32 lanes
constexpr int kPanelActs = 8;       // activation rows per register tile
constexpr int64_t kPanelKc = 1024;  // k chunk

struct PanelBuf {
  std::vector<uint8_t> U, u;  // interleaved panel; one decoded row
  std::vector<float> Af, Bf, A, B;
};

// Decodes values [c0, c0 + kc) of weight rows r..r+rows (rows <= 16; the rest
// zero) into pb: U[t][r][4] = codes 4t..4t+3 of row r, Af/Bf[g][r].
void BuildPanel(TensorType t, const uint8_t* w, int64_t row_bytes, int64_t r, int rows, int64_t c0,
                int64_t kc, PanelBuf* pb) {
  const int G = Int8Group(t);
  const int64_t ng = kc / G;
  const uint8_t* base = w + r * row_bytes + c0 / BlockSize(t) * BlockBytes(t);
  for (int rr = 0; rr < kPanelRows; ++rr) {
    if (rr < rows) {
      DecodeRowInt8(t, base + rr * row_bytes, kc, pb->u.data(), pb->A.data(), pb->B.data());
    } else {
      std::fill_n(pb->u.data(), kc, uint8_t{0});
      std::fill_n(pb->A.data(), ng, 0.0f);
      std::fill_n(pb->B.data(), ng, 0.0f);
    }
    uint8_t* dst = pb->U.data() + 4 * rr;
    for (int64_t q4 = 0; q4 < kc / 4; ++q4) std::memcpy(dst + 64 * q4, pb->u.data() + 4 * q4, 4);
    for (int64_t g = 0; g < ng; ++g) {
      pb->Af[g * kPanelRows + rr] = pb->A[g];
      pb->Bf[g * kPanelRows + rr] = pb->B[g];
    }
  }
}

HWY_INLINE int32_t I32At(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// y[i * ldy + r] (+)= panel row r . activation row i over one k chunk, for
// i < MR, r < 16 (mask). q / d / sg: the activation chunk's codes, block
// scales and per-G sums, rows ldq / ldd / lds apart.
template <int MR, int G>
void PanelTile(const PanelBuf& pb, int64_t kc, const int8_t* q, int64_t ldq, const float* d,
               int64_t ldd, const float* sg, int64_t lds, float* y, int64_t ldy, __mmask16 mask,
               bool add) {
  __m512 facc[MR];
  for (int i = 0; i < MR; ++i) facc[i] = _mm512_setzero_ps();
  const uint8_t* U = pb.U.data();
  for (int64_t g = 0; g < kc / G; ++g) {
    __m512i iacc[MR];
    for (int i = 0; i < MR; ++i) iacc[i] = _mm512_setzero_si512();
    for (int t = 0; t < G / 4; ++t) {
      const __m512i wv = _mm512_loadu_si512(U + 64 * (g * (G / 4) + t));
      for (int i = 0; i < MR; ++i) {
        iacc[i] =
            _mm512_dpbusd_epi32(iacc[i], wv, _mm512_set1_epi32(I32At(q + i * ldq + g * G + 4 * t)));
      }
    }
    const __m512 av = _mm512_loadu_ps(pb.Af.data() + g * kPanelRows);
    const __m512 bv = _mm512_loadu_ps(pb.Bf.data() + g * kPanelRows);
    for (int i = 0; i < MR; ++i) {
      const __m512 sv = _mm512_mul_ps(av, _mm512_set1_ps(d[i * ldd + g * G / 32]));
      facc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[i]), sv, facc[i]);
      facc[i] = _mm512_fmadd_ps(bv, _mm512_set1_ps(sg[i * lds + g]), facc[i]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* yi = y + i * ldy;
    const __m512 v = add ? _mm512_add_ps(_mm512_maskz_loadu_ps(mask, yi), facc[i]) : facc[i];
    _mm512_mask_storeu_ps(yi, mask, v);
  }
}

template <int G>
void PanelTileAny(int mr, const PanelBuf& pb, int64_t kc, const int8_t* q, int64_t ldq,
                  const float* d, int64_t ldd, const float* sg, int64_t lds, float* y, int64_t ldy,
                  __mmask16 mask, bool add) {
  switch (mr) {
#define HQEKV_TILE(n) \
  case n:             \
    return PanelTile<n, G>(pb, kc, q, ldq, d, ldd, sg, lds, y, ldy, mask, add);
    HQEKV_TILE(8)
    HQEKV_TILE(7)
    HQEKV_TILE(6)
    HQEKV_TILE(5)
    HQEKV_TILE(4)
    HQEKV_TILE(3)
    HQEKV_TILE(2)
    default:
      return PanelTile<1, G>(pb, kc, q, ldq, d, ldd, sg, lds, y, ldy, mask, add);
#undef HQEKV_TILE
  }
}

// The panel GEMM: y[(i - i0) * ldy + r] for r in [r0, r1), i in [i0, i1).
void PanelRange(TensorType t, const uint8_t* w, int64_t row_bytes, const Int8Acts& a, int64_t i0,
                int64_t i1, int64_t r0, int64_t r1, float* y, int64_t ldy) {
  const int G = Int8Group(t);
  const int64_t k = a.k;
  const float* sg = G == 32 ? a.s.data() : a.s16.data();
  const int64_t lds = k / G, ldd = k / 32;
  thread_local PanelBuf pb;
  const int64_t kc_max = std::min(kPanelKc, k);
  pb.U.resize(static_cast<size_t>(kPanelRows * kc_max));
  pb.u.resize(static_cast<size_t>(kc_max));
  pb.Af.resize(static_cast<size_t>(kPanelRows * kc_max / 16));
  pb.Bf.resize(pb.Af.size());
  pb.A.resize(static_cast<size_t>(kc_max / 16));
  pb.B.resize(pb.A.size());
  // Activation rows per block: the block's k chunk (<= 512 KiB) stays in L2
  // while every panel of this thread passes over it.
  const int64_t mb = std::max<int64_t>(kPanelActs, (512 << 10) / kc_max);
  for (int64_t ib = i0; ib < i1; ib += mb) {
    const int64_t ie = std::min(i1, ib + mb);
    for (int64_t c0 = 0; c0 < k; c0 += kPanelKc) {
      const int64_t kc = std::min(kPanelKc, k - c0);
      for (int64_t p = r0; p < r1; p += kPanelRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kPanelRows, r1 - p));
        BuildPanel(t, w, row_bytes, p, rows, c0, kc, &pb);
        const auto mask = static_cast<__mmask16>((1u << rows) - 1);
        for (int64_t i = ib; i < ie; i += kPanelActs) {
          const int mr = static_cast<int>(std::min<int64_t>(kPanelActs, ie - i));
          const int8_t* q = a.q.data() + i * k + c0;
          const float* d = a.d.data() + i * ldd + c0 / 32;
          const float* s = sg + i * lds + c0 / G;
          float* yt = y + (i - i0) * ldy + p;
          if (G == 32) {
            PanelTileAny<32>(mr, pb, kc, q, k, d, ldd, s, lds, yt, ldy, mask, c0 > 0);
          } else {
            PanelTileAny<16>(mr, pb, kc, q, k, d, ldd, s, lds, yt, ldy, mask, c0 > 0);
          }
        }
      }
    }
  }
}
#endif  // HQEKV_VNNI

#else  // other targets: scalar integer code

template <int M>
void RowQ8_0(const uint8_t* p, int64_t nb, const int8_t* const* xq, const float* const* xd,
             float* out) {
  float acc[M] = {};
  for (int64_t b = 0; b < nb; ++b, p += 34) {
    const auto* w = reinterpret_cast<const int8_t*>(p + 2);
    const float dw = HalfAt(p);
    for (int i = 0; i < M; ++i) {
      int isum = 0;
      for (int j = 0; j < 32; ++j) isum += w[j] * xq[i][32 * b + j];
      acc[i] += dw * xd[i][b] * static_cast<float>(isum);
    }
  }
  for (int i = 0; i < M; ++i) out[i] = acc[i];
}

template <int M>
void RowQ4_K(const uint8_t* p, int64_t nsb, const int8_t* const* xq, const float* const* xd,
             const float* const* xs, float* out) {
  float acc[M] = {};
  for (int64_t sb = 0; sb < nsb; ++sb, p += 144) {
    const float dw = HalfAt(p), dmin = HalfAt(p + 2);
    const uint8_t* s = p + 4;
    for (int j = 0; j < 8; ++j) {
      const int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
      const int mn = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
      const uint8_t* qs = p + 16 + 32 * (j / 2);
      const int64_t blk = 8 * sb + j;
      for (int i = 0; i < M; ++i) {
        int isum = 0;
        for (int l = 0; l < 32; ++l) {
          isum += (j % 2 == 0 ? (qs[l] & 15) : (qs[l] >> 4)) * xq[i][32 * blk + l];
        }
        acc[i] += dw * sc * xd[i][blk] * static_cast<float>(isum) - dmin * mn * xs[i][blk];
      }
    }
  }
  for (int i = 0; i < M; ++i) out[i] = acc[i];
}

template <int M, int G>
void RowDecoded(const uint8_t* u, const float* A, const float* B, int64_t k,
                const int8_t* const* xq, const float* const* xd, const float* const* xg,
                float* out) {
  float acc[M] = {};
  for (int64_t g = 0; g < k / G; ++g) {
    for (int i = 0; i < M; ++i) {
      int isum = 0;
      for (int j = 0; j < G; ++j) isum += u[G * g + j] * xq[i][G * g + j];
      acc[i] += A[g] * xd[i][G * g / 32] * static_cast<float>(isum) + B[g] * xg[i][g];
    }
  }
  for (int i = 0; i < M; ++i) out[i] = acc[i];
}

#endif  // HQEKV_INT8_X86

// Activation rows of one kernel call: codes, block scales, per-G sums.
struct ActRows {
  const int8_t* q[4];
  const float *d[4], *s[4], *g[4];
  const K16Acts* k16[4];  // Q2_K / Q3_K on AVX-512 (RowK16GM_512)
};

#if HQEKV_INT8_512
// Legacy rows: four blocks per step on the AVX3_DL target (AVX-512 VBMI +
// VNNI) when the CPU has GFNI (every such CPU so far), else two per step.
template <TensorType T, int M>
void RowLegacy(const uint8_t* p, int64_t nb, const int8_t* const* xq, const float* const* xd,
               const float* const* xs, float* out) {
#if HQEKV_VNNI
  if (HasGfni()) return RowLegacy4_512<T, M>(p, nb, xq, xd, xs, out);
#endif
  RowLegacy512<T, M>(p, nb, xq, xd, xs, out);
}

#endif

// Types whose row kernels read the weight blocks directly (no decoded row).
inline bool HasFusedRowKernel(TensorType t) {
  if (t == TensorType::kQ8_0 || t == TensorType::kQ4_K) return true;
#if HQEKV_INT8_X86
  if (t == TensorType::kQ5_K || t == TensorType::kIQ4_NL || t == TensorType::kIQ4_XS) return true;
#endif
#if HQEKV_INT8_512
  return t == TensorType::kQ4_0 || t == TensorType::kQ4_1 || t == TensorType::kQ5_0 ||
         t == TensorType::kQ5_1 || t == TensorType::kQ6_K || t == TensorType::kQ3_K ||
         t == TensorType::kQ2_K;
#else
  return false;
#endif
}

// A decoded row (types without a fused row kernel): codes and (A, B) per group.
struct DecodedRow {
  std::vector<uint8_t> u;
  std::vector<float> A, B;
};

template <int M>
void RowAny(TensorType t, const uint8_t* row, int64_t k, const DecodedRow& dec, const ActRows& x,
            float* out) {
  if (t == TensorType::kQ8_0) {
#if HQEKV_INT8_512
    if (k > kSplitPrefetchK) return RowQ8_0x512<M, true>(row, k / 32, x.q, x.d, out);
    RowQ8_0x512<M>(row, k / 32, x.q, x.d, out);
#else
    RowQ8_0<M>(row, k / 32, x.q, x.d, out);
#endif
  } else if (t == TensorType::kQ4_K) {
#if HQEKV_VNNI
    if (HasGfni()) return RowQ4_K<M, false, true>(row, k / 256, x.q, x.d, x.s, out);
#endif
    RowQ4_K<M>(row, k / 256, x.q, x.d, x.s, out);
#if HQEKV_INT8_X86
  } else if (t == TensorType::kQ5_K) {
#if HQEKV_VNNI
    if (HasGfni()) return RowQ4_K<M, true, true>(row, k / 256, x.q, x.d, x.s, out);
#endif
    RowQ4_K<M, true>(row, k / 256, x.q, x.d, x.s, out);
  } else if (t == TensorType::kIQ4_NL) {
#if HQEKV_VNNI
    if (HasGfni()) return RowLegacy4_512<TensorType::kIQ4_NL, M>(row, k / 32, x.q, x.d, x.s, out);
#endif
    RowIq4<M, false>(row, k / 32, x.q, x.d, out);
  } else if (t == TensorType::kIQ4_XS) {
#if HQEKV_VNNI
    if (HasGfni()) return RowIq4Xs512<M>(row, k / 256, x.q, x.d, x.s, out);
#endif
    RowIq4<M, true>(row, k / 32, x.q, x.d, out);
#endif
#if HQEKV_INT8_512
  } else if (t == TensorType::kQ4_0) {
    RowLegacy<TensorType::kQ4_0, M>(row, k / 32, x.q, x.d, x.s, out);
  } else if (t == TensorType::kQ4_1) {
    RowLegacy<TensorType::kQ4_1, M>(row, k / 32, x.q, x.d, x.s, out);
  } else if (t == TensorType::kQ5_0) {
    RowLegacy<TensorType::kQ5_0, M>(row, k / 32, x.q, x.d, x.s, out);
  } else if (t == TensorType::kQ5_1) {
    RowLegacy<TensorType::kQ5_1, M>(row, k / 32, x.q, x.d, x.s, out);
  } else if (t == TensorType::kQ6_K) {
#if HQEKV_VNNI
    if (HasGfni()) return RowK16GM_512<TensorType::kQ6_K, M, true>(row, k / 256, x.q, x.k16, out);
#endif
    RowQ6K_512<M>(row, k / 256, x.q, x.d, x.g, out);
  } else if (t == TensorType::kQ3_K) {
    if (HasGfni()) {
      RowK16GM_512<TensorType::kQ3_K, M, HQEKV_VNNI == 1>(row, k / 256, x.q, x.k16, out);
    } else {
      RowK16GM_512<TensorType::kQ3_K, M>(row, k / 256, x.q, x.k16, out);
    }
  } else if (t == TensorType::kQ2_K) {
    if (HasGfni()) {
      RowK16GM_512<TensorType::kQ2_K, M, HQEKV_VNNI == 1>(row, k / 256, x.q, x.k16, out);
    } else {
      RowK16GM_512<TensorType::kQ2_K, M>(row, k / 256, x.q, x.k16, out);
    }
#endif
  } else if (Int8Group(t) == 32) {
    RowDecoded<M, 32>(dec.u.data(), dec.A.data(), dec.B.data(), k, x.q, x.d, x.g, out);
  } else {
    RowDecoded<M, 16>(dec.u.data(), dec.A.data(), dec.B.data(), k, x.q, x.d, x.g, out);
  }
}

// Row kernels: y[(i - i0) * ldy + r] for r in [r0, r1), i in [i0, i1).
// Activation rows in blocks of ~256 KiB (L2) and groups of 4 (one weight
// block load / row decode for 4 rows).
void RowRange(TensorType t, const uint8_t* w, int64_t row_bytes, const Int8Acts& a, int64_t i0,
              int64_t i1, int64_t r0, int64_t r1, float* y, int64_t ldy) {
  const int64_t k = a.k, nb = k / 32;
  const int G = Int8Group(t);
  const bool decode = !HasFusedRowKernel(t);
  thread_local DecodedRow dec;
  if (decode) {
    dec.u.resize(static_cast<size_t>(k));
    dec.A.resize(static_cast<size_t>(k / G));
    dec.B.resize(static_cast<size_t>(k / G));
  }
  const float* sg = G == 32 ? a.s.data() : a.s16.data();
  // Q2_K / Q3_K (and with GFNI Q6_K) kernels read the activation codes in
  // group-major order: a copy of rows [i0, i1) (k bytes each, once per call,
  // 64-byte aligned so that no 512-bit load splits a cache line) and a
  // K16Acts record per super-block.
  const int8_t* q = a.q.data();
  const K16Acts* k16 = nullptr;
  int64_t q_first = 0;
#if HQEKV_INT8_512
  if (t == TensorType::kQ2_K || t == TensorType::kQ3_K ||
      (t == TensorType::kQ6_K && HQEKV_VNNI == 1 && HasGfni())) {
    static_assert(HWY_ALIGNMENT >= 64);
    thread_local hwy::AlignedFreeUniquePtr<int8_t[]> gm;
    thread_local size_t gm_size = 0;
    thread_local std::vector<K16Acts> gk;  // alignas(64)
    const auto codes = static_cast<size_t>((i1 - i0) * k);
    if (codes > gm_size) {
      gm = hwy::AllocateAligned<int8_t>(codes);
      gm_size = codes;
    }
    gk.resize(static_cast<size_t>((i1 - i0) * k / 256));
    GroupMajorActs(t, a.q_row(i0), a.d_row(i0), i1 - i0, k, gm.get(), gk.data());
    q = gm.get();
    k16 = gk.data();
    q_first = i0;
  }
#endif
  const int64_t mb = std::max<int64_t>(4, (256 << 10) / k / 4 * 4);
  for (int64_t ib = i0; ib < i1; ib += mb) {
    const int64_t ie = std::min(i1, ib + mb);
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w + r * row_bytes;
      if (decode) DecodeRowInt8(t, row, k, dec.u.data(), dec.A.data(), dec.B.data());
      for (int64_t i = ib; i < ie; i += 4) {
        const int n = static_cast<int>(std::min<int64_t>(4, ie - i));
        ActRows x;
        for (int j = 0; j < n; ++j) {
          x.q[j] = q + (i + j - q_first) * k;
          x.d[j] = a.d.data() + (i + j) * nb;
          x.s[j] = a.s.data() + (i + j) * nb;
          x.g[j] = sg + (i + j) * (k / G);
          x.k16[j] = k16 == nullptr ? nullptr : k16 + (i + j - q_first) * (k / 256);
        }
        float out[4];
        switch (n) {
          case 4:
            RowAny<4>(t, row, k, dec, x, out);
            break;
          case 3:
            RowAny<3>(t, row, k, dec, x, out);
            break;
          case 2:
            RowAny<2>(t, row, k, dec, x, out);
            break;
          default:
            RowAny<1>(t, row, k, dec, x, out);
        }
        for (int j = 0; j < n; ++j) y[(i + j - i0) * ldy + r] = out[j];
      }
    }
  }
}

void Int8RowsRange(int type, const uint8_t* w, int64_t row_bytes, const Int8Acts* a, int64_t i0,
                   int64_t i1, int64_t r0, int64_t r1, float* y, int64_t ldy) {
  const auto t = static_cast<TensorType>(type);
#if HQEKV_VNNI
  if (i1 - i0 >= kInt8PanelMinRows) return PanelRange(t, w, row_bytes, *a, i0, i1, r0, r1, y, ldy);
#endif
  RowRange(t, w, row_bytes, *a, i0, i1, r0, r1, y, ldy);
}

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::kernels
#if HQEKV_VNNI
#pragma GCC pop_options
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::kernels {

HWY_EXPORT(QuantizeBlocks);
HWY_EXPORT(Int8RowsRange);

void QuantizeActs(const float* x, int64_t m, int64_t k, Int8Acts* out) {
  out->m = m;
  out->k = k;
  out->q.resize(static_cast<size_t>(m * k));
  out->d.resize(static_cast<size_t>(m * k / 32));
  out->s.resize(static_cast<size_t>(m * k / 32));
  out->s16.resize(static_cast<size_t>(m * k / 16));
  HWY_DYNAMIC_DISPATCH(QuantizeBlocks)
  (x, m * k / 32, out->q.data(), out->d.data(), out->s.data(), out->s16.data());
}

float DotInt8(TensorType t, const void* row, const Int8Acts& a, int64_t i) {
  float y = 0;
  HWY_DYNAMIC_DISPATCH(Int8RowsRange)
  (static_cast<int>(t), static_cast<const uint8_t*>(row), 0, &a, i, i + 1, 0, 1, &y, 1);
  return y;
}

void Int8Rows(const WeightMatrix& w, const Int8Acts& a, int64_t r0, int64_t r1, float* y,
              int64_t ldy) {
  HWY_DYNAMIC_DISPATCH(Int8RowsRange)
  (static_cast<int>(w.type), static_cast<const uint8_t*>(w.data), RowBytes(w.type, w.k), &a, 0, a.m,
   r0, r1, y, ldy);
}

}  // namespace hqekv::kernels
#endif  // HWY_ONCE
