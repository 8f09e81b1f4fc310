// Prefill GEMM for the weight types that multiply fp32 activations (F32, F16,
// BF16 and every block type without the int8-activation path): a register-
// blocked outer-product micro-kernel over weight panels converted to fp32.
//
// Layout (per thread, rows [r0, r1) of W):
//   - a panel is NR = 2 vectors of weight rows (32 on AVX-512, 16 on AVX2),
//     converted to fp32 once per panel and k block and stored k-major
//     (P[c][j] = W[r0 + j][k0 + c], rows past the end are 0);
//   - a block of MR activation rows (8 on AVX-512, 6 with 16 registers) is
//     packed k-major too (Xp[c][i]);
//   - per k: 2 panel vectors x MR broadcast activations -> 2 MR FMAs into
//     2 MR accumulators, which are the output tile Y[i][r0 .. r0 + NR) itself
//     (no horizontal reductions).
// k is split into blocks of kGemmKc values (a panel slice of 128 KiB and the
// activation block stay in L2; a multiple of 256 so that every block format
// splits on block edges);
// each block's partial sum starts at 0 and is added to Y, so a value is a sum
// of k / kGemmKc sequential fp32 chains of <= kGemmKc products.
//
// Oracle: MatMulRef (double accumulation); tests/model/gemm_panel_test.cc.
#pragma once

#include <cstdint>

#include "model/kernels.h"

namespace hqekv::kernels {

// k values per block of the panel GEMM. Every block re-reads and re-writes
// the whole output Y (m x n fp32, tens of MiB at prefill sizes, 8 rows n
// floats apart per tile: a TLB miss per row), so fewer, longer blocks win
// over an L1-resident panel: 1024 measured F16 0.79-0.80 of the FMA peak
// against 0.67-0.73 with 256 (512 tokens, 4096 -> 14336, bench_kernels).
inline constexpr int64_t kGemmKc = 1024;

// Weight rows per panel on the dispatched target: MatMul splits rows across
// threads in whole panels.
int64_t GemmPanelRows();

// y[i * ldy + r] = W[r] . x[i] for r in [r0, r1) and i < m; activation rows
// are w.k floats apart. One thread; any r0, r1 (a partial panel is padded).
void GemmPanelRange(const WeightMatrix& w, const float* x, int64_t m, int64_t r0, int64_t r1,
                    float* y, int64_t ldy);

}  // namespace hqekv::kernels
