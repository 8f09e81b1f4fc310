// Outer-product fp32 GEMM micro-kernel over converted weight panels (see
// gemm_panel.h for the layout). Highway, compiled for every target and
// dispatched at run time. Oracle: MatMulRef (kernels_ref.cc).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/gemm_panel.h"
#include "kernels/kernels.h"

#include "kernels/dispatch.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm_panel_hwy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::CappedTag<float, 16>;
using VF = hn::Vec<DF>;

// Activation rows per tile: 2 MR accumulators + 2 panel vectors + 1
// broadcast must fit the register file (32 vector registers on AVX-512 and
// Arm, 16 on AVX2 / SSE4).
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3) || HWY_ARCH_ARM
constexpr int kMr = 8;
#else
constexpr int kMr = 6;
#endif

int64_t PanelRows() { return 2 * static_cast<int64_t>(hn::Lanes(DF())); }

#include "kernels/gemm_tile-inl.h"

// y[i * ldy + j] (+)= sum_c P[c][j] Xp[c][i] for i < kRows, j < cols (<= NR):
// P is kc x NR (k-major panel), Xp kc x kRows (k-major activations). `add`
// adds to y (every k block after the first).
template <int kRows>
HWY_NOINLINE void Tile(const float* HWY_RESTRICT p, const float* HWY_RESTRICT xp, int64_t kc,
                       float* HWY_RESTRICT y, int64_t ldy, int64_t cols, bool add) {
  const DF df;
  const int64_t N = hn::Lanes(df);
  VF a[kRows], b[kRows];
  // The output tile is read (or written) after the k loop; it is usually
  // in L3 by then (Y is m x n fp32), so start fetching it now.
  for (int i = 0; i < kRows; ++i) {
    __builtin_prefetch(y + i * ldy, 1);
    __builtin_prefetch(y + i * ldy + 2 * N - 1, 1);
  }
  for (int i = 0; i < kRows; ++i) a[i] = b[i] = hn::Zero(df);
  for (int64_t c = 0; c < kc; ++c, p += 2 * N, xp += kRows) {
    const VF w0 = hn::LoadU(df, p), w1 = hn::LoadU(df, p + N);
    for (int i = 0; i < kRows; ++i) {
      const VF xv = hn::Set(df, xp[i]);
      a[i] = hn::MulAdd(w0, xv, a[i]);
      b[i] = hn::MulAdd(w1, xv, b[i]);
    }
  }
  for (int i = 0; i < kRows; ++i) StoreTileRow(df, a[i], b[i], y + i * ldy, cols, add);
}

void TileAny(int rows, const float* p, const float* xp, int64_t kc, float* y, int64_t ldy,
             int64_t cols, bool add) {
  WithTileRows<kMr>(rows, [&]<int R>() { Tile<R>(p, xp, kc, y, ldy, cols, add); });
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// 16 values of a F32 / F16 / BF16 row from column c, as fp32 (F16 by the
// hardware conversion, BF16 by a shift: both exact).
template <TensorType kType>
HWY_INLINE __m512 Load16(const uint8_t* row, int64_t c) {
  if constexpr (kType == TensorType::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c));
    if constexpr (kType == TensorType::kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

#include "kernels/transpose16_avx512-inl.h"

// Full 32-row panel of a float type, columns [k0, k0 + kc16) (kc16 % 16 == 0).
template <TensorType kType>
void PackFloatPanel512(const WeightMatrix& w, int64_t r0, int64_t k0, int64_t kc16, float* p) {
  __m512 r[16];
  for (int64_t c = 0; c < kc16; c += 16) {
    for (int half = 0; half < 2; ++half) {
      for (int j = 0; j < 16; ++j) r[j] = Load16<kType>(w.row(r0 + 16 * half + j), k0 + c);
      Transpose16Store(r, p + c * 32 + 16 * half, 32);
    }
  }
}
#endif

// P[c][j] = W[r0 + j][k0 + c] in fp32 for c < kc, j < rows; 0 for rows <= j <
// NR. `tmp` holds the rows' slices converted row-major first (NR x kc).
void PackPanel(const WeightMatrix& w, int64_t r0, int rows, int64_t k0, int64_t kc, float* tmp,
               float* p) {
  const int64_t nr = PanelRows();
  int64_t c0 = 0;  // columns [0, c0) are packed by the AVX-512 transposes
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if (rows == 32) {
    const int64_t kc16 = kc / 16 * 16;
    if (w.type == TensorType::kF16) {
      PackFloatPanel512<TensorType::kF16>(w, r0, k0, kc16, p);
      c0 = kc16;
    } else if (w.type == TensorType::kBF16) {
      PackFloatPanel512<TensorType::kBF16>(w, r0, k0, kc16, p);
      c0 = kc16;
    } else if (w.type == TensorType::kF32) {
      PackFloatPanel512<TensorType::kF32>(w, r0, k0, kc16, p);
      c0 = kc16;
    }
    if (c0 == kc) return;
  }
#endif
  const float* src = tmp;
  int64_t lds = kc;
  if (w.type == TensorType::kF32) {
    src = reinterpret_cast<const float*>(w.row(r0)) + k0;
    lds = w.k;
  } else {
    const int64_t off = RowBytes(w.type, k0);
    for (int j = 0; j < rows; ++j) DequantizeRow(w.type, w.row(r0 + j) + off, kc, tmp + j * kc);
  }
  for (int64_t c = c0; c < kc; ++c) {
    float* pc = p + c * nr;
    for (int j = 0; j < rows; ++j) pc[j] = src[j * lds + c];
    for (int64_t j = rows; j < nr; ++j) pc[j] = 0.f;
  }
}

// Xp = the activation rows [i0, i0 + mi) x columns [k0, k0 + kc) in groups of
// kMr rows: group g at Xp + g * kMr * kc, k-major with stride = its row count.
void PackActs(const float* x, int64_t ldx, int64_t i0, int64_t mi, int64_t k0, int64_t kc,
              float* xp) {
  for (int64_t g = 0; g < mi; g += kMr) {
    const int64_t rows = std::min<int64_t>(kMr, mi - g);
    float* out = xp + g * kc;
    for (int64_t i = 0; i < rows; ++i) {
      const float* xi = x + (i0 + g + i) * ldx + k0;
      for (int64_t c = 0; c < kc; ++c) out[c * rows + i] = xi[c];
    }
  }
}

void GemmRange(const WeightMatrix& w, const float* x, int64_t m, int64_t r0, int64_t r1, float* y,
               int64_t ldy) {
  const int64_t nr = PanelRows();
  // Activation rows per block: the packed block (mb x kGemmKc fp32, <= 2 MiB)
  // stays in L2 while every panel of this thread passes over it (measured at
  // 512 tokens: 512 rows beat 256 and 128).
  const int64_t mb = std::min<int64_t>(m, 512);
  thread_local std::vector<float> xp, panel, tmp;
  xp.resize(static_cast<size_t>(mb * kGemmKc));
  panel.resize(static_cast<size_t>(nr * kGemmKc));
  tmp.resize(static_cast<size_t>(nr * kGemmKc));
  for (int64_t i0 = 0; i0 < m; i0 += mb) {
    const int64_t mi = std::min(mb, m - i0);
    for (int64_t k0 = 0; k0 < w.k; k0 += kGemmKc) {
      const int64_t kc = std::min(kGemmKc, w.k - k0);
      PackActs(x, w.k, i0, mi, k0, kc, xp.data());
      for (int64_t p0 = r0; p0 < r1; p0 += nr) {
        const int64_t cols = std::min(nr, r1 - p0);
        PackPanel(w, p0, static_cast<int>(cols), k0, kc, tmp.data(), panel.data());
        for (int64_t g = 0; g < mi; g += kMr) {
          const int rows = static_cast<int>(std::min<int64_t>(kMr, mi - g));
          TileAny(rows, panel.data(), xp.data() + g * kc, kc, y + (i0 + g) * ldy + p0, ldy, cols,
                  k0 > 0);
        }
      }
    }
  }
}

// This target's entry points (kernels/dispatch.h).
const PanelGemmKernels* PanelGemmKernelTable() {
  static constexpr PanelGemmKernels kTable = {&PanelRows, &GemmRange};
  return &kTable;
}

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::kernels {

HWY_EXPORT(PanelGemmKernelTable);
const PanelGemmKernels& PanelGemmKernelsForCpu() {
  return *HWY_DYNAMIC_DISPATCH(PanelGemmKernelTable)();
}

int64_t GemmPanelRows() { return PanelGemmKernelsForCpu().panel_rows(); }

void GemmPanelRange(const WeightMatrix& w, const float* x, int64_t m, int64_t r0, int64_t r1,
                    float* y, int64_t ldy) {
  PanelGemmKernelsForCpu().gemm_range(w, x, m, r0, r1, y, ldy);
}

}  // namespace hqekv::kernels
#endif  // HWY_ONCE
