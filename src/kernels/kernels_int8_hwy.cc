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

#include "kernels/dispatch.h"

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
#include "kernels/kernels_int8_x86-inl.h"

#if HQEKV_INT8_512
#include "kernels/kernels_int8_avx512-inl.h"
#include "kernels/kernels_int8_kquant512-inl.h"
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
#include "kernels/kernels_int8_panel-inl.h"
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

// This target's entry points (kernels/dispatch.h).
const Int8Kernels* Int8KernelTable() {
  static constexpr Int8Kernels kTable = {&QuantizeBlocks, &Int8RowsRange};
  return &kTable;
}

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::kernels
#if HQEKV_VNNI
#pragma GCC pop_options
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::kernels {

HWY_EXPORT(Int8KernelTable);
const Int8Kernels& Int8KernelsForCpu() { return *HWY_DYNAMIC_DISPATCH(Int8KernelTable)(); }

void QuantizeActs(const float* x, int64_t m, int64_t k, Int8Acts* out) {
  out->m = m;
  out->k = k;
  out->q.resize(static_cast<size_t>(m * k));
  out->d.resize(static_cast<size_t>(m * k / 32));
  out->s.resize(static_cast<size_t>(m * k / 32));
  out->s16.resize(static_cast<size_t>(m * k / 16));
  Int8KernelsForCpu().quantize_blocks(x, m * k / 32, out->q.data(), out->d.data(), out->s.data(),
                                      out->s16.data());
}

float DotInt8(TensorType t, const void* row, const Int8Acts& a, int64_t i) {
  float y = 0;
  Int8KernelsForCpu().rows_range(static_cast<int>(t), static_cast<const uint8_t*>(row), 0, &a, i,
                                 i + 1, 0, 1, &y, 1);
  return y;
}

void Int8Rows(const WeightMatrix& w, const Int8Acts& a, int64_t r0, int64_t r1, float* y,
              int64_t ldy) {
  Int8KernelsForCpu().rows_range(static_cast<int>(w.type), static_cast<const uint8_t*>(w.data),
                                 RowBytes(w.type, w.k), &a, 0, a.m, r0, r1, y, ldy);
}

}  // namespace hqekv::kernels
#endif  // HWY_ONCE
