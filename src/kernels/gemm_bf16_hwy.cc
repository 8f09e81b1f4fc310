// bf16-activation GEMM for BF16 weights: vdpbf16ps register-blocked
// micro-kernel over pair-interleaved weight panels (layout and summation
// order: gemm_panel.h), and on AMX CPUs a tile kernel over the same panels
// (gemm_panel.h "AMX tiles"). Compiled for every Highway target, but only the
// AVX3_DL target of a GCC build has the kernel (Highway 1.0 has no AVX-512
// BF16 target: the instructions are enabled here with a nested target
// pragma, as kernels_int8_hwy.cc does for VNNI, and the CPU is asked at run
// time); the other targets report it unavailable. Oracle: GemmBf16Ref.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "kernels/gemm_panel.h"
#include "kernels/kernels.h"

#include "kernels/dispatch.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm_bf16_hwy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
#undef HQEKV_BF16
#if HWY_TARGET == HWY_AVX3_DL && !HWY_COMPILER_CLANG
#pragma GCC push_options
#pragma GCC target("avx512bf16")
#define HQEKV_BF16 1
#else
#define HQEKV_BF16 0
#endif
namespace hqekv::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HQEKV_BF16
bool Bf16Available() { return __builtin_cpu_supports("avx512bf16"); }

#include "kernels/gemm_tile-inl.h"

using DF = hn::CappedTag<float, 16>;
using VF = hn::Vec<DF>;

// y[i * ldy + j] (+)= sum over pairs c of P[c][j] . Xp[c][i], i < kRows,
// j < cols (<= 32): P is kcp x 32 words (two vectors per pair), Xp kcp x
// kRows words. `add` adds to y (every k block after the first).
template <int kRows>
HWY_NOINLINE void Tile(const uint32_t* HWY_RESTRICT p, const uint32_t* HWY_RESTRICT xp, int64_t kcp,
                       float* HWY_RESTRICT y, int64_t ldy, int64_t cols, bool add) {
  const DF df;
  VF a[kRows], b[kRows];
  // The output tile is read (or written) after the k loop: fetch it now.
  for (int i = 0; i < kRows; ++i) {
    __builtin_prefetch(y + i * ldy, 1);
    __builtin_prefetch(y + i * ldy + 31, 1);
  }
  for (int i = 0; i < kRows; ++i) a[i] = b[i] = hn::Zero(df);
  for (int64_t c = 0; c < kcp; ++c, p += 32, xp += kRows) {
    const __m512bh w0 = (__m512bh)_mm512_loadu_si512(p);
    const __m512bh w1 = (__m512bh)_mm512_loadu_si512(p + 16);
    for (int i = 0; i < kRows; ++i) {
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(static_cast<int>(xp[i]));
      a[i].raw = _mm512_dpbf16_ps(a[i].raw, w0, xv);
      b[i].raw = _mm512_dpbf16_ps(b[i].raw, w1, xv);
    }
  }
  for (int i = 0; i < kRows; ++i) StoreTileRow(df, a[i], b[i], y + i * ldy, cols, add);
}

void TileAny(int rows, const uint32_t* p, const uint32_t* xp, int64_t kcp, float* y, int64_t ldy,
             int64_t cols, bool add) {
  WithTileRows<kBf16TileRows>(rows, [&]<int R>() { Tile<R>(p, xp, kcp, y, ldy, cols, add); });
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

bool AmxAvailable() {
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
  const DF df;
  for (int64_t i = 0; i < rows; ++i) {
    const float* lo = c[2 * (i / 16)][i % 16];
    const float* hi = c[2 * (i / 16) + 1][i % 16];
    StoreTileRow(df, hn::Load(df, lo), hn::Load(df, hi), y + i * ldy, cols, add);
  }
}

// 16 pairs of the panel's 32 rows at p (two weight tiles, one 128-byte panel
// row per pair) times the two activation tiles loaded: the four sum tiles.
HWY_INLINE void WeightStep(const uint32_t* p) {
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

void GemmRange(const WeightMatrix& w, const Bf16Acts* a, int64_t r0, int64_t r1, float* y,
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
#else
bool Bf16Available() { return false; }
bool AmxAvailable() { return false; }

void GemmRange(const WeightMatrix&, const Bf16Acts*, int64_t, int64_t, float*, int64_t) {
  HWY_ASSERT(false);  // callers check GemmBf16Available()
}
#endif

// This target's entry points (kernels/dispatch.h).
const Bf16GemmKernels* Bf16GemmKernelTable() {
  static constexpr Bf16GemmKernels kTable = {&Bf16Available, &AmxAvailable, &GemmRange};
  return &kTable;
}

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::kernels
#if HQEKV_BF16
#pragma GCC pop_options
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::kernels {

HWY_EXPORT(Bf16GemmKernelTable);
const Bf16GemmKernels& Bf16GemmKernelsForCpu() {
  return *HWY_DYNAMIC_DISPATCH(Bf16GemmKernelTable)();
}

bool GemmBf16Available() { return Bf16GemmKernelsForCpu().bf16_available(); }
bool GemmAmxBf16Available() { return Bf16GemmKernelsForCpu().amx_available(); }

void GemmBf16Range(const WeightMatrix& w, const Bf16Acts& a, int64_t r0, int64_t r1, float* y,
                   int64_t ldy) {
  Bf16GemmKernelsForCpu().gemm_range(w, &a, r0, r1, y, ldy);
}

}  // namespace hqekv::kernels
#endif  // HWY_ONCE
