// Int16 decode-attention kernels over q8_0 chunks (attn/multi_query_rows_q16.h;
// int8: attn/multi_query_rows_q16.cc, whose helpers it shares through
// attn/rows_q16_shared.h).
// Per 32-value block scale: K transposes 16 blocks at a time so that
// vpdpwssd leaves one block sum per lane (the block scale is one product per
// 16 blocks), with the query rows prepared once per KV head; V is int8's pair
// kernel with one int16 weight per (token, block). Kernel alone (32 x 128
// chunk, 4 rows, L2, kernel alone): K 280 -> 165 ns, V 255 ->
// 167 ns against the fp32 kernels. Oracles ref::DotRowsQ8_0Int16Query /
// ref::AxpyRowsQ8_0Int16Weights, bit-identical.
//
// Compiled once with the AVX3_DL instruction sets plus AVX-512 VNNI
// (attn/single_isa.h; GCC, x86-64) and run only where the CPU has them:
// elsewhere the entry points report "no kernel" and the caller keeps the fp32
// kernels of attn/multi_query_rows-inl.h.
#include <algorithm>
#include <cstring>

#include <hwy/highway.h>  // the static target's WithRowBlock (attn/row_blocks-inl.h)

#include "quant/internal.h"
#include "attn/rows_q16_shared.h"
#include "attn/single_isa.h"
#include "attn/multi_query_rows_q16.h"
#include "attn/prefetch.h"
#include "attn/row_blocks-inl.h"  // WithRowBlock

#if HQEKV_SINGLE_ISA
HQEKV_SINGLE_ISA_BEGIN(",avx512vnni")
namespace hqekv::attn::rows_q16 {
using namespace ::hqekv::quant;
namespace {
using HWY_NAMESPACE::WithRowBlock;

// ------------------------------------------------------------- q8_0 K

constexpr int kMaxBlocks = kMaxT * kMaxD / 32;  // blocks of one chunk
// int32 words of one prepared row: 16 step vectors of 16 lanes, then the
// lane offsets (-128 · the block position's sum of qi).
constexpr int kStepWords = 16 * 16;
constexpr int kRowWords = kStepWords + 16;

// Row q rounded (QuantizeRow) and laid out for DotGroupQ8: step j, lane i =
// the qi pair (2j, 2j + 1) of block position i mod (D/32). False when some q
// is not finite.
bool PrepareQ8Row(const float* q, int D, int32_t* words, float* sq) {
  alignas(64) int16_t qi[kMaxD];
  if (!QuantizeRow(q, D, qi, sq)) return false;
  const int per_row = D / 32;
  for (int j = 0; j < 16; ++j) {
    for (int i = 0; i < 16; ++i)
      std::memcpy(words + 16 * j + i, qi + 32 * (i % per_row) + 2 * j, 4);
  }
  for (int i = 0; i < 16; ++i) {
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += qi[32 * (i % per_row) + j];
    words[kStepWords + i] = -128 * sum;
  }
  return true;
}

// The transpose's last step, for code pair s of each quarter: from Y0
// (blocks 0..7) and Y1 (blocks 8..15), each holding one quarter (8 codes) of
// its 8 blocks, qword 2L block L and qword 2L + 1 block L + 4, lane i gets
// codes 2s and 2s + 1 of that quarter of block i, each in the low byte of
// its word (the high bytes are zeroed by the mask).
__m512i Q8Stage3Control(int s) {
  alignas(64) uint8_t c[64];
  for (int n = 0; n < 64; ++n) {
    const int i = n / 4, e = n % 4;
    const int r = i % 8;
    const int qpos = r < 4 ? 2 * r : 2 * (r - 4) + 1;
    c[n] = (e & 1) ? 0 : static_cast<uint8_t>(64 * (i / 8) + 8 * qpos + 2 * s + e / 2);
  }
  return _mm512_load_si512(c);
}
constexpr __mmask64 kLowBytes = 0x5555555555555555ull;

// acc[h] = the 16 block sums S of blocks p[0, n) (n <= 16; lanes past n: 0)
// for MB <= 4 prepared rows (row h at qw + h·kRowWords). The 512 code bytes
// are transposed in three steps (128-bit blocks, qwords, bytes) so that
// step j's vector holds codes 2j, 2j + 1 of block i in lane i, offset by
// 128 (c ^ 0x80, zero-extended: the word is c + 128; the lane offsets
// subtract 128 · sum qi again).
template <int MB>
HWY_INLINE void DotGroupQ8(const uint8_t* p, int n, const int32_t* qw, const __m512i s3[4],
                           __m512i acc[MB]) {
  const __m512i x80 = _mm512_set1_epi8(static_cast<char>(0x80));
  // The 64 query vectors are read from qw by the vpdpwssd themselves: left
  // loop-invariant, GCC copied all of them to the stack once per call.
  asm("" : "+r"(qw));
  __m512i x[4][2];
  for (int g = 0; g < 4; ++g) {
    __m512i z0, z1;
    if (n == 16) {
      z0 = _mm512_loadu_si512(p + 128 * g);
      z1 = _mm512_loadu_si512(p + 128 * g + 64);
    } else {  // bytes [0, 32n) only
      const int b0 = std::clamp(32 * n - 128 * g, 0, 64);
      const int b1 = std::clamp(32 * n - 128 * g - 64, 0, 64);
      const __mmask64 k0 = b0 == 64 ? ~0ull : (1ull << b0) - 1;
      const __mmask64 k1 = b1 == 64 ? ~0ull : (1ull << b1) - 1;
      z0 = _mm512_maskz_loadu_epi8(k0, p + 128 * g);
      z1 = _mm512_maskz_loadu_epi8(k1, p + 128 * g + 64);
    }
    z0 = _mm512_xor_si512(z0, x80);
    z1 = _mm512_xor_si512(z1, x80);
    // Blocks 4g .. 4g + 3, 16 codes each: x[g][0] codes 0..15, x[g][1] 16..31.
    x[g][0] = _mm512_shuffle_i64x2(z0, z1, 0x88);
    x[g][1] = _mm512_shuffle_i64x2(z0, z1, 0xDD);
  }
  // Two sums per row (even and odd code pairs): 4 rows x 16 dependent
  // vpdpwssd left the kernel latency-bound (~5 cycles each, 2 per cycle).
  __m512i acc2[MB];
  for (int h = 0; h < MB; ++h) {
    acc[h] = _mm512_load_si512(qw + h * kRowWords + kStepWords);
    acc2[h] = _mm512_setzero_si512();
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {  // quarter k: codes 8k .. 8k + 7
    const int half = k / 2;
    const __m512i y0 = (k & 1) ? _mm512_unpackhi_epi64(x[0][half], x[1][half])
                               : _mm512_unpacklo_epi64(x[0][half], x[1][half]);
    const __m512i y1 = (k & 1) ? _mm512_unpackhi_epi64(x[2][half], x[3][half])
                               : _mm512_unpacklo_epi64(x[2][half], x[3][half]);
#pragma GCC unroll 4
    for (int s = 0; s < 4; ++s) {
      const __m512i o = _mm512_maskz_permutex2var_epi8(kLowBytes, y0, s3[s], y1);
      const int32_t* qs = qw + 16 * (4 * k + s);
#pragma GCC unroll 4
      for (int h = 0; h < MB; ++h) {
        __m512i& a = (s & 1) ? acc2[h] : acc[h];
        a = _mm512_dpwssd_epi32(a, o, _mm512_load_si512(qs + h * kRowWords));
      }
    }
  }
  for (int h = 0; h < MB; ++h) acc[h] = _mm512_add_epi32(acc[h], acc2[h]);
}

// scores[h][t] for MB <= 4 prepared rows, tokens [0, T).
template <int MB>
void DotRowsQ8Block(const uint8_t* codes, const uint8_t* meta, int T, int D, const int32_t* qw,
                    const float* sq, const __m512i s3[4], float* scores, size_t ss,
                    const uint8_t*& pf_io, const uint8_t* const pf_end) {
  const int per_row = D / 32;
  const int nb = T * per_row;
  alignas(64) float pb[MB][kMaxBlocks + 32];
  const uint8_t* pf = pf_io;
  for (int k0 = 0; k0 < nb; k0 += 16) {
    const int n = std::min(16, nb - k0);
    pf = attn::RequestLines(pf, pf_end, 9);  // 8 passes per 32-token chunk: 72 >= 68 lines
    __m512i acc[MB];
    DotGroupQ8<MB>(codes + 32 * static_cast<size_t>(k0), n, qw, s3, acc);
    const __mmask16 km = static_cast<__mmask16>(n == 16 ? 0xFFFF : (1u << n) - 1);
    const __m512 dv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(km, meta + 2 * k0));
    for (int h = 0; h < MB; ++h) {
      _mm512_store_ps(pb[h] + k0, _mm512_mul_ps(_mm512_cvtepi32_ps(acc[h]), dv));
    }
  }
  pf_io = pf;
  // Per token: adjacent pairs summed, log2(D/32) times (lanes past the
  // blocks hold 0 or sums nobody reads).
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int h = 0; h < MB; ++h) {
    float* ph = pb[h];
    int n16 = (nb + 15) / 16 * 16;
    for (int w = per_row; w > 1; w /= 2) {
      for (int i = 0; i < n16; i += 32) {
        const __m512 v0 = _mm512_load_ps(ph + i);
        const __m512 v1 = i + 16 < n16 ? _mm512_load_ps(ph + i + 16) : _mm512_setzero_ps();
        _mm512_store_ps(ph + i / 2, _mm512_add_ps(_mm512_permutex2var_ps(v0, even, v1),
                                                  _mm512_permutex2var_ps(v0, odd, v1)));
      }
      n16 = (n16 + 31) / 32 * 16;
    }
    const __m512 sv = _mm512_set1_ps(sq[h]);
    for (int t = 0; t < T; t += 16) {
      const int n = std::min(16, T - t);
      const __mmask16 km = static_cast<__mmask16>(n == 16 ? 0xFFFF : (1u << n) - 1);
      _mm512_mask_storeu_ps(scores + h * ss + t, km, _mm512_mul_ps(_mm512_load_ps(ph + t), sv));
    }
  }
}

// ------------------------------------------------------------- q8_0 V

// Pair-layout dwords per weight row (nb / 2 of kMaxBlocks, padded).
constexpr int kPairStride = kMaxBlocks / 2 + 16;

// Per blocks per token (2, 4, 8, 16; index log2 - 1): the vpermt2w control
// taking 32 rounded weights in [t][b] order (the low words of two int32
// vectors) to the pair layout [t/2][b][t % 2], and the vpermps control
// giving lane l the weight of token l / per_row.
struct WeightControls {
  alignas(64) uint16_t pair[4][32];
  alignas(64) int32_t tok[4][16];
};
const WeightControls& GetWeightControls() {
  static const WeightControls c = [] {
    WeightControls w;
    for (int i = 0; i < 4; ++i) {
      const int per_row = 2 << i;
      for (int o = 0; o < 32; ++o) {
        const int pair = o / 2, e = o % 2;
        const int n = (2 * (pair / per_row) + e) * per_row + pair % per_row;
        w.pair[i][o] = static_cast<uint16_t>(n < 16 ? 2 * n : 32 + 2 * (n - 16));
      }
      for (int l = 0; l < 16; ++l) w.tok[i][l] = l / per_row;
    }
    return w;
  }();
  return c;
}

// Rows h in [0, MB) of w (row h at w + h·ws) times the block scales d ([nb],
// zero past nb up to a multiple of 32) rounded to int16 (row h's pairs at
// pairs + h·kPairStride: [T/2][D/32] dwords, tokens (t, t + 1) of one block)
// with steps su[h]; false when some product is not finite. The rows go
// through together: one at a time, each row's chain (max, its reduction, two
// divisions, then the rounding) left the kernel latency-bound (~85 of 190 ns
// per 32 x 128 chunk and 4 rows).
template <int MB>
bool QuantizeBlockWeightRows(const float* w, size_t ws, const float* d, int T, int per_row,
                             __m512i pair_ctl, __m512i tok, int32_t* pairs, float* su) {
  const int nb = T * per_row;
  const int nv = (nb + 31) / 32 * 2;
  alignas(64) float u[MB][kMaxBlocks + 32];
  __m512 umax[MB];
  for (int h = 0; h < MB; ++h) umax[h] = _mm512_setzero_ps();
  __mmask16 bad = 0;
  const int tpv = 16 / per_row;  // tokens per vector
  for (int v = 0; v < nv; ++v) {
    const int t0 = v * tpv;
    const int nt = std::clamp(T - t0, 0, tpv);
    const __mmask16 k = static_cast<__mmask16>((1u << nt) - 1);
    const __m512 dv = _mm512_load_ps(d + 16 * v);
    for (int h = 0; h < MB; ++h) {
      const __m512 wx = _mm512_permutexvar_ps(tok, _mm512_maskz_loadu_ps(k, w + h * ws + t0));
      const __m512 uv = _mm512_mul_ps(wx, dv);
      bad |= _mm512_fpclass_ps_mask(uv, 0x99);
      umax[h] = _mm512_max_ps(umax[h], _mm512_abs_ps(uv));
      _mm512_store_ps(u[h] + 16 * v, uv);
    }
  }
  if (bad != 0) return false;
  __m512 inv[MB];
  for (int h = 0; h < MB; ++h) {
    const float mx = _mm512_reduce_max_ps(umax[h]);
    su[h] = mx > 0.0f ? mx / 32767.0f : 0.0f;
    inv[h] = _mm512_set1_ps(mx > 0.0f ? 32767.0f / mx : 0.0f);
  }
  for (int v = 0; v < nv; v += 2) {
    for (int h = 0; h < MB; ++h) {
      const __m512i lo = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(u[h] + 16 * v), inv[h]));
      const __m512i hi =
          _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(u[h] + 16 * v + 16), inv[h]));
      _mm512_storeu_si512(pairs + h * kPairStride + 8 * v,
                          _mm512_permutex2var_epi16(lo, pair_ctl, hi));
    }
  }
  return true;
}

// acc[h][d0 .. d0 + 64) for MB <= 4 rows (pairs [MB][kPairStride], su [MB]).
// Not inlined: inlined into AxpyRowsQ8Impl (with its 33 KiB of stack
// buffers), GCC 12 kept the 16 sums in memory (a load and a store around
// every vpdpwssd; the whole V call took 315 instead of 200 ns per chunk).
template <int MB>
HWY_NOINLINE const uint8_t* AxpyBlockQ8(const int8_t* codes, int T, int D, int d0,
                                        const int32_t* pairs, const float* su, const __m512i ctl[4],
                                        float* acc, size_t as, const uint8_t* pf,
                                        const uint8_t* const pf_end) {
  const int per_row = D / 32;
  __m512i sum[MB][4];
#pragma GCC unroll 4
  for (int h = 0; h < MB; ++h) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) sum[h][j] = _mm512_setzero_si512();
  }
  const int32_t* p = pairs + d0 / 32;
  for (int t = 0; t < T; t += 2, p += per_row) {
    pf = attn::RequestLines(pf, pf_end, 3);  // 16 pairs x 2 column blocks per 32 x 128 chunk
    const __m512i a = _mm512_loadu_si512(codes + static_cast<size_t>(t) * D + d0);
    const __m512i b = _mm512_loadu_si512(codes + static_cast<size_t>(t + 1) * D + d0);
    __m512i x[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) x[j] = _mm512_srai_epi16(_mm512_permutex2var_epi8(a, ctl[j], b), 8);
#pragma GCC unroll 4
    for (int h = 0; h < MB; ++h) {
      const int32_t* ph = p + h * kPairStride;
      const __m512i w0 = _mm512_set1_epi32(ph[0]), w1 = _mm512_set1_epi32(ph[1]);
      DpWssd(sum[h][0], x[0], w0);
      DpWssd(sum[h][1], x[1], w0);
      DpWssd(sum[h][2], x[2], w1);
      DpWssd(sum[h][3], x[3], w1);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < MB; ++h) {
    const __m512 sv = _mm512_set1_ps(su[h]);
    float* ah = acc + h * as + d0;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      _mm512_storeu_ps(ah + 16 * j, _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[h][j]), sv,
                                                    _mm512_loadu_ps(ah + 16 * j)));
    }
  }
  return pf;
}

}  // namespace

// Prepared rows h in [0, m) at words + h·kRowWords (64-byte aligned), steps sq[h].
bool PrepareQ8Impl(const float* q, size_t qs, int m, int D, int32_t* words, float* sq) {
  if (m <= 0 || D < 32 || D > kMaxD || (D & (D - 1)) != 0) return false;
  if (m > 1 && !AllFinite(q, qs, m, D)) return false;
  for (int h = 0; h < m; ++h) {
    if (!PrepareQ8Row(q + h * qs, D, words + static_cast<size_t>(h) * kRowWords, sq + h)) {
      return false;
    }
  }
  return true;
}

bool DotQ8PreparedImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       const int32_t* words, const float* sq, int m, float* scores, size_t ss,
                       attn::PrefetchLines* ahead) {
  if (m <= 0 || !Q8_0QueryRowsApply(f, T, D)) return false;
  __m512i s3[4];
  for (int s = 0; s < 4; ++s) s3[s] = Q8Stage3Control(s);
  const uint8_t* pf = ahead ? ahead->next : nullptr;
  const uint8_t* const pf_end = ahead ? ahead->end : nullptr;
  for (int h0 = 0; h0 < m; h0 += 4) {
    const int mb = std::min(4, m - h0);
    const int32_t* qw = words + static_cast<size_t>(h0) * kRowWords;
    float* sc = scores + h0 * ss;
    WithRowBlock<4>(mb, [&](auto mb_c) {
      DotRowsQ8Block<decltype(mb_c)::value>(codes, meta, T, D, qw, sq + h0, s3, sc, ss, pf, pf_end);
    });
  }
  if (ahead) ahead->next = pf;
  return true;
}

bool AxpyRowsQ8Impl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    const float* w, size_t ws, int m, float* acc, size_t as,
                    attn::PrefetchLines* ahead) {
  if (m <= 0 || m > 16 || !Q8_0WeightsRowsApply(f, T, D)) return false;
  const int per_row = D / 32;
  const int nb = T * per_row;
  alignas(64) float d[kMaxBlocks + 32];
  ScalesToF32(meta, nb, d);
  for (int k = (nb + 15) / 16 * 16; k < (nb + 31) / 32 * 32; k += 16) {
    _mm512_store_ps(d + k, _mm512_setzero_ps());
  }
  alignas(64) int32_t pairs[16 * kPairStride];
  float su[16];
  const WeightControls& wc = GetWeightControls();
  const int ci = __builtin_ctz(static_cast<unsigned>(per_row)) - 1;
  const __m512i pair_ctl = _mm512_load_si512(wc.pair[ci]);
  const __m512i tok = _mm512_load_si512(wc.tok[ci]);
  for (int h0 = 0; h0 < m; h0 += 4) {  // every row before any output is written
    const float* wh = w + h0 * ws;
    int32_t* ph = pairs + h0 * kPairStride;
    const bool ok = WithRowBlock<4>(m - h0, [&](auto mb_c) {
      return QuantizeBlockWeightRows<decltype(mb_c)::value>(wh, ws, d, T, per_row, pair_ctl, tok,
                                                            ph, su + h0);
    });
    if (!ok) return false;
  }
  __m512i ctl[4];
  for (int j = 0; j < 4; ++j) ctl[j] = PairControl(j);
  const int8_t* c = reinterpret_cast<const int8_t*>(codes);
  const uint8_t* pf = ahead ? ahead->next : nullptr;
  const uint8_t* const pf_end = ahead ? ahead->end : nullptr;
  for (int h0 = 0; h0 < m; h0 += 4) {
    const int mb = std::min(4, m - h0);
    const int32_t* ph = pairs + h0 * kPairStride;
    float* ah = acc + h0 * as;
    for (int d0 = 0; d0 < D; d0 += 64) {
      WithRowBlock<4>(mb, [&](auto mb_c) {
        pf = AxpyBlockQ8<decltype(mb_c)::value>(c, T, D, d0, ph, su + h0, ctl, ah, as, pf, pf_end);
      });
    }
  }
  if (ahead) ahead->next = pf;
  return true;
}

}  // namespace hqekv::attn::rows_q16
HQEKV_SINGLE_ISA_END
#endif  // HQEKV_SINGLE_ISA

namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace {
using rows_q16::AlignedRows;

// The kernels when this CPU runs them, else nullptr.
struct RowsQ8_0Kernels {
  bool (*prepare)(const float* q, size_t qs, int m, int D, int32_t* words, float* sq);
  bool (*dot)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
              const int32_t* words, const float* sq, int m, float* scores, size_t ss,
              attn::PrefetchLines* ahead);
  bool (*axpy)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
               const float* w, size_t ws, int m, float* acc, size_t as, attn::PrefetchLines* ahead);
};
const RowsQ8_0Kernels* RowsQ8_0KernelsHere() {
#if HQEKV_SINGLE_ISA
  static constexpr RowsQ8_0Kernels kKernels{.prepare = &rows_q16::PrepareQ8Impl,
                                            .dot = &rows_q16::DotQ8PreparedImpl,
                                            .axpy = &rows_q16::AxpyRowsQ8Impl};
  if (attn::Avx3DlRuns()) return &kKernels;
#endif
  return nullptr;
}
}  // namespace

namespace {
constexpr size_t kQ8RowWords = 16 * 16 + 16;  // kRowWords of the kernel
bool Q8Shape(const Format& f, int D) {
  return f.kind == Kind::kQ8_0 && D >= 32 && D <= 512 && (D & (D - 1)) == 0;
}
}  // namespace

bool Q8_0QueryRowsApply(const Format& f, int T, int D) {
  return Q8Shape(f, D) && T >= 1 && T <= 64;
}

bool PrepareQ8_0Query(const float* q, size_t q_stride, int m, int D, Q8_0Query* out) {
  out->m = 0;
  if (m <= 0 || D < 32 || D > 512 || (D & (D - 1)) != 0) return false;
  out->words.resize(static_cast<size_t>(m) * kQ8RowWords + 16);
  out->sq.resize(m);
  const RowsQ8_0Kernels* k = RowsQ8_0KernelsHere();
  if (k == nullptr || !k->prepare(q, q_stride, m, D, AlignedRows(out->words), out->sq.data())) {
    return false;
  }
  out->m = m;
  out->D = D;
  return true;
}

bool DotRowsQ8_0Prepared(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                         const Q8_0Query& q, float* scores, size_t s_stride,
                         attn::PrefetchLines* ahead) {
  if (q.m <= 0 || !Q8_0QueryRowsApply(f, T, q.D)) return false;
  const RowsQ8_0Kernels* k = RowsQ8_0KernelsHere();
  return k != nullptr && k->dot(f, codes, meta, T, q.D, AlignedRows(q.words), q.sq.data(), q.m,
                                scores, s_stride, ahead);
}

bool DotRowsQ8_0Int16Query(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                           const float* q, size_t q_stride, int m, float* scores, size_t s_stride) {
  if (m <= 0 || !Q8_0QueryRowsApply(f, T, D)) return false;
  thread_local Q8_0Query prepared;
  return PrepareQ8_0Query(q, q_stride, m, D, &prepared) &&
         DotRowsQ8_0Prepared(f, codes, meta, T, prepared, scores, s_stride);
}

bool Q8_0WeightsRowsApply(const Format& f, int T, int D) {
  return Q8Shape(f, D) && D >= 64 && T >= 2 && T <= 64 && T % 2 == 0;
}

bool AxpyRowsQ8_0Int16Weights(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                              int D, const float* w, size_t w_stride, int m, float* acc,
                              size_t a_stride, attn::PrefetchLines* ahead) {
  if (m <= 0 || m > 16 || !Q8_0WeightsRowsApply(f, T, D)) return false;
  const RowsQ8_0Kernels* k = RowsQ8_0KernelsHere();
  return k != nullptr && k->axpy(f, codes, meta, T, D, w, w_stride, m, acc, a_stride, ahead);
}

}  // namespace hqekv::attn
