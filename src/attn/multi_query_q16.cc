// Int16-query scores over per-channel K chunks (attn/multi_query.h,
// DotChunkMultiInt16Query): the query times the chunk's per-channel scale is
// rounded to int16 once per chunk and head, then dotted with the codes by
// vpdpwssd (32 products per instruction against 16 fp32 FMAs, and the code
// decode shared by the GQA group's rows). Oracle: ref::DotChunkMultiInt16Query
// (multi_query_ref.cc), the same integer math in scalar code. Why 16 bits, not
// 8: an int8 query (vpdpbusd, 64 products per instruction) moved refmodel-4l's
// next-token distributions by KL 1.7e-3 against the fp32 query (kivi-2), over
// the 1e-4 budget; int16 rounds 258x finer (hqekv ppl --ref fp16).
//
// Compiled once with the AVX3_DL instruction sets plus AVX-512 VNNI
// (attn/single_isa.h; GCC, x86-64, as kernels/kernels_int8_hwy.cc, because
// Highway 1.0's target string for AVX3_DL names avxvnni only) and run only
// where the CPU has them: elsewhere the entry points report "no kernel" and
// the caller keeps the fp32-query kernels of multi_query.cc.
//
// Layout (quant/README.md, per-channel T = 32): channel d's 32 codes of b
// bits are 4b bytes at byte 4b·d, token t at bit t·b. The K kernel widens
// codes to bytes, not words (bench_attention): vpdpbusd sums 4 adjacent byte
// products into one int32 lane, so a lane holds one token's codes of 4
// channels: per 64-byte load (16/b channels), one vpermb per output vector
// (16 tokens × 4 channels) puts the byte that holds each code in place, one
// vpmultishiftqb moves the code to bit 0 and an AND clears the rest (u3: the
// 1-bit high plane the same way, moved to bit 2 and OR-ed in). The int16
// query is split exactly into bytes, qi = 256·high + low (high signed, low
// unsigned), and each 64 codes cost 2 vpdpbusd per row, codes times high and
// low times codes: as many product instructions as 2 vpdpwssd, but half the
// decode, and the same integer sum as the word kernel it replaces, bit for
// bit. Shapes: T == 32, D a multiple of 16, <= 4096 (so |sum| <= 32767 · 15
// · 4096 < 2^31).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include <hwy/highway.h>  // the static target's WithRowBlock (attn/row_blocks-inl.h)

#include "quant/internal.h"
#include "attn/single_isa.h"
#include "attn/multi_query.h"
#include "attn/row_blocks-inl.h"  // WithRowBlock

#if HQEKV_SINGLE_ISA
HQEKV_SINGLE_ISA_BEGIN(",avx512vnni")
namespace hqekv::attn::q16 {
using namespace ::hqekv::quant;
namespace {
using HWY_NAMESPACE::WithRowBlock;

// Per-thread int16 query rows (as bytes) and per-row scale / offset.
struct Q16Scratch {
  // [m][ceil(D/32)][64]: per row and 32-channel block, the low bytes of the
  // int16 query qi (unsigned), then its high bytes (signed): qi = 256·high +
  // low exactly.
  std::vector<uint8_t> qb;
  std::vector<float> qa;  // [D] (generic D)
  std::vector<float> sq, off;
};
Q16Scratch& Q16Buffers() {
  thread_local Q16Scratch s;
  return s;
}
// Bytes of one row of Q16Scratch::qb.
size_t QueryRowBytes(int D) { return static_cast<size_t>(64) * ((D + 31) / 32); }

// acc += the int16 pair products of x and y (vpdpwssd), in place: through
// the intrinsic GCC copied the value kernel's accumulators to other
// registers and back around each instruction (2 extra moves per product
// vector, seen in perf).
HWY_INLINE void DpWssd(__m512i& acc, __m512i x, __m512i y) {
  asm("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(y));
}

// vpermb control for the output vector of channel quad `quad` (of the 16/b
// channels in a 64-byte load) and token half `half`: byte 4j + k takes the
// byte holding token 16·half + j of channel 4·quad + k.
__m512i PermControl(int bits, int quad, int half) {
  alignas(64) uint8_t c[64];
  for (int i = 0; i < 64; ++i) {
    const int t = 16 * half + i / 4, ch = 4 * quad + i % 4;
    c[i] = static_cast<uint8_t>(ch * 4 * bits + t * bits / 8);
  }
  return _mm512_load_si512(c);
}
// vpmultishiftqb control: byte i takes the 8 bits of its qword from bit
// (t·b) mod 8 of itself (token t = 16·half + i / 4), minus `to` so that the
// code lands at bit `to` (the field wraps around the qword; the AND after
// clears the rest).
__m512i ShiftControl(int bits, int to) {
  alignas(64) uint8_t c[64];
  for (int i = 0; i < 64; ++i) {
    const int t = i / 4;  // the same for both halves: (16 + t)·b ≡ t·b mod 8
    c[i] = static_cast<uint8_t>((8 * (i % 8) + (t * bits) % 8 - to) & 63);
  }
  return _mm512_load_si512(c);
}

// The sums of one token half, per row: 256·hi + lo (DotPass).
struct HalfSums {
  __m512i hi0, hi1, hi2, hi3, lo0, lo1, lo2, lo3;
};

// s += the products of 64 codes x (one token's codes of 4 channels per int32
// lane, bytes <= 15) with the query bytes of those 4 channels for rows 0..3:
// the signed high bytes at q + 32 (rows row_bytes apart; broadcast from
// memory) and the unsigned low bytes l0..l3 (broadcast, times the codes read
// as signed bytes, which they are). One asm statement: through intrinsics
// (or one asm per instruction) GCC copied the 16 accumulators between
// registers or kept them on the stack.
HWY_INLINE void DotQuad(HalfSums& s, __m512i x, const __m512i l[4], const uint8_t* q,
                        size_t row_bytes) {
  const auto* q0 = reinterpret_cast<const int32_t*>(q + 32);
  const auto* q1 = reinterpret_cast<const int32_t*>(q + 32 + row_bytes);
  const auto* q2 = reinterpret_cast<const int32_t*>(q + 32 + 2 * row_bytes);
  const auto* q3 = reinterpret_cast<const int32_t*>(q + 32 + 3 * row_bytes);
  asm("vpdpbusd %[h0]%{1to16%}, %[x], %[hi0]\n\t"
      "vpdpbusd %[x], %[l0], %[lo0]\n\t"
      "vpdpbusd %[h1]%{1to16%}, %[x], %[hi1]\n\t"
      "vpdpbusd %[x], %[l1], %[lo1]\n\t"
      "vpdpbusd %[h2]%{1to16%}, %[x], %[hi2]\n\t"
      "vpdpbusd %[x], %[l2], %[lo2]\n\t"
      "vpdpbusd %[h3]%{1to16%}, %[x], %[hi3]\n\t"
      "vpdpbusd %[x], %[l3], %[lo3]"
      : [hi0] "+v"(s.hi0), [lo0] "+v"(s.lo0), [hi1] "+v"(s.hi1), [lo1] "+v"(s.lo1),
        [hi2] "+v"(s.hi2), [lo2] "+v"(s.lo2), [hi3] "+v"(s.hi3), [lo3] "+v"(s.lo3)
      : [x] "v"(x), [l0] "v"(l[0]), [l1] "v"(l[1]), [l2] "v"(l[2]), [l3] "v"(l[3]), [h0] "m"(*q0),
        [h1] "m"(*q1), [h2] "m"(*q2), [h3] "m"(*q3));
}

// Scores of rows 0..MB-1 (MB <= 4; the query bytes hold whole blocks of 4
// rows, the sums of rows past MB are not stored) over channels [0, D): the
// int16 query's exact integer dot as 256·hi + lo, hi / lo the dots with the
// high / low bytes of qi (StoreSplit). Per 64 codes one vpermb, one
// vpmultishiftqb and one AND, then 2 vpdpbusd per row. kBits: 1, 2, 4, or 3
// (u3: low plane at codes, high plane at codes + 8·D).
template <int MB, int kBits>
HWY_INLINE void DotPass(const uint8_t* codes, int D, const uint8_t* qb, size_t row_bytes,
                        const float* sq, const float* off, float* scores, size_t ss) {
  constexpr int kLoadBits = kBits == 3 ? 2 : kBits;  // the low plane for u3
  constexpr int kCh = 16 / kLoadBits;                // channels per 64-byte load
  constexpr int kQuads = kCh / 4;                    // channel quads per load
  __m512i perm[kQuads][2];
  for (int qd = 0; qd < kQuads; ++qd) {
    for (int h = 0; h < 2; ++h) perm[qd][h] = PermControl(kLoadBits, qd, h);
  }
  const __m512i shift = ShiftControl(kLoadBits, 0);
  const __m512i mask = _mm512_set1_epi8((1 << kLoadBits) - 1);
  [[maybe_unused]] __m512i hperm[kQuads][2], hshift, hmask;
  if constexpr (kBits == 3) {
    // The high plane: 8 channels are 32 bytes, at the first half of a
    // 1-bit load whose quads are the same channels.
    for (int qd = 0; qd < kQuads; ++qd) {
      for (int h = 0; h < 2; ++h) hperm[qd][h] = PermControl(1, qd, h);
    }
    hshift = ShiftControl(1, 2);
    hmask = _mm512_set1_epi8(4);
  }
  const __m512i z = _mm512_setzero_si512();
  HalfSums s0{z, z, z, z, z, z, z, z}, s1{z, z, z, z, z, z, z, z};
  const uint8_t* high = codes + static_cast<size_t>(8) * D;
  for (int d0 = 0; d0 < D; d0 += kCh) {
    const __m512i src = _mm512_loadu_si512(codes + static_cast<size_t>(d0) * 4 * kLoadBits);
    [[maybe_unused]] __m512i hsrc;
    if constexpr (kBits == 3) {
      hsrc = _mm512_castsi256_si512(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(high + static_cast<size_t>(d0) * 4)));
    }
    for (int qd = 0; qd < kQuads; ++qd) {
      const int ch = d0 + 4 * qd;
      const uint8_t* qc = qb + static_cast<size_t>(ch / 32) * 64 + ch % 32;
      auto decode = [&](int half) {
        __m512i x = _mm512_and_si512(
            _mm512_multishift_epi64_epi8(shift, _mm512_permutexvar_epi8(perm[qd][half], src)),
            mask);
        if constexpr (kBits == 3) {
          const __m512i hx = _mm512_and_si512(
              _mm512_multishift_epi64_epi8(hshift, _mm512_permutexvar_epi8(hperm[qd][half], hsrc)),
              hmask);
          x = _mm512_or_si512(x, hx);
        }
        return x;
      };
      __m512i l[4];  // the low bytes of channels ch..ch + 3, rows 0..3
      for (int h = 0; h < 4; ++h) {
        int32_t l4;
        std::memcpy(&l4, qc + h * row_bytes, 4);
        l[h] = _mm512_set1_epi32(l4);
      }
      DotQuad(s0, decode(0), l, qc, row_bytes);
      DotQuad(s1, decode(1), l, qc, row_bytes);
    }
  }
  auto finish = [&](const HalfSums& s, int half) {
    const __m512i hi[4] = {s.hi0, s.hi1, s.hi2, s.hi3}, lo[4] = {s.lo0, s.lo1, s.lo2, s.lo3};
    for (int h = 0; h < MB; ++h) {
      // Exact: the dot fits int32 (|qi| <= 32767, codes <= 15, D <= 4096),
      // so the wrapping arithmetic gives it.
      const __m512i sum = _mm512_add_epi32(_mm512_slli_epi32(hi[h], 8), lo[h]);
      _mm512_storeu_ps(
          scores + h * ss + 16 * half,
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(sq[h]), _mm512_set1_ps(off[h])));
    }
  };
  finish(s0, 0);
  finish(s1, 1);
}

// The chunk's multiplier a and offset b of groups [i, i + 16) of `groups`
// (per-channel K: channels; per-token V: token-major groups): the fp16 planes
// (quant/README.md) with normal-1 folded in, as
// AffineFromPlanes<Offset::kFusedOnFmaTargets> (quant/simd-inl.h) does into
// memory: the same vcvtph2ps and, for normal-1, FoldNormal1's fused
// b = mu - c·sigma (vfnmadd) and a = 2c·sigma, spelled here in AVX-512.
HWY_INLINE void AffineAt(const uint8_t* meta, size_t groups, size_t i, bool n1, __m512* a,
                         __m512* b) {
  __m512 va = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(meta + 2 * i)));
  __m512 vb = _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(meta + 2 * (groups + i))));
  if (n1) {
    const float c = kNormalCentres1[1];
    vb = _mm512_fnmadd_ps(_mm512_set1_ps(c), va, vb);
    va = _mm512_mul_ps(_mm512_set1_ps(2.0f * c), va);
  }
  *a = va;
  *b = vb;
}

// Lanes that are NaN or +-inf (vfpclassps: QNaN 0x01, +inf 0x08, -inf 0x10,
// SNaN 0x80).
HWY_INLINE __mmask16 NonFinite(__m512 v) { return _mm512_fpclass_ps_mask(v, 0x99); }

// vpermb control that turns vpackssdw(r0, r1) (int16 words of channels
// 0..15 in r0 and 16..31 in r1, interleaved per 128-bit block as the pack
// leaves them) into the 32 low bytes of channels 0..31, then their 32 high
// bytes.
__m512i SplitControl() {
  alignas(64) uint8_t c[64];
  for (int i = 0; i < 32; ++i) {
    const int ch = i % 16, word = 8 * (ch / 4) + (i < 16 ? 0 : 4) + ch % 4;
    c[i] = static_cast<uint8_t>(2 * word);
    c[32 + i] = static_cast<uint8_t>(2 * word + 1);
  }
  return _mm512_load_si512(c);
}

// The query bytes of 32 channels (r0: channels 0..15, r1: 16..31, int32 in
// [-32767, 32767]) at dst: [low bytes (unsigned)][high bytes (signed)], so
// that qi = 256·high + low exactly (the high byte of a two's-complement int16
// is floor(qi / 256)).
HWY_INLINE void StoreSplit(__m512i r0, __m512i r1, __m512i split, uint8_t* dst) {
  _mm512_storeu_si512(dst, _mm512_permutexvar_epi8(split, _mm512_packs_epi32(r0, r1)));
}

// Row h's scale and query bytes (StoreSplit layout, 64 bytes per 32 channels)
// from its qa vectors (qa(v): vector v of nv; amax: max |qa| by lane).
template <class QA>
HWY_INLINE void StoreRow(const QA& qa, int nv, __m512 amax, float* sq, uint8_t* qb) {
  const float mx = _mm512_reduce_max_ps(amax);
  *sq = mx > 0.0f ? mx / 32767.0f : 0.0f;
  const __m512 inv = _mm512_set1_ps(mx > 0.0f ? 32767.0f / mx : 0.0f);
  const __m512i split = SplitControl();
  for (int v = 0; v < nv; v += 2) {
    const __m512i r0 = _mm512_cvtps_epi32(_mm512_mul_ps(qa(v), inv));  // MXCSR: half to even
    const __m512i r1 =
        v + 1 < nv ? _mm512_cvtps_epi32(_mm512_mul_ps(qa(v + 1), inv)) : _mm512_setzero_si512();
    StoreSplit(r0, r1, split, qb + 32 * v);
  }
}

// The 16 lanes of each of v[0..3] combined by op (max or add; any order),
// in lanes 0..3: pairs interleaved, then 64-bit halves, then the 128-bit
// blocks folded.
template <class Op>
HWY_INLINE __m128 Reduce4(const __m512 v[4], const Op& op) {
  const __m512 a01 = op(_mm512_unpacklo_ps(v[0], v[1]), _mm512_unpackhi_ps(v[0], v[1]));
  const __m512 a23 = op(_mm512_unpacklo_ps(v[2], v[3]), _mm512_unpackhi_ps(v[2], v[3]));
  const __m512d d01 = _mm512_castps_pd(a01), d23 = _mm512_castps_pd(a23);
  const __m512 x = op(_mm512_castpd_ps(_mm512_unpacklo_pd(d01, d23)),
                      _mm512_castpd_ps(_mm512_unpackhi_pd(d01, d23)));
  const __m512 y = op(x, _mm512_shuffle_f32x4(x, x, 0x4E));  // blocks 2,3 onto 0,1
  const __m512 z = op(y, _mm512_shuffle_f32x4(y, y, 0xB1));  // block 1 onto 0
  return _mm512_castps512_ps128(z);
}
// Reduce4's operations. Function objects, not lambdas: a lambda in a template
// is instantiated after the instruction-set region has closed and would lose
// its AVX-512 attributes (GCC's -Wpsabi).
struct MaxOf16 {
  HWY_INLINE __m512 operator()(__m512 x, __m512 y) const { return _mm512_max_ps(x, y); }
};
struct SumOf16 {
  HWY_INLINE __m512 operator()(__m512 x, __m512 y) const { return _mm512_add_ps(x, y); }
};

// Rounds qa[h] = q[h]·a to int16 per row (scale amax/32767), off[h] = q[h]·b.
// False when some qa is not finite (then nothing is written to the scores).
// kV > 0: D = 16·kV, a, b and one row's qa held in registers (a and b decoded
// once per chunk); kV == 0: any D (a multiple of 16), through scratch.
template <int kV>
bool QuantizeRows(const uint8_t* meta, int D, bool n1, const float* q, size_t qs, int m,
                  Q16Scratch& s) {
  const size_t row_bytes = QueryRowBytes(D);
  // Whole blocks of 4 rows: the K kernel reads 4 rows' bytes (the rows past
  // m feed sums nobody stores).
  s.qb.resize(static_cast<size_t>((m + 3) / 4 * 4) * row_bytes);
  s.sq.resize(m);
  s.off.resize(m);
  __mmask16 bad = 0;
  if constexpr (kV > 0) {
    // Blocks of up to 4 rows: their maxima and offsets reduced together
    // (Reduce4: one transpose-and-fold instead of two horizontal reductions
    // per row), their scales by one 4-lane division; qa in a stack buffer.
    // Vector by vector, each a and b decoded once per block for its rows:
    // with the kV a and b vectors held across the rows GCC spilled them and
    // reloaded one per product (the rounding alone took 84-86 ns per 32 x 128
    // chunk and 4 rows, 60-65 ns this way; kernel alone).
    alignas(64) float qa[4][16 * kV];
    alignas(16) float mx[4], inv[4];
    const __m512i split = SplitControl();
    for (int h0 = 0; h0 < m; h0 += 4) {
      const int mb = std::min(4, m - h0);
      __m512 amax[4], off[4];
      for (int h = 0; h < 4; ++h) amax[h] = off[h] = _mm512_setzero_ps();
      const float* qh = q + h0 * qs;
      for (int v = 0; v < kV; ++v) {
        __m512 a, b;
        AffineAt(meta, D, 16 * v, n1, &a, &b);
        for (int h = 0; h < mb; ++h) {
          const __m512 qv = _mm512_loadu_ps(qh + h * qs + 16 * v);
          const __m512 x = _mm512_mul_ps(qv, a);
          _mm512_store_ps(qa[h] + 16 * v, x);
          bad |= NonFinite(x);
          amax[h] = _mm512_range_ps(amax[h], x, 0x0B);  // max |.|, sign cleared
          off[h] = _mm512_fmadd_ps(qv, b, off[h]);      // per row in the same order: v = 0, 1, ...
        }
      }
      const __m128 m4 = Reduce4(amax, MaxOf16());
      const __m128 o4 = Reduce4(off, SumOf16());
      // sq = amax / 32767 and the rounding multiplier 32767 / amax (0 for an
      // all-zero row), as StoreRow.
      const __m128 pos = _mm_cmpgt_ps(m4, _mm_setzero_ps());
      const __m128 k = _mm_set1_ps(32767.0f);
      const __m128 sq4 = _mm_and_ps(pos, _mm_div_ps(m4, k));
      _mm_store_ps(mx, sq4);
      _mm_store_ps(inv, _mm_and_ps(pos, _mm_div_ps(k, m4)));
      alignas(16) float o[4];
      _mm_store_ps(o, o4);
      for (int h = 0; h < mb; ++h) {
        s.sq[h0 + h] = mx[h];
        s.off[h0 + h] = o[h];
        const __m512 iv = _mm512_set1_ps(inv[h]);
        uint8_t* qb = s.qb.data() + static_cast<size_t>(h0 + h) * row_bytes;
        static_assert(kV % 2 == 0, "whole 32-channel blocks");
        for (int v = 0; v < kV; v += 2) {  // MXCSR: half to even
          const __m512i r0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(qa[h] + 16 * v), iv));
          const __m512i r1 =
              _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(qa[h] + 16 * v + 16), iv));
          StoreSplit(r0, r1, split, qb + 32 * v);
        }
      }
    }
  } else {
    s.qa.resize(static_cast<size_t>(D));
    float* qa = s.qa.data();
    for (int h = 0; h < m; ++h) {
      const float* qh = q + h * qs;
      __m512 amax = _mm512_setzero_ps(), off = _mm512_setzero_ps();
      for (int d = 0; d < D; d += 16) {
        __m512 a, b;
        AffineAt(meta, D, d, n1, &a, &b);
        const __m512 qv = _mm512_loadu_ps(qh + d);
        const __m512 x = _mm512_mul_ps(qv, a);
        _mm512_storeu_ps(qa + d, x);
        bad |= NonFinite(x);
        amax = _mm512_range_ps(amax, x, 0x0B);
        off = _mm512_fmadd_ps(qv, b, off);
      }
      s.off[h] = _mm512_reduce_add_ps(off);
      StoreRow([&](int v) { return _mm512_loadu_ps(qa + 16 * v); }, D / 16, amax, &s.sq[h],
               s.qb.data() + static_cast<size_t>(h) * row_bytes);
    }
  }
  return bad == 0;
}

template <int kBits>
void DotRows(const uint8_t* codes, int D, const Q16Scratch& s, int m, float* scores, size_t ss) {
  const size_t row_bytes = QueryRowBytes(D);
  for (int h0 = 0; h0 < m; h0 += 4) {
    auto pass = [&](auto mb_c) {
      DotPass<decltype(mb_c)::value, kBits>(codes, D, s.qb.data() + h0 * row_bytes, row_bytes,
                                            s.sq.data() + h0, s.off.data() + h0, scores + h0 * ss,
                                            ss);
    };
    WithRowBlock<4>(m - h0, pass);
  }
}

// ------------------------------------------ V per-token, int16 weights

// Per-thread scratch of the value kernel.
struct W16Scratch {
  std::vector<float> a, b;     // [T·gpt + 16] the chunk's affine map as stored (token-major)
  std::vector<float> wt;       // [T][4] the weight rows of a block of <= 4, transposed
  std::vector<float> u;        // [T][16·nb] w·a per token and (row, group) combo
  std::vector<int32_t> pw;     // [T/2][16·nb] int16 weights of tokens 2p, 2p + 1 per combo
  std::vector<float> sw, off;  // [16·nb] scale and offset per combo
};
W16Scratch& W16Buffers() {
  thread_local W16Scratch s;
  return s;
}

// vpermb control for output vector v of a channel set (16 channels from
// channel 16v of the set; the set's bytes of token 2p at byte 0 of the
// source, of token 2p + 1 at byte 32): word 2j + s takes the byte holding
// channel 16v + j of token s.
__m512i PairPermControl(int bits, int v) {
  alignas(64) uint8_t c[64];
  for (int i = 0; i < 64; ++i) {
    const int j = i / 4, s = (i % 4) / 2;
    c[i] = static_cast<uint8_t>(32 * s + (16 * v + j) * bits / 8);
  }
  return _mm512_load_si512(c);
}
// vpmultishiftqb control: the even byte of word 2j + s takes the 8 bits of
// its qword from bit (j·b) mod 8 of itself (the code to bit 0; the same for
// every vector v, 16·b being a multiple of 8); the odd byte reads itself
// (both cleared above the code by the AND after).
__m512i PairShiftControl(int bits) {
  alignas(64) uint8_t c[64];
  for (int i = 0; i < 64; ++i) {
    const int j = i / 4;
    const int own = 8 * (i % 8);
    c[i] = static_cast<uint8_t>(i % 2 == 0 ? (own + (j * bits) % 8) & 63 : own);
  }
  return _mm512_load_si512(c);
}

// acc[h][set + 16v + lane] += sum over token pairs of the int16 weights of
// combo (h, group of the vector) times the codes, for MB rows and NV
// vectors of one channel set (NV·16 channels, NV·2·b bytes per token <= 32),
// then the scale and offset applied once: acc += fma(float(sum), sw, off).
template <int MB, int NV, int kBits, bool kPairShare>
HWY_INLINE void AxpyPass(const uint8_t* codes, int T, int D, int set, int group, int stride,
                         const W16Scratch& s, float* acc, size_t as) {
  constexpr int kSetBytes = NV * 16 * kBits / 8;
  static_assert(kSetBytes <= 32, "a channel set's bytes of one token fit 256 bits");
  const size_t row_bytes = static_cast<size_t>(D) * kBits / 8;
  const __mmask32 load_mask = kSetBytes == 32 ? ~__mmask32{0} : (__mmask32{1} << kSetBytes) - 1;
  __m512i perm[NV];
  for (int v = 0; v < NV; ++v) perm[v] = PairPermControl(kBits, v);
  const __m512i shift = PairShiftControl(kBits);
  const __m512i mask = _mm512_set1_epi16(static_cast<int16_t>((1 << kBits) - 1));
  // Combo of (row h, group g) is 4g + h: a vector's 4 rows are adjacent words.
  int base[NV];
  for (int v = 0; v < NV; ++v) base[v] = 4 * ((set + 16 * v) / group);
  __m512i sum[MB][NV];
  for (int h = 0; h < MB; ++h) {
    for (int v = 0; v < NV; ++v) sum[h][v] = _mm512_setzero_si512();
  }
  const uint8_t* row = codes + static_cast<size_t>(set) * kBits / 8;
  const int32_t* pw = s.pw.data();
  const float* const sw = s.sw.data();
  const float* const offs = s.off.data();
  for (int p = 0; p < T / 2; ++p, row += 2 * row_bytes, pw += stride) {
    const __m512i src =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi8(load_mask, row)),
                           _mm256_maskz_loadu_epi8(load_mask, row + row_bytes), 1);
    __m512i wv[MB];
    for (int v = 0; v < NV; ++v) {
      __m512i x = _mm512_permutexvar_epi8(perm[v], src);
      if constexpr (kBits < 8) x = _mm512_multishift_epi64_epi8(shift, x);
      x = _mm512_and_si512(x, mask);
      if (!kPairShare || v % 2 == 0) {  // kPairShare: vectors 2i, 2i + 1 in one group
        for (int h = 0; h < MB; ++h) wv[h] = _mm512_set1_epi32(pw[base[v] + h]);
      }
      for (int h = 0; h < MB; ++h) DpWssd(sum[h][v], x, wv[h]);
    }
  }
  for (int h = 0; h < MB; ++h) {
    for (int v = 0; v < NV; ++v) {
      const int c = base[v] + h;
      float* dst = acc + h * as + set + 16 * v;
      const __m512 y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[h][v]), _mm512_set1_ps(sw[c]),
                                       _mm512_set1_ps(offs[c]));
      _mm512_storeu_ps(dst, _mm512_add_ps(_mm512_loadu_ps(dst), y));
    }
  }
}

// The chunk's affine map [T·gpt] as stored (AffineAt, 16 groups at a time).
void LoadAffine(const uint8_t* meta, int T, int gpt, bool n1, W16Scratch& s) {
  const int groups = T * gpt;
  s.a.resize(groups + 16);
  s.b.resize(groups + 16);
  float* const pa = s.a.data();
  float* const pb = s.b.data();
  for (int i = 0; i < groups; i += 16) {  // T·gpt is a multiple of 16 (T is)
    __m512 a, b;
    AffineAt(meta, groups, i, n1, &a, &b);
    _mm512_storeu_ps(pa + i, a);
    _mm512_storeu_ps(pb + i, b);
  }
}

// Rounds u = w[h][t]·a[t][g] to int16 per combo c = 4g + h of mb <= 4
// rows (scale max_t |u| / 32767), off[c] = sum_t w[h][t]·b[t][g]. Lanes
// over combos (16 per vector, nb vectors), so the maxima and offsets are
// plain vertical operations per token. The pair words of tokens 2p, 2p + 1
// go to pw[p·16·nb + c]. False when some u is not finite.
bool QuantizeWeights(int T, int gpt, const float* w, size_t ws, int mb, W16Scratch& s) {
  const int combos = 4 * gpt;  // rows mb..3 have zero weights
  const int nb = (combos + 15) / 16;
  const int stride = 16 * nb;
  s.wt.resize(static_cast<size_t>(T) * 4);
  s.u.resize(static_cast<size_t>(T) * stride);
  s.pw.resize(static_cast<size_t>(T / 2) * stride);
  s.sw.resize(stride);
  s.off.resize(stride);
  // Raw pointers: through the thread_local scratch the compiler re-reads the
  // TLS address (a call) inside the loops and spills every vector.
  float* const wt_base = s.wt.data();
  const float* const a_base = s.a.data();
  const float* const b_base = s.b.data();
  float* const u_base = s.u.data();
  int32_t* const pw_base = s.pw.data();
  float* const sw_base = s.sw.data();
  float* const off_base = s.off.data();
  // w[h][t] for h < 4 as 4 adjacent floats per token (rows >= mb zero): 4x4
  // transposes inside each 128-bit block, 16 tokens at a time; token
  // j + 4L + k (j a multiple of 16) at wt + 4j + 16k + 4L.
  for (int j = 0; j < T; j += 16) {
    __m512 r[4];
    for (int h = 0; h < 4; ++h)
      r[h] = h < mb ? _mm512_loadu_ps(w + h * ws + j) : _mm512_setzero_ps();
    const __m512 t0 = _mm512_unpacklo_ps(r[0], r[1]), t1 = _mm512_unpackhi_ps(r[0], r[1]);
    const __m512 t2 = _mm512_unpacklo_ps(r[2], r[3]), t3 = _mm512_unpackhi_ps(r[2], r[3]);
    const __m512d d0 = _mm512_castps_pd(t0), d1 = _mm512_castps_pd(t1);
    const __m512d d2 = _mm512_castps_pd(t2), d3 = _mm512_castps_pd(t3);
    // x[k] holds token j + 4L + k in 128-bit block L.
    const __m512 x[4] = {
        _mm512_castpd_ps(_mm512_unpacklo_pd(d0, d2)), _mm512_castpd_ps(_mm512_unpackhi_pd(d0, d2)),
        _mm512_castpd_ps(_mm512_unpacklo_pd(d1, d3)), _mm512_castpd_ps(_mm512_unpackhi_pd(d1, d3))};
    for (int k = 0; k < 4; ++k) _mm512_storeu_ps(wt_base + 4 * j + 16 * k, x[k]);
  }
  __m512 chk = _mm512_setzero_ps();
  for (int k = 0; k < nb; ++k) {
    alignas(64) int32_t ia[16], iw[16];
    for (int i = 0; i < 16; ++i) {
      const int c = 16 * k + i;
      ia[i] = i / 4;  // group 4k + i / 4, loaded from a + t·gpt + 4k
      iw[i] = c % 4;
    }
    const __m512i idx_a = _mm512_load_si512(ia), idx_w = _mm512_load_si512(iw);
    const int c0 = 16 * k;
    const __mmask16 live =
        static_cast<__mmask16>(combos - c0 >= 16 ? 0xFFFFu : (1u << (combos - c0)) - 1u);
    __m512 amax = _mm512_setzero_ps(), off = _mm512_setzero_ps();
    float* u = u_base + c0;
    for (int t = 0; t < T; ++t, u += stride) {
      const int tj = t & ~15, tl = t & 15;
      const float* wt = wt_base + 4 * tj + 16 * (tl & 3) + 4 * (tl >> 2);
      const __m512 wv =
          _mm512_maskz_permutexvar_ps(live, idx_w, _mm512_castps128_ps512(_mm_loadu_ps(wt)));
      const size_t base = static_cast<size_t>(t) * gpt + 4 * k;
      const __m512 av = _mm512_permutexvar_ps(idx_a, _mm512_loadu_ps(a_base + base));
      const __m512 bv = _mm512_permutexvar_ps(idx_a, _mm512_loadu_ps(b_base + base));
      const __m512 x = _mm512_mul_ps(wv, av);
      _mm512_storeu_ps(u, x);
      chk = _mm512_fmadd_ps(x, _mm512_setzero_ps(), chk);  // NaN once some x is not finite
      amax = _mm512_range_ps(amax, x, 0x0B);               // max |.|, sign cleared
      off = _mm512_fmadd_ps(wv, bv, off);
    }
    const __mmask16 pos = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_GT_OQ);
    const __m512 k32767 = _mm512_set1_ps(32767.0f);
    _mm512_storeu_ps(sw_base + c0, _mm512_maskz_div_ps(pos, amax, k32767));
    _mm512_storeu_ps(off_base + c0, off);
    const __m512 inv = _mm512_maskz_div_ps(pos, k32767, amax);
    const float* uu = u_base + c0;
    int32_t* pw = pw_base + c0;
    for (int p = 0; p < T / 2; ++p, uu += 2 * stride, pw += stride) {
      const __m512i r0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(uu), inv));
      const __m512i r1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(uu + stride), inv));
      // low half: token 2p, high half: token 2p + 1 (MXCSR: half to even)
      const __m512i word = _mm512_mask_blend_epi16(0xAAAAAAAAu, r0, _mm512_slli_epi32(r1, 16));
      _mm512_storeu_si512(pw, word);
    }
  }
  return _mm512_fpclass_ps_mask(chk, 0x99) == 0;
}

template <int kBits>
bool AxpyRows(const uint8_t* codes, const uint8_t* meta, int T, int D, int group, bool n1,
              const float* w, size_t ws, int m, float* acc, size_t as) {
  W16Scratch& s = W16Buffers();
  const int gpt = D / group;
  LoadAffine(meta, T, gpt, n1, s);
  // Channel sets: 64 channels (32 for 8-bit codes: 32 bytes per token).
  constexpr int kSetVecs = kBits == 8 ? 2 : 4;
  // Every row's weights are checked before any accumulator is written (the
  // caller falls back to the fp32 kernel on false); for m <= 4 the one
  // block's quantization is kept.
  for (int h0 = 0; h0 < m; h0 += 4) {
    if (!QuantizeWeights(T, gpt, w + h0 * ws, ws, std::min(4, m - h0), s)) return false;
  }
  for (int h0 = 0; h0 < m; h0 += 4) {
    const int mb = std::min(4, m - h0);
    if (m > 4) QuantizeWeights(T, gpt, w + h0 * ws, ws, mb, s);
    const int stride = 16 * ((4 * gpt + 15) / 16);
    auto pass = [&](auto mb_c) {
      constexpr int MB = decltype(mb_c)::value;
      float* ah = acc + h0 * as;
      int set = 0;
      // Sets start at multiples of 32 channels: with group % 32 == 0 each
      // pair of vectors lies in one group and shares its weight broadcasts.
      const bool share = group % 32 == 0;
      for (; set + 16 * kSetVecs <= D; set += 16 * kSetVecs) {
        if (share) {
          AxpyPass<MB, kSetVecs, kBits, true>(codes, T, D, set, group, stride, s, ah, as);
        } else {
          AxpyPass<MB, kSetVecs, kBits, false>(codes, T, D, set, group, stride, s, ah, as);
        }
      }
      for (; set < D; set += 16) {
        AxpyPass<MB, 1, kBits, false>(codes, T, D, set, group, stride, s, ah, as);
      }
    };
    WithRowBlock<4>(mb, pass);
  }
  return true;
}
}  // namespace

bool DotInt16QueryImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       const float* q, size_t qs, int m, float* scores, size_t ss) {
  if (!Int16QueryApplies(f, T, D) || D % 16 != 0) return false;
  Q16Scratch& s = Q16Buffers();
  const bool n1 = f.kind == Kind::kNormal;
  const bool ok = D == 128  ? QuantizeRows<8>(meta, D, n1, q, qs, m, s)
                  : D == 64 ? QuantizeRows<4>(meta, D, n1, q, qs, m, s)
                            : QuantizeRows<0>(meta, D, n1, q, qs, m, s);
  if (!ok) return false;
  const int bits = f.kind == Kind::kUniform3 ? 3 : f.bits;
  switch (bits) {
    case 1:
      DotRows<1>(codes, D, s, m, scores, ss);
      break;
    case 2:
      DotRows<2>(codes, D, s, m, scores, ss);
      break;
    case 3:
      DotRows<3>(codes, D, s, m, scores, ss);
      break;
    default:
      DotRows<4>(codes, D, s, m, scores, ss);
      break;
  }
  return true;
}

bool AxpyInt16WeightsImpl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                          const float* w, size_t ws, int m, float* acc, size_t as) {
  if (!Int16WeightsApply(f, T, D)) return false;
  const bool n1 = f.kind == Kind::kNormal;
  switch (f.bits) {
    case 1:
      return AxpyRows<1>(codes, meta, T, D, f.group, n1, w, ws, m, acc, as);
    case 2:
      return AxpyRows<2>(codes, meta, T, D, f.group, n1, w, ws, m, acc, as);
    case 4:
      return AxpyRows<4>(codes, meta, T, D, f.group, n1, w, ws, m, acc, as);
    default:
      return AxpyRows<8>(codes, meta, T, D, f.group, n1, w, ws, m, acc, as);
  }
}

}  // namespace hqekv::attn::q16
HQEKV_SINGLE_ISA_END
#endif  // HQEKV_SINGLE_ISA

namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace {
// The kernels when this CPU runs them, else nullptr.
struct Q16Kernels {
  bool (*dot_int16_query)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                          const float* q, size_t qs, int m, float* scores, size_t ss);
  bool (*axpy_int16_weights)(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                             int D, const float* w, size_t ws, int m, float* acc, size_t as);
};
const Q16Kernels* Q16KernelsHere() {
#if HQEKV_SINGLE_ISA
  static constexpr Q16Kernels kKernels{.dot_int16_query = &q16::DotInt16QueryImpl,
                                       .axpy_int16_weights = &q16::AxpyInt16WeightsImpl};
  if (attn::Avx3DlRuns()) return &kKernels;
#endif
  return nullptr;
}
}  // namespace

namespace {
// Formats whose level of code c is c itself (uniform, uniform-3; normal-1
// once its affine map is folded), so the int16 kernels' integer sums over
// codes are exact.
bool IntegerLevels(const Format& f) {
  return f.kind == Kind::kUniform || f.kind == Kind::kUniform3 ||
         (f.kind == Kind::kNormal && f.bits == 1);
}
}  // namespace

bool Int16WeightsApply(const Format& f, int T, int D) {
  // Uniform-3 (3 bits) is left out by the bit widths: no 3-bit pair kernel.
  return IntegerLevels(f) && f.grouping == Grouping::kPerToken &&
         (f.bits == 1 || f.bits == 2 || f.bits == 4 || f.bits == 8) && T > 0 && T % 16 == 0 &&
         T <= 256 && f.group > 0 && f.group % 16 == 0 && D % f.group == 0 && D <= 4096 &&
         D / f.group <= 16;
}

bool AxpyChunkMultiInt16Weights(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                                int D, const float* w, size_t w_stride, int m, float* acc,
                                size_t a_stride) {
  if (m <= 0 || !Int16WeightsApply(f, T, D)) return false;
  const Q16Kernels* k = Q16KernelsHere();
  return k != nullptr && k->axpy_int16_weights(f, codes, meta, T, D, w, w_stride, m, acc, a_stride);
}

bool Int16QueryApplies(const Format& f, int T, int D) {
  const int bits = f.kind == Kind::kUniform3 ? 3 : f.bits;
  return IntegerLevels(f) && f.grouping == Grouping::kPerChannel && T == 32 && bits >= 1 &&
         bits <= 4 && D > 0 && D % 4 == 0 && D <= 4096;
}

bool DotChunkMultiInt16Query(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                             int D, const float* q, size_t q_stride, int m, float* scores,
                             size_t s_stride) {
  if (m <= 0 || !Int16QueryApplies(f, T, D)) return false;
  const Q16Kernels* k = Q16KernelsHere();
  return k != nullptr && k->dot_int16_query(f, codes, meta, T, D, q, q_stride, m, scores, s_stride);
}

}  // namespace hqekv::attn
