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
// Oracle: MatMulRef (double accumulation); tests/kernels/gemm_panel_test.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

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

// ---- BF16 weights x bf16 activations (AVX-512 BF16: vdpbf16ps) ----
// MatMul with BF16 weights and m > 32 rounds the activations to bf16 once
// per call (nearest even) and multiplies pairs of bf16 values into fp32
// accumulators: vdpbf16ps does 16 lanes x 2 products per instruction, twice
// the MACs of an fp32 FMA, and the weight panel needs no conversion (a
// 32-bit lane holds the pair (W[r][2c], W[r][2c + 1]) as stored in the row).
// Only on CPUs with AVX512_BF16 (the AVX3_DL target, GCC builds); elsewhere,
// and with SetInt8Activations(false) (the one "reduced-precision
// activations" switch, see kernels.h), BF16 keeps the fp32-panel GEMM.
//
// Layout: a panel is kBf16PanelRows = 32 weight rows (two vectors of 16
// pairs), packed pair-major per k block (P[c][j] = pair c of row j, rows
// past the end 0); activations come in groups of kBf16TileRows = 8 rows,
// pair-major within a group; the register tile is 2 x 8 accumulators.
//
// Summation order (what the oracle GemmBf16Ref emulates): k is split into
// blocks of kBf16Kc values; per block and output, s = 0, then for each pair c
// s += w[2c+1] x[2c+1] and s += w[2c] x[2c] (the order the instruction's
// definition gives; each bf16 x bf16 product is exact in fp32), and the
// block sums are added to y in block order. An odd k pads the last pair
// with (0, 0).
inline constexpr int64_t kBf16PanelRows = 32;
inline constexpr int64_t kBf16TileRows = 8;
// k values per block: 2048 (a 128 KiB panel, as the fp32 path's 1024) beat
// 1024 by 3-8% (fewer passes over Y; 14336 x 4096, m = 512, bench_kernels).
inline constexpr int64_t kBf16Kc = 2048;

// m activation rows of k values rounded to bf16, packed for the kernel:
// row group g (rows 8g .. 8g + 7, fewer in the last group) starts at word
// 8 g kp (kp = (k + 1) / 2 pairs); within it, word c * rows + i =
// bf16(x[i][2c]) | bf16(x[i][2c + 1]) << 16 (the odd pair's high half 0).
//
// The AMX layout (tile_major, see "AMX tiles" below) instead:
// ld = kp rounded up to 16 (a tile row holds 16 pairs; the pad words are 0),
// rows padded with 0 to a multiple of kAmxRows = 32; block b = rows 32b ..
// 32b + 31 starts at word 32 b ld, and within it pairs 16s .. 16s + 15 of its
// 32 rows are 512 contiguous words (row r's 16 at 512 s + 16 r): one tile
// load reads 1 KiB in a row. (Plain row-major rows 8 KiB apart made every
// tile row of a load fall into the same L1 set.)
struct Bf16Acts {
  int64_t m = 0, k = 0, kp = 0;
  bool tile_major = false;
  int64_t ld = 0;  // pairs per row padded to 16, tile_major only
  std::vector<uint32_t> words;
  const uint32_t* group(int64_t g0) const { return words.data() + g0 * kp; }  // g0 % 8 == 0
};
void PackBf16Acts(const float* x, int64_t m, int64_t k, Bf16Acts* out);
// The same in parts (MatMul packs row groups on several threads): size out
// for m x k, then pack rows [i0, i1) (multiples of 8, or i1 = m) of x.
void ResizeBf16Acts(int64_t m, int64_t k, Bf16Acts* out);
void PackBf16Rows(const float* x, int64_t m, int64_t k, int64_t i0, int64_t i1, uint32_t* words);

// Whether the dispatched target runs the bf16 kernel (AVX3_DL target and the
// CPU has AVX512_BF16).
bool GemmBf16Available();

// ---- AMX tiles (Intel Xeon from Sapphire Rapids on) ----
// The same products on AMX: tdpbf16ps multiplies a 16 x 32 bf16 activation
// tile by a 32 x 16 weight tile (the panel above, 16 of its rows, read with
// a 128-byte stride) into 16 x 16 fp32 sums, 8192 products per instruction
// against vdpbf16ps's 32. Register tile: 2 x 2 accumulator tiles (32
// activation rows x 32 weight rows). Rounding: the activations are the same
// bf16 values, but the tile unit adds each tile's products in its own order
// and precision (not one of the sequential orders: measured on a Xeon, 38-44
// of 256 sums equal any fp32 sequential order), so the contract is not
// GemmBf16Ref's bits but the exact sum of the same bf16 products within
// 2^-17 of sum |w x| (tests/kernels/gemm_bf16_test.cc). Used by MatMul where
// GemmAmxBf16Available() and SetBf16Amx has not switched it off, for BF16
// weights and for F16 weights too: each fp16 weight is split into two bf16
// parts, w = hi + lo exactly (hi: the top 16 bits of its fp32; lo = w - hi
// has at most 3 significant bits), the lo panel multiplied by the same
// activation tiles (8 tdpbf16ps per step instead of 4). F16 on AMX thus takes
// bf16 activations, as BF16 does everywhere (SetInt8Activations(false) keeps
// fp32); model-level KL against fp32 activations 3.8e-8 on the synthetic F16
// model (tests/kernels/kernels_int8_test.cc). Xeon, 14336 x 4096, m = 512:
// F16 128-136 GFLOP/s (fp32 panels) -> 236-321 on AMX.
inline constexpr int64_t kAmxRows = 32;
// AVX3_DL target, a CPU with AMX-TILE and AMX-BF16, and the kernel granted the
// tile state (Linux arch_prctl ARCH_REQ_XCOMP_PERM, asked once per process).
bool GemmAmxBf16Available();
// Tests and benchmarks: off makes MatMul keep the vdpbf16ps kernel (whose
// results are GemmBf16Ref's bits) on AMX CPUs. Default on. Not thread-safe
// against a concurrent MatMul.
void SetBf16Amx(bool on);
bool Bf16AmxEnabled();
// The tile-major layout for m x k: size and flags (rows and words of the pad
// are written by PackBf16TileMajor).
void ResizeBf16TileMajor(int64_t m, int64_t k, Bf16Acts* out);
// Rows [i0, i1) of x into a tile-major Bf16Acts sized by ResizeBf16TileMajor
// (with i1 == m also the zero pad rows up to a multiple of kAmxRows).
void PackBf16TileMajor(const float* x, int64_t i0, int64_t i1, Bf16Acts* out);

// y[i * ldy + r] = W[r] . bf16(x[i]) for r in [r0, r1), i < a.m; w.type ==
// kBF16, a.k == w.k, GemmBf16Available() (and GemmAmxBf16Available() for
// tile-major activations, which run on AMX). One thread; any r0 < r1.
void GemmBf16Range(const WeightMatrix& w, const Bf16Acts& a, int64_t r0, int64_t r1, float* y,
                   int64_t ldy);

// Scalar oracle: the same rounding and summation order as GemmBf16Range
// (y is m x w.n, ldy = w.n).
void GemmBf16Ref(const WeightMatrix& w, const float* x, int64_t m, float* y);

}  // namespace hqekv::kernels
