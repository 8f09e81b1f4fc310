// bf16-activation GEMM for BF16 weights: vdpbf16ps register-blocked
// micro-kernel over pair-interleaved weight panels (layout and summation
// order: gemm_panel.h). Compiled for every Highway target, but only the
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

#include "model/gemm_panel.h"
#include "model/kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "model/gemm_bf16_hwy.cc"
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

#include "model/gemm_tile-inl.h"

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

#include "model/transpose16_avx512-inl.h"

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

void GemmRange(const WeightMatrix& w, const Bf16Acts* a, int64_t r0, int64_t r1, float* y,
               int64_t ldy) {
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

void GemmRange(const WeightMatrix&, const Bf16Acts*, int64_t, int64_t, float*, int64_t) {
  HWY_ASSERT(false);  // callers check GemmBf16Available()
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::kernels
#if HQEKV_BF16
#pragma GCC pop_options
#endif
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::kernels {

HWY_EXPORT(Bf16Available);
HWY_EXPORT(GemmRange);

bool GemmBf16Available() { return HWY_DYNAMIC_DISPATCH(Bf16Available)(); }

void GemmBf16Range(const WeightMatrix& w, const Bf16Acts& a, int64_t r0, int64_t r1, float* y,
                   int64_t ldy) {
  HWY_DYNAMIC_DISPATCH(GemmRange)(w, &a, r0, r1, y, ldy);
}

}  // namespace hqekv::kernels
#endif  // HWY_ONCE
