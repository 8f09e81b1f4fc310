// bf16 decode-attention kernels over fp8 chunks
// (attn/multi_query_rows_bf16.h). Codes widen to bf16 by two vpermi2b byte
// lookups over the 7-bit magnitude (low and high byte of the bf16; the sign
// ORed into the high byte) and one unpack pair, 64 codes at a time: 5 vector
// operations against ~16 for the fp16 route of the fp32 kernels
// (multi_query_rows-inl.h: sign-extend, shift, mask, two clamps, two
// vcvtph2ps per 32 codes), and vdpbf16ps does 32 products where an fp32 FMA
// does 16. The unpacks leave channels in the order 16L + {0..7} (first
// vector) and 16L + {8..15} (second), L the 128-bit block: the query rows are
// stored in that order once per KV head (PrepareBf16Query), and the value
// sums are put back in channel order once per chunk. vdpbf16ps through
// inline asm (in place; through the intrinsic GCC 12 copies accumulators, as
// seen for vpdpwssd in attn/multi_query_rows_q16.cc).
//
// Kernel alone (32 x 128 E4M3 chunk, 4 rows, L2, kernel alone):
// K 300 -> 165 ns, V 275 -> 200 ns against the fp32 kernels.
//
// Compiled once with the AVX3_DL instruction sets plus AVX512_BF16
// (attn/single_isa.h; GCC, x86-64) and run only where the CPU has both
// (BF16 checked once at run time; Zen 4/5, Sapphire Rapids): elsewhere the
// entry points report "no kernel" and the caller keeps the fp32 kernels.
#include <algorithm>
#include <cstring>

#include "quant/internal.h"
#include "attn/single_isa.h"
#include "attn/multi_query_rows_bf16.h"

#if HQEKV_SINGLE_ISA
HQEKV_SINGLE_ISA_BEGIN(",avx512vbmi,avx512bf16")
namespace hqekv::attn::rows_bf16 {
using namespace ::hqekv::quant;
namespace {

constexpr int kMaxD = 512;
constexpr int kMaxT = 64;

bool CpuHasBf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

// The two byte planes (low / high byte of the bf16) of the 128 magnitudes,
// each as two 64-byte tables for vpermi2b.
struct Tables {
  __m512i lo0, lo1, hi0, hi1;
};
struct Planes {
  alignas(64) uint8_t lo[128];
  alignas(64) uint8_t hi[128];
};
Planes MakePlanes(bool e4m3) {
  const uint16_t* t = Fp8Bf16Table(e4m3);
  Planes p;
  for (int c = 0; c < 128; ++c) {
    p.lo[c] = static_cast<uint8_t>(t[c] & 0xFF);
    p.hi[c] = static_cast<uint8_t>(t[c] >> 8);
  }
  return p;
}
Tables LoadTables(bool e4m3) {
  static const Planes e4 = MakePlanes(true), e5 = MakePlanes(false);
  const Planes& p = e4m3 ? e4 : e5;
  return {_mm512_load_si512(p.lo), _mm512_load_si512(p.lo + 64), _mm512_load_si512(p.hi),
          _mm512_load_si512(p.hi + 64)};
}

// 64 codes at p as bf16: *w0 channels 16L + 0..7 in block L, *w1 16L + 8..15.
HWY_INLINE void Decode64(const uint8_t* p, const Tables& tb, __m512i sign, __m512i* w0,
                         __m512i* w1) {
  const __m512i c = _mm512_loadu_si512(p);
  const __m512i lo = _mm512_permutex2var_epi8(tb.lo0, c, tb.lo1);  // bit 7 ignored
  __m512i hi = _mm512_permutex2var_epi8(tb.hi0, c, tb.hi1);
  hi = _mm512_ternarylogic_epi32(hi, c, sign, 0xF8);  // hi | (c & 0x80)
  *w0 = _mm512_unpacklo_epi8(lo, hi);
  *w1 = _mm512_unpackhi_epi8(lo, hi);
}

// acc += the bf16 pair products of x and y (vdpbf16ps), in place.
HWY_INLINE void DpBf16(__m512& acc, __m512i x, __m512i y) {
  asm("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(x), "v"(y));
}
// The same with one 32-bit pair broadcast from memory.
HWY_INLINE void DpBf16Bcst(__m512& acc, __m512i x, const uint32_t* y) {
  asm("vdpbf16ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(x), "m"(*y));
}

// True in the lanes where |v| is not finite or >= 2^126 (bf16 rounding could
// overflow).
HWY_INLINE __mmask16 BadMask(__m512 v) {
  return _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(0x1p126f), _CMP_NLT_UQ);
}

// bf16 bits (nearest even) of the 16 floats of v (finite, |v| < 2^126).
HWY_INLINE __m256i RoundToBf16(__m512 v) {
  const __m512i b = _mm512_castps_si512(v);
  const __m512i r = _mm512_add_epi32(
      b, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF),
                          _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1))));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

// Words of one query row per 64-channel block (first decoded vector's order,
// then the second's), and of up to 4 rows: block b of row h at
// b·kQueryBlock + h·kRowBlock.
constexpr int kRowBlock = 64;
constexpr int kQueryBlock = 4 * kRowBlock;

// Query row q[0, D) as bf16 in the decode's channel order: block b of 64
// channels at out + b·kQueryBlock. False when some q is not finite or too big.
bool SplitQueryRow(const float* q, int D, uint16_t* out) {
  alignas(64) uint16_t nat[kMaxD];
  __mmask16 bad = 0;
  for (int d = 0; d < D; d += 16) {
    const __m512 v = _mm512_loadu_ps(q + d);
    bad |= BadMask(v);
    _mm256_store_si256(reinterpret_cast<__m256i*>(nat + d), RoundToBf16(v));
  }
  if (bad != 0) return false;
  // Word j of the first decoded vector is channel 16(j/8) + j%8, of the
  // second 16(j/8) + 8 + j%8 (within 64 channels).
  const __m512i p0 = _mm512_set_epi16(55, 54, 53, 52, 51, 50, 49, 48, 39, 38, 37, 36, 35, 34, 33,
                                      32, 23, 22, 21, 20, 19, 18, 17, 16, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i p1 = _mm512_add_epi16(p0, _mm512_set1_epi16(8));
  for (int d = 0; d < D; d += 64) {
    uint16_t* o = out + (d / 64) * kQueryBlock;
    const __m512i a = _mm512_load_si512(nat + d), b = _mm512_load_si512(nat + d + 32);
    _mm512_storeu_si512(o, _mm512_permutex2var_epi16(a, p0, b));
    _mm512_storeu_si512(o + 32, _mm512_permutex2var_epi16(a, p1, b));
  }
  return true;
}

// Lanes of v[0..3] summed, in lanes 0..3.
HWY_INLINE __m128 Sum4(const __m512 v[4]) {
  const __m512 a01 = _mm512_add_ps(_mm512_unpacklo_ps(v[0], v[1]), _mm512_unpackhi_ps(v[0], v[1]));
  const __m512 a23 = _mm512_add_ps(_mm512_unpacklo_ps(v[2], v[3]), _mm512_unpackhi_ps(v[2], v[3]));
  const __m512d x0 = _mm512_unpacklo_pd(_mm512_castps_pd(a01), _mm512_castps_pd(a23));
  const __m512d x1 = _mm512_unpackhi_pd(_mm512_castps_pd(a01), _mm512_castps_pd(a23));
  const __m512 x = _mm512_add_ps(_mm512_castpd_ps(x0), _mm512_castpd_ps(x1));
  const __m512 y = _mm512_add_ps(x, _mm512_shuffle_f32x4(x, x, 0x4E));
  const __m512 z = _mm512_add_ps(y, _mm512_shuffle_f32x4(y, y, 0xB1));
  return _mm512_castps512_ps128(z);
}

// scores[h][t] for MB <= 4 rows (qp: SplitQueryRow's blocks), tokens [0, T):
// four tokens x MB rows per pass, the query vectors of a 64-channel block in
// registers (through memory operands every code vector cost 4 extra loads:
// 280 instead of 165 ns per chunk).
template <int MB>
void DotBlock(const uint8_t* codes, float s, int T, int D, const uint16_t* qp, const Tables& tb,
              float* scores, size_t ss) {
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
  int t0 = 0;
  for (; t0 + 4 <= T; t0 += 4) {
    __m512 acc[MB][4];
    for (int h = 0; h < MB; ++h) {
      for (int k = 0; k < 4; ++k) acc[h][k] = _mm512_setzero_ps();
    }
    const uint8_t* row = codes + static_cast<size_t>(t0) * D;
    const uint16_t* qb = qp;
    for (int d = 0; d < D; d += 64, qb += kQueryBlock) {
      __m512i q0[MB], q1[MB];
      for (int h = 0; h < MB; ++h) {
        q0[h] = _mm512_loadu_si512(qb + h * kRowBlock);
        q1[h] = _mm512_loadu_si512(qb + h * kRowBlock + 32);
      }
      for (int k = 0; k < 4; ++k) {
        __m512i w0, w1;
        Decode64(row + static_cast<size_t>(k) * D + d, tb, sign, &w0, &w1);
        for (int h = 0; h < MB; ++h) {
          DpBf16(acc[h][k], w0, q0[h]);
          DpBf16(acc[h][k], w1, q1[h]);
        }
      }
    }
    const __m128 s4 = _mm_set1_ps(s);
    for (int h = 0; h < MB; ++h) _mm_storeu_ps(scores + h * ss + t0, _mm_mul_ps(Sum4(acc[h]), s4));
  }
  for (; t0 < T; ++t0) {
    __m512 acc[MB];
    for (int h = 0; h < MB; ++h) acc[h] = _mm512_setzero_ps();
    const uint8_t* row = codes + static_cast<size_t>(t0) * D;
    const uint16_t* qb = qp;
    for (int d = 0; d < D; d += 64, qb += kQueryBlock) {
      __m512i w0, w1;
      Decode64(row + d, tb, sign, &w0, &w1);
      for (int h = 0; h < MB; ++h) {
        DpBf16(acc[h], w0, _mm512_loadu_si512(qb + h * kRowBlock));
        DpBf16(acc[h], w1, _mm512_loadu_si512(qb + h * kRowBlock + 32));
      }
    }
    for (int h = 0; h < MB; ++h) scores[h * ss + t0] = _mm512_reduce_add_ps(acc[h]) * s;
  }
}

// ------------------------------------------------------------- V (weights)

// Row h's weights times the chunk scale as bf16, pairs of tokens (t, t + 1)
// in pairs[t/2] (low half token t). False when some product is not finite or
// too big.
bool SplitWeightRow(const float* w, float s, int T, uint32_t* pairs) {
  alignas(64) uint16_t u16[kMaxT];
  __mmask16 bad = 0;
  for (int t = 0; t < T; t += 16) {
    const int n = std::min(16, T - t);
    const __mmask16 k = static_cast<__mmask16>((1u << n) - 1);
    const __m512 u = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, w + t), _mm512_set1_ps(s));
    bad |= BadMask(u) & k;
    _mm256_store_si256(reinterpret_cast<__m256i*>(u16 + t), RoundToBf16(u));
  }
  if (bad != 0) return false;
  std::memcpy(pairs, u16, 2 * static_cast<size_t>(T));
  return true;
}

// acc[h][d0 .. d0 + 64) += sums for MB <= 4 rows (pairs [MB][kMaxT/2]). The
// unroll pragmas keep the 16 sums in registers (without them GCC 12 kept the
// array in memory: a load and a store around every vdpbf16ps).
template <int MB>
void AxpyBlock(const uint8_t* codes, int T, int D, int d0, const uint32_t* pairs, const Tables& tb,
               float* acc, size_t as) {
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 sum[MB][4];
#pragma GCC unroll 4
  for (int h = 0; h < MB; ++h) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) sum[h][j] = _mm512_setzero_ps();
  }
  for (int t = 0; t < T; t += 2) {
    __m512i a0, a1, b0, b1;
    Decode64(codes + static_cast<size_t>(t) * D + d0, tb, sign, &a0, &a1);
    Decode64(codes + static_cast<size_t>(t + 1) * D + d0, tb, sign, &b0, &b1);
    // x[j] dword 4L + i: tokens (t, t + 1) of channel 16L + 4j + i.
    const __m512i x[4] = {_mm512_unpacklo_epi16(a0, b0), _mm512_unpackhi_epi16(a0, b0),
                          _mm512_unpacklo_epi16(a1, b1), _mm512_unpackhi_epi16(a1, b1)};
    const uint32_t* p = pairs + t / 2;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
#pragma GCC unroll 4
      for (int h = 0; h < MB; ++h) DpBf16Bcst(sum[h][j], x[j], p + h * (kMaxT / 2));
    }
  }
  // Block L of channel order = [sum0.L, sum1.L, sum2.L, sum3.L].
#pragma GCC unroll 4
  for (int h = 0; h < MB; ++h) {
    const __m512 t0 = _mm512_shuffle_f32x4(sum[h][0], sum[h][1], 0x44);
    const __m512 t1 = _mm512_shuffle_f32x4(sum[h][2], sum[h][3], 0x44);
    const __m512 t2 = _mm512_shuffle_f32x4(sum[h][0], sum[h][1], 0xEE);
    const __m512 t3 = _mm512_shuffle_f32x4(sum[h][2], sum[h][3], 0xEE);
    const __m512 o[4] = {_mm512_shuffle_f32x4(t0, t1, 0x88), _mm512_shuffle_f32x4(t0, t1, 0xDD),
                         _mm512_shuffle_f32x4(t2, t3, 0x88), _mm512_shuffle_f32x4(t2, t3, 0xDD)};
    float* ah = acc + h * as + d0;
    for (int j = 0; j < 4; ++j) {
      _mm512_storeu_ps(ah + 16 * j, _mm512_add_ps(_mm512_loadu_ps(ah + 16 * j), o[j]));
    }
  }
}
}  // namespace

// Rows h in [0, m) of q into words (Bf16QueryWords(m, D) of them): rows
// 4b .. 4b + 3 at b·(D/64)·kQueryBlock, row h % 4 at + (h % 4)·kRowBlock.
bool PrepareImpl(const float* q, size_t qs, int m, int D, uint16_t* words) {
  if (m <= 0 || D < 64 || D > kMaxD || D % 64 != 0 || !CpuHasBf16()) return false;
  for (int h = 0; h < m; ++h) {
    uint16_t* o = words + static_cast<size_t>(h / 4) * (D / 64) * kQueryBlock + (h % 4) * kRowBlock;
    if (!SplitQueryRow(q + h * qs, D, o)) return false;
  }
  return true;
}

bool DotPreparedImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     const uint16_t* words, int m, float* scores, size_t ss) {
  if (m <= 0 || !Bf16QueryRowsApply(f, T, D) || !CpuHasBf16()) return false;
  const Tables tb = LoadTables(f.kind == Kind::kFp8E4M3);
  const float s = F16ToF32(LoadF16(meta));
  for (int h0 = 0; h0 < m; h0 += 4) {
    const int mb = std::min(4, m - h0);
    const uint16_t* qp = words + static_cast<size_t>(h0 / 4) * (D / 64) * kQueryBlock;
    float* sc = scores + h0 * ss;
    switch (mb) {
      case 1:
        DotBlock<1>(codes, s, T, D, qp, tb, sc, ss);
        break;
      case 2:
        DotBlock<2>(codes, s, T, D, qp, tb, sc, ss);
        break;
      case 3:
        DotBlock<3>(codes, s, T, D, qp, tb, sc, ss);
        break;
      default:
        DotBlock<4>(codes, s, T, D, qp, tb, sc, ss);
        break;
    }
  }
  return true;
}

bool AxpyRowsBf16Impl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      const float* w, size_t ws, int m, float* acc, size_t as) {
  if (m <= 0 || m > 16 || !Bf16WeightsRowsApply(f, T, D) || !CpuHasBf16()) return false;
  const float s = F16ToF32(LoadF16(meta));
  alignas(64) uint32_t pairs[16 * kMaxT / 2];
  for (int h = 0; h < m; ++h) {  // every row before any output is written
    if (!SplitWeightRow(w + h * ws, s, T, pairs + h * (kMaxT / 2))) return false;
  }
  const Tables tb = LoadTables(f.kind == Kind::kFp8E4M3);
  for (int h0 = 0; h0 < m; h0 += 4) {
    const int mb = std::min(4, m - h0);
    const uint32_t* ph = pairs + h0 * (kMaxT / 2);
    float* ah = acc + h0 * as;
    for (int d0 = 0; d0 < D; d0 += 64) {
      switch (mb) {
        case 1:
          AxpyBlock<1>(codes, T, D, d0, ph, tb, ah, as);
          break;
        case 2:
          AxpyBlock<2>(codes, T, D, d0, ph, tb, ah, as);
          break;
        case 3:
          AxpyBlock<3>(codes, T, D, d0, ph, tb, ah, as);
          break;
        default:
          AxpyBlock<4>(codes, T, D, d0, ph, tb, ah, as);
          break;
      }
    }
  }
  return true;
}

}  // namespace hqekv::attn::rows_bf16
HQEKV_SINGLE_ISA_END
#endif  // HQEKV_SINGLE_ISA

namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace {
// The kernels when this CPU runs them, else nullptr.
struct RowsBf16Kernels {
  bool (*prepare)(const float* q, size_t qs, int m, int D, uint16_t* words);
  bool (*dot_prepared)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       const uint16_t* words, int m, float* scores, size_t ss);
  bool (*axpy_rows)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    const float* w, size_t ws, int m, float* acc, size_t as);
};
const RowsBf16Kernels* RowsBf16KernelsHere() {
#if HQEKV_SINGLE_ISA
  static constexpr RowsBf16Kernels kKernels{.prepare = &rows_bf16::PrepareImpl,
                                            .dot_prepared = &rows_bf16::DotPreparedImpl,
                                            .axpy_rows = &rows_bf16::AxpyRowsBf16Impl};
  if (attn::Avx3DlRuns()) return &kKernels;
#endif
  return nullptr;
}
}  // namespace

namespace {
bool Fp8Shape(const Format& f, int D) {
  return (f.kind == Kind::kFp8E4M3 || f.kind == Kind::kFp8E5M2) && D >= 64 && D <= 512 &&
         D % 64 == 0;
}
// Query words per 64 channels and block of 4 rows (kQueryBlock).
constexpr size_t kWordsPerBlock = 256;
}  // namespace

bool Bf16RowsPreferred() {
  // Intel's cores issue vdpbf16ps on one 512-bit pipe and vpermi2b as
  // several uops on the shuffle pipe that also does FMAs (perf annotate on
  // the Xeon: the vdpbf16ps hold most of the V kernel's samples).
#if HQEKV_SINGLE_ISA
  static const bool preferred = __builtin_cpu_supports("avx512bf16") && !__builtin_cpu_is("intel");
  return preferred;
#else
  return false;  // the kernels are compiled only by GCC for x86-64 (attn/single_isa.h)
#endif
}

bool Bf16QueryRowsApply(const Format& f, int T, int D) {
  return Fp8Shape(f, D) && T >= 1 && T <= 64;
}

bool Bf16WeightsRowsApply(const Format& f, int T, int D) {
  return Fp8Shape(f, D) && T >= 2 && T <= 64 && T % 2 == 0;
}

bool PrepareBf16Query(const float* q, size_t q_stride, int m, int D, Bf16Query* out) {
  out->m = 0;
  if (m <= 0 || D < 64 || D > 512 || D % 64 != 0) return false;
  out->words.resize(static_cast<size_t>((m + 3) / 4) * (D / 64) * kWordsPerBlock);
  const RowsBf16Kernels* k = RowsBf16KernelsHere();
  if (k == nullptr || !k->prepare(q, q_stride, m, D, out->words.data())) return false;
  out->m = m;
  out->D = D;
  return true;
}

bool DotRowsBf16Prepared(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                         const Bf16Query& q, float* scores, size_t s_stride) {
  if (q.m <= 0 || !Bf16QueryRowsApply(f, T, q.D)) return false;
  const RowsBf16Kernels* k = RowsBf16KernelsHere();
  return k != nullptr &&
         k->dot_prepared(f, codes, meta, T, q.D, q.words.data(), q.m, scores, s_stride);
}

bool DotRowsBf16Query(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      const float* q, size_t q_stride, int m, float* scores, size_t s_stride) {
  if (m <= 0 || !Bf16QueryRowsApply(f, T, D)) return false;
  thread_local Bf16Query prepared;
  return PrepareBf16Query(q, q_stride, m, D, &prepared) &&
         DotRowsBf16Prepared(f, codes, meta, T, prepared, scores, s_stride);
}

bool AxpyRowsBf16Weights(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                         const float* w, size_t w_stride, int m, float* acc, size_t a_stride) {
  if (m <= 0 || m > 16 || !Bf16WeightsRowsApply(f, T, D)) return false;
  const RowsBf16Kernels* k = RowsBf16KernelsHere();
  return k != nullptr && k->axpy_rows(f, codes, meta, T, D, w, w_stride, m, acc, a_stride);
}
}  // namespace hqekv::attn
