// Per-target function tables of the Highway units in kernels/. Each unit
// (compiled once per SIMD target by hwy/foreach_target.h) exports ONE function
// that returns its table for the target Highway has chosen; the *ForCpu()
// accessor below (one HWY_DYNAMIC_DISPATCH, in that unit) fetches it and the
// public entry points (kernels.h, gemm_panel.h, elementwise.h) call through
// it. The fetch is an index into Highway's per-target array, as cheap as the
// per-entry-point dispatch it replaces, and it follows a target forced by
// hwy::SetSupportedTargetsForTest (tests/simd_targets.h), so every target's
// kernels stay testable against the scalar oracles.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/gemm_panel.h"
#include "kernels/kernels.h"

namespace hqekv::kernels {

// kernels_hwy.cc: fp32-activation kernels; `type` is a TensorType as int.
struct F32RowKernels {
  // Dot of one weight row (k values) with x[k].
  float (*dot)(int type, const uint8_t* row, const float* x, int64_t k);
  // One row of k values to fp32.
  void (*dequantize_row)(int type, const uint8_t* row, int64_t k, float* out);
  // y[r] = W[r] . x for rows [r0, r1), rows row_bytes apart from w.
  void (*matvec_rows)(int type, const uint8_t* w, int64_t row_bytes, const float* x, int64_t k,
                      int64_t r0, int64_t r1, float* y);
  // Dot-form GEMM for m <= 32 activation rows, rows [r0, r1); false (and no
  // work) when the type or target has no such kernel.
  bool (*matmul_small_m)(int type, const uint8_t* w, int64_t row_bytes, const float* x, int64_t k,
                         int64_t m, int64_t r0, int64_t r1, float* y, int64_t ldy);
};
const F32RowKernels& F32RowKernelsForCpu();

// kernels_int8_hwy.cc: int8 activations (Int8Acts) and the integer row kernels.
struct Int8Kernels {
  // Quantizes `blocks` blocks of 32 values (Int8Acts layout).
  void (*quantize_blocks)(const float* x, int64_t blocks, int8_t* q, float* d, float* s,
                          float* s16);
  // y[i * ldy + r] = W[r] . act row i for i in [i0, i1), r in [r0, r1).
  void (*rows_range)(int type, const uint8_t* w, int64_t row_bytes, const Int8Acts* a, int64_t i0,
                     int64_t i1, int64_t r0, int64_t r1, float* y, int64_t ldy);
};
const Int8Kernels& Int8KernelsForCpu();

// gemm_panel_hwy.cc: the fp32 outer-product GEMM over weight panels.
struct PanelGemmKernels {
  int64_t (*panel_rows)();
  void (*gemm_range)(const WeightMatrix& w, const float* x, int64_t m, int64_t r0, int64_t r1,
                     float* y, int64_t ldy);
};
const PanelGemmKernels& PanelGemmKernelsForCpu();

// elementwise_hwy.cc: the element-wise steps of elementwise.h.
struct ElementwiseKernels {
  void (*rms_norm)(const float* x, const float* w, int d, float eps, float* out);
  void (*swiglu)(float* g, const float* u, size_t n);
  void (*add_into)(float* x, const float* y, size_t n);
};
const ElementwiseKernels& ElementwiseKernelsForCpu();

}  // namespace hqekv::kernels
