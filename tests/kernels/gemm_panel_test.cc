// The fp32-panel GEMM (gemm_panel_hwy.cc) against the scalar oracle
// MatMulRef on every x86 target this CPU runs: float weight types, shapes
// that leave partial panels (n % 32, n % 16, n % 8 != 0), partial activation
// tiles (m % 8, m % 6 != 0) and k tails (k % 16 != 0, k > kGemmKc), one and
// two threads (fp32 activations: the bf16-activation path of BF16 has its own
// test, gemm_bf16_test.cc). F16 / BF16 with m <= 32 take the dot-form small-m kernel of
// kernels_hwy.cc (m = 2..17 here), larger m the panel GEMM (33, 41). Block
// types go through the panel GEMM too (kernels_test.cc).
#include "kernels/gemm_panel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/parallel.h"
#include "hwy/targets.h"
#include "kernels/kernels.h"
#include "../simd_targets.h"
#include "kernel_test_util.h"

namespace hqekv::kernels {
namespace {

using namespace test_util;

// The fp32 contract: |y - ref| <= 1e-5 sum_c |w_c x_c| + 1e-6 (each output
// is a sum of <= kGemmKc-long fp32 chains; the oracle sums in double).
void ExpectNearOracle(const WeightMatrix& w, const float* x, int64_t m, const float* y, int64_t ldy,
                      int64_t r0, int64_t r1) {
  std::vector<float> ref(m * w.n), row(w.k);
  MatMulRef(w, x, m, ref.data());
  for (int64_t r = r0; r < r1; ++r) {
    DequantizeRowRef(w.type, w.row(r), w.k, row.data());
    for (int64_t i = 0; i < m; ++i) {
      double abs = 0;
      for (int64_t c = 0; c < w.k; ++c) abs += std::fabs(double{row[c]} * x[i * w.k + c]);
      ASSERT_NEAR(y[i * ldy + r], ref[i * w.n + r], 1e-5 * abs + 1e-6)
          << TensorTypeName(w.type) << " n=" << w.n << " k=" << w.k << " m=" << m << " i=" << i
          << " r=" << r;
    }
  }
}

TEST(GemmPanel, MatMulEqualsOracleOnEveryTargetOddShapesAndThreads) {
  std::mt19937 rng(11);
  // fp32 activations: BF16 with m > 32 would take the bf16-activation GEMM
  // on AVX-512 BF16 CPUs (its own oracle: gemm_bf16_test.cc).
  SetInt8Activations(false);
  const int ran = OnEachVnniTarget([&] {
    for (int threads : {1, 2}) {
      SetNumThreads(threads);
      for (TensorType t : {TensorType::kF32, TensorType::kF16, TensorType::kBF16}) {
        // (n, k): partial panels on every target; k tails below and above
        // one k block (kGemmKc = 1024) and two blocks plus a tail.
        for (auto [n, k] : {std::pair<int64_t, int64_t>{7, 37},
                            {33, 256},
                            {70, 300},
                            {45, 528},
                            {96, 771},
                            {21, 1100},
                            {40, 2100}}) {
          auto wb = RandomFloatRows(t, n, k, rng);
          const WeightMatrix w{t, wb.data(), n, k};
          for (int64_t m : {2, 3, 4, 6, 9, 13, 17, 33, 41}) {
            auto x = NormalValues(m * k, rng);
            std::vector<float> y(m * n, NAN);
            MatMul(w, x.data(), m, y.data());
            ExpectNearOracle(w, x.data(), m, y.data(), n, 0, n);
          }
        }
      }
    }
    SetNumThreads(1);
  });
  SetInt8Activations(true);
  EXPECT_GE(ran, 1);
}

// A row range that starts inside a panel and ends before the matrix does,
// written into a wider output (ldy > n): only its columns are touched.
TEST(GemmPanel, RangeWritesOnlyItsColumns) {
  std::mt19937 rng(12);
  OnEachVnniTarget([&] {
    const int64_t n = 80, k = 290, m = 11, ldy = 100, r0 = 5, r1 = 61;
    auto wb = RandomFloatRows(TensorType::kF16, n, k, rng);
    const WeightMatrix w{TensorType::kF16, wb.data(), n, k};
    auto x = NormalValues(m * k, rng);
    std::vector<float> y(m * ldy, -7.f);
    GemmPanelRange(w, x.data(), m, r0, r1, y.data(), ldy);
    ExpectNearOracle(w, x.data(), m, y.data(), ldy, r0, r1);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t r = 0; r < ldy; ++r) {
        if (r < r0 || r >= r1) {
          ASSERT_EQ(y[i * ldy + r], -7.f) << "i=" << i << " r=" << r;
        }
      }
    }
  });
}

// Decode GEMV of F16 / BF16 (8 or 4 rows per activation load, k tails):
// MatVec == oracle on every target, and a row's bits do not depend on how the
// rows are grouped (MatVecMany concatenates matrices, so its groups differ).
TEST(GemmPanel, HalfMatVecEqualsOracleAndIsGroupingIndependent) {
  std::mt19937 rng(13);
  const int ran = OnEachVnniTarget([&] {
    for (TensorType t : {TensorType::kF16, TensorType::kBF16}) {
      for (auto [n, k] : {std::pair<int64_t, int64_t>{7, 37}, {13, 300}, {45, 771}}) {
        auto wb = RandomFloatRows(t, n, k, rng), vb = RandomFloatRows(t, 3, k, rng);
        const WeightMatrix w{t, wb.data(), n, k}, v{t, vb.data(), 3, k};
        auto x = NormalValues(k, rng);
        std::vector<float> y(n), yv(3), many_w(n), many_v(3);
        MatVec(w, x.data(), y.data());
        ExpectNearOracle(w, x.data(), 1, y.data(), n, 0, n);
        // v first: w's rows start at row 3 of the concatenation.
        MatVec(v, x.data(), yv.data());
        const WeightMatrix* ws[2] = {&v, &w};
        float* ys[2] = {many_v.data(), many_w.data()};
        MatVecMany(ws, ys, 2, x.data());
        for (int64_t r = 0; r < n; ++r) ASSERT_EQ(many_w[r], y[r]) << "r=" << r;
        for (int64_t r = 0; r < 3; ++r) ASSERT_EQ(many_v[r], yv[r]) << "r=" << r;
      }
    }
  });
  EXPECT_GE(ran, 1);
}

// Sanity of the panel width the threads split by: two vectors of fp32.
TEST(GemmPanel, PanelRowsIsTwoVectors) {
  const int64_t nr = GemmPanelRows();
  EXPECT_TRUE(nr == 32 || nr == 16 || nr == 8 || nr == 2) << nr;
}

}  // namespace
}  // namespace hqekv::kernels
