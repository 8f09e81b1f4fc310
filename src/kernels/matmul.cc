// The entry points of kernels.h over the per-target kernels of kernels_hwy.cc
// (fp32 activations), kernels_int8_hwy.cc (int8 activations), gemm_panel_hwy.cc
// (fp32 panel GEMM) and gemm_bf16_avx512.cc (bf16 activations): which kernel a
// product takes, and how its rows are split across the thread pool.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/parallel.h"
#include "kernels/dispatch.h"
#include "kernels/gemm_panel.h"
#include "kernels/kernels.h"

namespace hqekv::kernels {

// Below this many multiply-adds a matrix product runs on the calling thread.
constexpr int64_t kMinParallelMacs = 1 << 16;

float Dot(TensorType t, const void* row, const float* x, int64_t k) {
  return F32RowKernelsForCpu().dot(static_cast<int>(t), static_cast<const uint8_t*>(row), x, k);
}

void DequantizeRow(TensorType t, const void* row, int64_t k, float* out) {
  F32RowKernelsForCpu().dequantize_row(static_cast<int>(t), static_cast<const uint8_t*>(row), k,
                                       out);
}

namespace {

// Whether products with w take the int8-activation path (kernels_int8_hwy.cc).
bool UseInt8Acts(const WeightMatrix& w) { return Int8ActivationsEnabled() && HasInt8Path(w.type); }

// The caller's quantized activations (one buffer per calling thread, reused).
Int8Acts& CallerInt8Acts() {
  thread_local Int8Acts acts;
  return acts;
}

}  // namespace

void MatVec(const WeightMatrix& w, const float* x, float* y) {
  if (UseInt8Acts(w)) {
    Int8Acts& a = CallerInt8Acts();
    QuantizeActs(x, 1, w.k, &a);
    if (w.n * w.k < kMinParallelMacs) return Int8Rows(w, a, 0, w.n, y, w.n);
    return ParallelFor(w.n, [&](int64_t r0, int64_t r1) { Int8Rows(w, a, r0, r1, y, w.n); });
  }
  const int64_t rb = RowBytes(w.type, w.k);
  const auto* base = static_cast<const uint8_t*>(w.data);
  const auto fn = F32RowKernelsForCpu().matvec_rows;
  // Waking the pool costs microseconds: small products run on the caller.
  if (w.n * w.k < kMinParallelMacs)
    return fn(static_cast<int>(w.type), base, rb, x, w.k, 0, w.n, y);
  ParallelFor(w.n, [&](int64_t r0, int64_t r1) {
    fn(static_cast<int>(w.type), base, rb, x, w.k, r0, r1, y);
  });
}

void MatVecMany(const WeightMatrix* const* ws, float* const* ys, int count, const float* x) {
  const auto fn = F32RowKernelsForCpu().matvec_rows;
  int64_t total = 0, macs = 0;
  bool any_int8 = false;
  for (int i = 0; i < count; ++i) {
    total += ws[i]->n;
    macs += ws[i]->n * ws[i]->k;
    any_int8 = any_int8 || UseInt8Acts(*ws[i]);
  }
  // The shared input is quantized once for every int8-path matrix.
  Int8Acts& acts = CallerInt8Acts();
  if (any_int8) QuantizeActs(x, 1, ws[0]->k, &acts);
  // Rows [b, e) of the concatenation of every matrix's rows.
  auto run = [&](int64_t b, int64_t e) {
    int64_t first = 0;
    for (int i = 0; i < count && b < e; ++i) {
      const WeightMatrix& w = *ws[i];
      const int64_t lo = std::max(b, first), hi = std::min(e, first + w.n);
      if (lo < hi && UseInt8Acts(w)) {
        Int8Rows(w, acts, lo - first, hi - first, ys[i], w.n);
      } else if (lo < hi) {
        fn(static_cast<int>(w.type), static_cast<const uint8_t*>(w.data), RowBytes(w.type, w.k), x,
           w.k, lo - first, hi - first, ys[i]);
      }
      first += w.n;
    }
  };
  if (macs < kMinParallelMacs) return run(0, total);
  ParallelFor(total, run);
}

void MatMul(const WeightMatrix& w, const float* x, int64_t m, float* y) {
  if (m == 1) return MatVec(w, x, y);
  if (UseInt8Acts(w)) {
    // Activations quantized once per GEMM; weight rows split across threads.
    Int8Acts& a = CallerInt8Acts();
    QuantizeActs(x, m, w.k, &a);
    if (w.n * w.k * m < kMinParallelMacs) return Int8Rows(w, a, 0, w.n, y, w.n);
    return ParallelFor(w.n, [&](int64_t r0, int64_t r1) { Int8Rows(w, a, r0, r1, y, w.n); });
  }
  // F16 / BF16 with m <= 32 (batched decode, short prompts): dot form, rows split across
  // threads (a row range the kernel does not take returns false at once).
  if (m <= 32) {
    const auto small = F32RowKernelsForCpu().matmul_small_m;
    const auto* base = static_cast<const uint8_t*>(w.data);
    const int64_t rb = RowBytes(w.type, w.k);
    if (small(static_cast<int>(w.type), base, rb, x, w.k, m, 0, 0, y, w.n)) {
      if (w.n * w.k * m < kMinParallelMacs) {
        small(static_cast<int>(w.type), base, rb, x, w.k, m, 0, w.n, y, w.n);
        return;
      }
      return ParallelFor(w.n, [&](int64_t r0, int64_t r1) {
        small(static_cast<int>(w.type), base, rb, x, w.k, m, r0, r1, y, w.n);
      });
    }
  }
  // BF16 weights on AVX-512 BF16 CPUs: bf16 activations, vdpbf16ps panel GEMM
  // or AMX tiles (gemm_bf16_avx512.cc), switched off with the int8 path (fp32
  // activations).
  // F16 weights on AMX CPUs too: bf16 activations and each weight split into
  // two bf16 parts (gemm_panel.h "AMX tiles").
  const bool amx = Int8ActivationsEnabled() && Bf16AmxEnabled() && GemmAmxBf16Available();
  if ((w.type == TensorType::kBF16 && Int8ActivationsEnabled() && GemmBf16Available()) ||
      (w.type == TensorType::kF16 && amx)) {
    // (A reference: the workers must read the caller's buffer, not their own.)
    thread_local Bf16Acts buffer;
    Bf16Acts& acts = buffer;
    // AMX CPUs: tile-major activations for the tile kernel (gemm_panel.h).
    if (amx) {
      ResizeBf16TileMajor(m, w.k, &acts);
    } else {
      ResizeBf16Acts(m, w.k, &acts);
    }
    const int64_t groups = (m + kBf16TileRows - 1) / kBf16TileRows;
    auto pack = [&](int64_t g0, int64_t g1) {
      const int64_t i0 = g0 * kBf16TileRows, i1 = std::min(g1 * kBf16TileRows, m);
      if (amx) return PackBf16TileMajor(x, i0, i1, &acts);
      PackBf16Rows(x, m, w.k, i0, i1, acts.words.data());
    };
    // (The packing is 1-2% of the product's time on one thread.)
    if (m * w.k < kMinParallelMacs) {
      pack(0, groups);
    } else {
      ParallelFor(groups, pack);
    }
    const int64_t panels = (w.n + kBf16PanelRows - 1) / kBf16PanelRows;
    auto run = [&](int64_t p0, int64_t p1) {
      GemmBf16Range(w, acts, p0 * kBf16PanelRows, std::min(p1 * kBf16PanelRows, w.n), y, w.n);
    };
    if (w.n * w.k * m < kMinParallelMacs) return run(0, panels);
    return ParallelFor(panels, run);
  }
  // fp32-panel GEMM (gemm_panel_hwy.cc): threads take whole panels of rows.
  const int64_t nr = GemmPanelRows();
  const int64_t panels = (w.n + nr - 1) / nr;
  auto run = [&](int64_t p0, int64_t p1) {
    GemmPanelRange(w, x, m, p0 * nr, std::min(p1 * nr, w.n), y, w.n);
  };
  if (w.n * w.k * m < kMinParallelMacs) return run(0, panels);
  ParallelFor(panels, run);
}

}  // namespace hqekv::kernels
