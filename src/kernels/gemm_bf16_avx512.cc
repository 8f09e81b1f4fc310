// bf16-activation GEMM for BF16 weights: vdpbf16ps register-blocked
// micro-kernel over pair-interleaved weight panels (layout and summation
// order: gemm_panel.h), and on AMX CPUs a tile kernel over the same panels
// (gemm_panel.h "AMX tiles"). Compiled once (not per Highway target), with
// the instruction sets as function target attributes, and taken only where
// the CPU has them: AVX-512 BF16 with Highway's AVX3_DL target supported
// (the set the kernel was tuned and tested on; tests that force a lower
// target see it unavailable), AMX-TILE + AMX-BF16 for the tile kernel. GCC
// only (clang builds report it unavailable). Oracle: GemmBf16Ref.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "hwy/targets.h"
#include "kernels/gemm_panel.h"
#include "kernels/kernels.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HQEKV_GEMM_BF16 1
#include <immintrin.h>
#else
#define HQEKV_GEMM_BF16 0
#endif

namespace hqekv::kernels {

#if HQEKV_GEMM_BF16
namespace gemm_bf16_avx512 {
// Highway 1.0's AVX3_DL feature set (hwy/ops/set_macros-inl.h) plus AVX-512 BF16.
#pragma GCC push_options
#pragma GCC target(                                                              \
    "sse2,ssse3,sse4.1,sse4.2,pclmul,aes,avx,avx2,bmi,bmi2,fma,f16c,avx512f,"    \
    "avx512vl,avx512dq,avx512bw,vpclmulqdq,avx512vbmi,avx512vbmi2,vaes,avxvnni," \
    "avx512bitalg,avx512vpopcntdq,avx512bf16")

// yi[j] (+)= lo / hi lanes j < cols <= 32 (lo: columns 0..15, hi: 16..31); `add` adds to yi
// (every k block after the first); a partial row goes through a stack copy. (The AVX-512 form
// of gemm_tile-inl.h's StoreTileRow: the same adds and stores.)
__attribute__((always_inline)) inline void StoreTileRow(__m512 lo, __m512 hi, float* __restrict yi,
                                                        int64_t cols, bool add) {
  if (cols == 32) {
    if (add) {
      lo = _mm512_add_ps(lo, _mm512_loadu_ps(yi));
      hi = _mm512_add_ps(hi, _mm512_loadu_ps(yi + 16));
    }
    _mm512_storeu_ps(yi, lo);
    _mm512_storeu_ps(yi + 16, hi);
    return;
  }
  alignas(64) float tile[32];
  _mm512_store_ps(tile, lo);
  _mm512_store_ps(tile + 16, hi);
  for (int64_t j = 0; j < cols; ++j) yi[j] = add ? yi[j] + tile[j] : tile[j];
}

// y[i * ldy + j] (+)= sum over pairs c of P[c][j] . Xp[c][i], i < kRows,
// j < cols (<= 32): P is kcp x 32 words (two vectors per pair), Xp kcp x
// kRows words. `add` adds to y (every k block after the first).
template <int kRows>
__attribute__((noinline)) void Tile(const uint32_t* __restrict p, const uint32_t* __restrict xp,
                                    int64_t kcp, float* __restrict y, int64_t ldy, int64_t cols,
                                    bool add) {
  __m512 a[kRows], b[kRows];
  // The output tile is read (or written) after the k loop: fetch it now.
  for (int i = 0; i < kRows; ++i) {
    __builtin_prefetch(y + i * ldy, 1);
    __builtin_prefetch(y + i * ldy + 31, 1);
  }
  for (int i = 0; i < kRows; ++i) a[i] = b[i] = _mm512_setzero_ps();
  for (int64_t c = 0; c < kcp; ++c, p += 32, xp += kRows) {
    const __m512bh w0 = (__m512bh)_mm512_loadu_si512(p);
    const __m512bh w1 = (__m512bh)_mm512_loadu_si512(p + 16);
    for (int i = 0; i < kRows; ++i) {
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(static_cast<int>(xp[i]));
      a[i] = _mm512_dpbf16_ps(a[i], w0, xv);
      b[i] = _mm512_dpbf16_ps(b[i], w1, xv);
    }
  }
  for (int i = 0; i < kRows; ++i) StoreTileRow(a[i], b[i], y + i * ldy, cols, add);
}

void TileAny(int rows, const uint32_t* p, const uint32_t* xp, int64_t kcp, float* y, int64_t ldy,
             int64_t cols, bool add) {
  static_assert(kBf16TileRows == 8);
  switch (rows) {
    case 8:
      return Tile<8>(p, xp, kcp, y, ldy, cols, add);
    case 7:
      return Tile<7>(p, xp, kcp, y, ldy, cols, add);
    case 6:
      return Tile<6>(p, xp, kcp, y, ldy, cols, add);
    case 5:
      return Tile<5>(p, xp, kcp, y, ldy, cols, add);
    case 4:
      return Tile<4>(p, xp, kcp, y, ldy, cols, add);
    case 3:
      return Tile<3>(p, xp, kcp, y, ldy, cols, add);
    case 2:
      return Tile<2>(p, xp, kcp, y, ldy, cols, add);
    default:
      return Tile<1>(p, xp, kcp, y, ldy, cols, add);
  }
}

#include "kernels/transpose16_avx512-inl.h"

// Pair c of row r: (W[r][2c], W[r][2c + 1]), the high half 0 past the row.
uint32_t PairWord(const WeightMatrix& w, int64_t r, int64_t c) {
  const uint8_t* row = w.row(r);
  uint16_t lo = 0, hi = 0;
  std::memcpy(&lo, row + 4 * c, 2);
  if (2 * c + 1 < w.k) std::memcpy(&hi, row + 4 * c + 2, 2);
  return lo | static_cast<uint32_t>(hi) << 16;
}

// P[c][j] = pair c0 + c of row r0 + j for c < kcp, j < rows; 0 for rows <= j < 32.
void PackPanel(const WeightMatrix& w, int64_t r0, int rows, int64_t c0, int64_t kcp, uint32_t* p) {
  int64_t done = 0;  // pairs [0, done) packed by the transposes
  if (rows == 32) {
    // Whole pairs inside every row (an odd k's last pair is not): 16 at a time.
    const int64_t whole = std::min(kcp, w.k / 2 - c0);
    done = whole / 16 * 16;
    __m512 r[16];
    for (int64_t c = 0; c < done; c += 16) {
      for (int half = 0; half < 2; ++half) {
        for (int j = 0; j < 16; ++j) {
          r[j] = _mm512_loadu_ps(w.row(r0 + 16 * half + j) + 4 * (c0 + c));
        }
        Transpose16Store(r, reinterpret_cast<float*>(p + c * 32 + 16 * half), 32);
      }
    }
  }
  for (int64_t c = done; c < kcp; ++c) {
    uint32_t* pc = p + c * 32;
    for (int j = 0; j < rows; ++j) pc[j] = PairWord(w, r0 + j, c0 + c);
    for (int j = rows; j < 32; ++j) pc[j] = 0;
  }
}

// F16 weights on AMX (gemm_panel.h): the panel of fp16 pairs (PackPanel reads
// any 2-byte type) split in place into hi (P) and lo (lo) bf16 pair words,
// w = hi + lo exactly: hi keeps the top 16 bits of w's fp32, lo = w - hi has
// at most 3 significant bits (fp16's 11 minus bf16's 8), so it is a bf16 too.
void SplitF16Panel(uint32_t* p, uint32_t* lo, int64_t words) {
  const __m512i low16 = _mm512_set1_epi32(0xFFFF), high16 = _mm512_set1_epi32(-65536);
  for (int64_t i = 0; i < words; i += 16) {
    const __m512i v = _mm512_loadu_si512(p + i);
    const __m512 even = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_and_si512(v, low16)));
    const __m512 odd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
    const __m512i he = _mm512_and_si512(_mm512_castps_si512(even), high16);
    const __m512i ho = _mm512_and_si512(_mm512_castps_si512(odd), high16);
    const __m512i le = _mm512_castps_si512(_mm512_sub_ps(even, _mm512_castsi512_ps(he)));
    const __m512i lod = _mm512_castps_si512(_mm512_sub_ps(odd, _mm512_castsi512_ps(ho)));
    _mm512_storeu_si512(p + i, _mm512_or_si512(_mm512_srli_epi32(he, 16), ho));
    _mm512_storeu_si512(lo + i,
                        _mm512_or_si512(_mm512_srli_epi32(le, 16), _mm512_and_si512(lod, high16)));
  }
}

// ---- AMX tiles (gemm_panel.h "AMX tiles") ----
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16")

// Palette 1: tiles 0-3 the 2 x 2 accumulators, 4-5 activations, 6-7 weights,
// each 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

bool AmxCpu() {
  static const bool ok = [] {
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16")) return false;
#if defined(__linux__)
    // Linux hands out the 8 KiB tile state only on request (per process).
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return ok;
}

// Rows [g, g + rows) x columns [p0, p0 + cols) of y from the four 16 x 16
// accumulator tiles c (tile 2 * (i / 16) + (j / 16)); `add` as StoreTileRow.
void StoreAccumulators(const float (*c)[16][16], int64_t rows, int64_t cols, float* y, int64_t ldy,
                       bool add) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* lo = c[2 * (i / 16)][i % 16];
    const float* hi = c[2 * (i / 16) + 1][i % 16];
    StoreTileRow(_mm512_load_ps(lo), _mm512_load_ps(hi), y + i * ldy, cols, add);
  }
}

// 16 pairs of the panel's 32 rows at p (two weight tiles, one 128-byte panel
// row per pair) times the two activation tiles loaded: the four sum tiles.
__attribute__((always_inline)) inline void WeightStep(const uint32_t* p) {
  _tile_loadd(6, p, 128);
  _tile_loadd(7, p + 16, 128);
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

// GemmRange for tile-major activations. Per k block of kAmxKc values and
// panel of 32 weight rows (PackPanel, its pairs padded with 0 to a multiple
// of 16): per 32 activation rows, 2 x 2 tiles over the block's pairs, 16 at
// a time (two activation tiles and two weight tiles loaded, four tdpbf16ps).
// kAmxKc = 8192 (a 512 KiB panel, in the 2 MiB L2 of these Xeons): on the
// Xeon, 14336 x 4096 at m = 512 (bench_kernels), k blocks of 2048 / 4096 /
// 8192 values gave 428 / 517 / 532 GFLOP/s (each block writes the 32 x 32
// sums back and packs the panel again), and splitting the 512 activation
// rows into blocks of 256 was slower (414).
constexpr int64_t kAmxKc = 8192;
template <bool kF16>
void AmxRange(const WeightMatrix& w, const Bf16Acts* a, int64_t r0, int64_t r1, float* y,
              int64_t ldy) {
  const TileConfig cfg = [] {
    TileConfig t;
    for (int i = 0; i < 8; ++i) {
      t.colsb[i] = 64;
      t.rows[i] = 16;
    }
    return t;
  }();
  _tile_loadconfig(&cfg);
  const int64_t m = a->m, ld = a->ld;
  thread_local std::vector<uint32_t> panel, panel_lo;
  panel.resize(static_cast<size_t>(32 * kAmxKc / 2));
  if (kF16) panel_lo.resize(panel.size());
  alignas(64) float acc[4][16][16];
  for (int64_t k0 = 0; k0 < w.k; k0 += kAmxKc) {
    const int64_t c0 = k0 / 2, kcp = (std::min(kAmxKc, w.k - k0) + 1) / 2;
    const int64_t kc16 = (kcp + 15) / 16 * 16;
    for (int64_t p0 = r0; p0 < r1; p0 += 32) {
      const int64_t cols = std::min<int64_t>(32, r1 - p0);
      PackPanel(w, p0, static_cast<int>(cols), c0, kcp, panel.data());
      std::fill(panel.begin() + kcp * 32, panel.begin() + kc16 * 32, 0u);
      if (kF16) SplitF16Panel(panel.data(), panel_lo.data(), kc16 * 32);
      const uint32_t* pb = panel.data();
      const uint32_t* pl = panel_lo.data();
      for (int64_t g = 0; g < m; g += kAmxRows) {
        // Tile-major activations (gemm_panel.h): block g / 32, pair step c0 / 16.
        const uint32_t* x0 = a->words.data() + g * ld + c0 * kAmxRows;
        const uint32_t* x1 = x0 + 16 * 16;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t c = 0; c < kc16; c += 16) {
          _tile_loadd(4, x0 + c * kAmxRows, 64);
          _tile_loadd(5, x1 + c * kAmxRows, 64);
          WeightStep(pb + c * 32);
          if (kF16) WeightStep(pl + c * 32);  // the low parts of the same weights
        }
        _tile_stored(0, acc[0], 64);
        _tile_stored(1, acc[1], 64);
        _tile_stored(2, acc[2], 64);
        _tile_stored(3, acc[3], 64);
        StoreAccumulators(acc, std::min(kAmxRows, m - g), cols, y + g * ldy + p0, ldy, k0 > 0);
      }
    }
  }
  _tile_release();
}
#pragma GCC pop_options

void GemmRangeAvx512(const WeightMatrix& w, const Bf16Acts* a, int64_t r0, int64_t r1, float* y,
                     int64_t ldy) {
  if (a->tile_major) {
    if (w.type == TensorType::kF16) return AmxRange<true>(w, a, r0, r1, y, ldy);
    return AmxRange<false>(w, a, r0, r1, y, ldy);
  }
  // Activation rows per block (mb x kBf16Kc bf16, 2 MiB at 512: streamed
  // from L2 / L3 by every panel of the thread; 12-row tiles with 504-row
  // blocks measured 4-10% slower than 8 rows with 512).
  const int64_t m = a->m, mb = std::min<int64_t>(m, 512);
  thread_local std::vector<uint32_t> panel;
  panel.resize(static_cast<size_t>(32 * kBf16Kc / 2));
  for (int64_t i0 = 0; i0 < m; i0 += mb) {
    const int64_t mi = std::min(mb, m - i0);
    for (int64_t k0 = 0; k0 < w.k; k0 += kBf16Kc) {
      const int64_t c0 = k0 / 2, kcp = (std::min(kBf16Kc, w.k - k0) + 1) / 2;
      for (int64_t p0 = r0; p0 < r1; p0 += 32) {
        const int64_t cols = std::min<int64_t>(32, r1 - p0);
        PackPanel(w, p0, static_cast<int>(cols), c0, kcp, panel.data());
        for (int64_t g = i0; g < i0 + mi; g += kBf16TileRows) {
          const int rows = static_cast<int>(std::min(kBf16TileRows, m - g));
          TileAny(rows, panel.data(), a->group(g) + c0 * rows, kcp, y + g * ldy + p0, ldy, cols,
                  k0 > 0);
        }
      }
    }
  }
}
#pragma GCC pop_options
}  // namespace gemm_bf16_avx512

namespace {

// Highway's AVX3_DL target supported (honours hwy::SetSupportedTargetsForTest).
bool Avx3DlSupported() { return (hwy::SupportedTargets() & HWY_AVX3_DL) != 0; }

}  // namespace

bool GemmBf16Available() {
  static const bool cpu = __builtin_cpu_supports("avx512bf16");
  return cpu && Avx3DlSupported();
}

bool GemmAmxBf16Available() { return Avx3DlSupported() && gemm_bf16_avx512::AmxCpu(); }

void GemmBf16Range(const WeightMatrix& w, const Bf16Acts& a, int64_t r0, int64_t r1, float* y,
                   int64_t ldy) {
  gemm_bf16_avx512::GemmRangeAvx512(w, &a, r0, r1, y, ldy);
}
#else
bool GemmBf16Available() { return false; }
bool GemmAmxBf16Available() { return false; }
// Not reached: callers check GemmBf16Available() first.
void GemmBf16Range(const WeightMatrix&, const Bf16Acts&, int64_t, int64_t, float*, int64_t) {}
#endif

}  // namespace hqekv::kernels
