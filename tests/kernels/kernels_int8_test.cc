// Int8-activation path (every HasInt8Path weight type): SIMD == scalar oracle on every
// x86 target this CPU runs (AVX-512 VNNI, AVX-512, AVX2, SSE4), its error
// against the fp32-activation product within the quantization bound, the
// matrix products routed through it. The model-level effect (KL of the
// next-token distribution vs the fp32-activation forward) is tested in
// tests/model/reduced_acts_forward_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/parallel.h"
#include "hwy/targets.h"
#include "kernels/gemm_panel.h"
#include "kernels/kernels.h"
#include "../simd_targets.h"
#include "kernel_test_util.h"

namespace hqekv::kernels {
namespace {

using namespace test_util;

// n random rows of k values: random quant bytes (every int8 incl. -128, every
// 6-bit scale/min), moderate fp16 scales.
std::vector<uint8_t> RandomInt8Rows(TensorType t, int64_t n, int64_t k, std::mt19937& rng) {
  std::vector<uint8_t> buf(n * RowBytes(t, k));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> u(0.001f, 0.03f);
  for (auto& b : buf) b = static_cast<uint8_t>(byte(rng));
  // Offsets of the fp16 scale and (second) min / offset fields of a block.
  int scale_at = 0, min_at = -1;
  switch (t) {
    case TensorType::kQ4_1:
    case TensorType::kQ5_1:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
      min_at = 2;
      break;
    case TensorType::kQ6_K:
      scale_at = 208;
      break;
    case TensorType::kQ3_K:
      scale_at = 108;
      break;
    case TensorType::kQ2_K:
      scale_at = 80;
      min_at = 82;
      break;
    default:
      break;
  }
  for (size_t o = 0; o < buf.size(); o += BlockBytes(t)) {
    PutHalf(buf.data() + o + scale_at, u(rng));
    if (min_at >= 0) PutHalf(buf.data() + o + min_at, 0.3f * u(rng));
  }
  return buf;
}

// Activations with a spread of magnitudes per block, a zero block, and exact
// ties (x * 127 / max|x| = n + 0.5) to pin the rounding rule.
std::vector<float> ActsWithTies(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng) * std::exp(nd(rng));
  for (int j = 0; j < 32 && j < n; ++j) v[j] = 0;
  if (n >= 64) {
    v[32] = 127;
    for (int j = 33; j < 64; ++j) v[j] = static_cast<float>(j - 48) + 0.5f;
  }
  return v;
}

constexpr TensorType kInt8Types[] = {TensorType::kQ8_0, TensorType::kQ4_0,   TensorType::kQ4_1,
                                     TensorType::kQ5_0, TensorType::kQ5_1,   TensorType::kQ2_K,
                                     TensorType::kQ3_K, TensorType::kQ4_K,   TensorType::kQ5_K,
                                     TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS};

TEST(Int8Acts, HasInt8PathForTheIntegerBlockTypesOnly) {
  for (TensorType t : kInt8Types) EXPECT_TRUE(HasInt8Path(t)) << TensorTypeName(t);
  for (TensorType t : {TensorType::kF32, TensorType::kF16, TensorType::kBF16}) {
    EXPECT_FALSE(HasInt8Path(t)) << TensorTypeName(t);
  }
}

TEST(Int8Acts, QuantizeEqualsOracleExactly) {
  std::mt19937 rng(11);
  const auto x = ActsWithTies(3 * 512, rng);
  Int8Acts ref;
  QuantizeActsRef(x.data(), 3, 512, &ref);
  EXPECT_EQ(ref.q[32], 127);
  EXPECT_EQ(ref.q[33], -14);  // -14.5 -> -14 (nearest even)
  EXPECT_EQ(ref.q[34], -14);  // -13.5 -> -14
  EXPECT_EQ(ref.d[0], 0.0f);
  ASSERT_EQ(ref.s16.size(), 2 * ref.s.size());
  // Block 1 (d = 1): 127, then -14, -14, -12, -12, ..., -2, -2, 0 (sum 15 with
  // the 127), then 0, 2, 2, 4, 4, ..., 14, 14, 16 (sum 128).
  EXPECT_EQ(ref.d[1], 1.0f);
  EXPECT_EQ(ref.s16[2], 15.0f);
  EXPECT_EQ(ref.s16[3], 128.0f);
  EXPECT_EQ(ref.s[1], 143.0f);
  EXPECT_GT(OnEachVnniTarget([&] {
              Int8Acts got;
              QuantizeActs(x.data(), 3, 512, &got);
              EXPECT_EQ(got.q, ref.q);
              EXPECT_EQ(got.d, ref.d);
              EXPECT_EQ(got.s, ref.s);
              EXPECT_EQ(got.s16, ref.s16);
            }),
            0);
}

// sum over blocks of |d_w d_x isum| terms: the scale of fp32 summation error.
double AbsTerms(TensorType t, const uint8_t* row, const Int8Acts& a, int64_t i) {
  std::vector<float> w(a.k);
  DequantizeRowRef(t, row, a.k, w.data());
  double s = 0;
  for (int64_t j = 0; j < a.k; ++j)
    s += std::abs(double(w[j]) * a.d_row(i)[j / 32] * a.q_row(i)[j]);
  return s + 1e-30;
}

// sum |w_j x_j|: the scale of the fp32-activation product's summation error.
double AbsDotF32(TensorType t, const uint8_t* row, const float* x, int64_t k) {
  std::vector<float> w(k);
  DequantizeRowRef(t, row, k, w.data());
  double s = 0;
  for (int64_t j = 0; j < k; ++j) s += std::abs(double(w[j]) * x[j]);
  return s + 1e-6;
}

TEST(Int8Acts, SimdDotEqualsOracleOnEveryTarget) {
  std::mt19937 rng(5);
  for (TensorType t : kInt8Types) {
    // m = 6: row kernels (groups of 4 + 2); m = 13: on AVX-512 VNNI the panel
    // kernel (tiles of 8 + 5 activation rows; 19 weight rows = a full and a
    // masked panel; k = 4096 = 4 chunks of 1024).
    // k = 96: an odd number of 32-value blocks (the fused AVX-512 kernels'
    // two-block step leaves a tail block); k = 224 and 416: the AVX-512 VNNI
    // legacy kernels' four-block step leaves 3 and 1 blocks. k = 8224 (257
    // blocks: a tail block and, four per step, 1 left) and 8448 (33
    // super-blocks): rows past kSplitPrefetchK = 8192 values (Q8_0 on
    // AVX-512: the two-step prefetch kernel instantiation).
    for (int64_t k : {96, 224, 256, 416, 768, 4096, 8224, 8448}) {
      if (k % BlockSize(t) != 0) continue;
      for (int64_t m : {6, 13}) {
        const int64_t n = m == 6 ? 7 : 19;
        const auto w = RandomInt8Rows(t, n, k, rng);
        const auto x = ActsWithTies(m * k, rng);
        Int8Acts a;
        QuantizeActsRef(x.data(), m, k, &a);
        const WeightMatrix wm{t, w.data(), n, k};
        OnEachVnniTarget([&] {
          std::vector<float> y(m * n, NAN);
          Int8Rows(wm, a, 0, n, y.data(), n);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t r = 0; r < n; ++r) {
              const double ref = DotInt8Ref(t, wm.row(r), a, i);
              const double tol = 2e-6 * AbsTerms(t, wm.row(r), a, i);
              ASSERT_NEAR(y[i * n + r], ref, tol)
                  << TensorTypeName(t) << " k=" << k << " m=" << m << " i=" << i << " r=" << r;
              const float one = DotInt8(t, wm.row(r), a, i);
              if (m < kInt8PanelMinRows) {
                ASSERT_EQ(one, y[i * n + r]);  // M=1 == M=4 row kernel
              } else {
                ASSERT_NEAR(one, ref, tol);
              }
            }
          }
        });
      }
    }
  }
}

// m x k integer activations, each 32-value block holding one +-127 (at
// offset `at`) and the rest drawn from val, quantized: d = 1 and q = x
// exactly, so the integer-product tests below see exact products.
Int8Acts IntegerActs(int64_t m, int64_t k, int at, std::uniform_int_distribution<int>& val,
                     std::mt19937& rng) {
  std::vector<float> x(m * k);
  for (int64_t j = 0; j < m * k; ++j) {
    x[j] = j % 32 == at ? (j % 64 == at ? 127.0f : -127.0f) : static_cast<float>(val(rng));
  }
  Int8Acts a;
  QuantizeActsRef(x.data(), m, k, &a);
  return a;
}

// Every int8 kernel path (Int8Rows: decode, row kernels and GEMM panels by m;
// the single-row DotInt8) equals the scalar oracle exactly, on every target;
// for the integer-product tests below. Returns the number of targets run.
int ExpectExactOnEachTarget(const WeightMatrix& wm, const Int8Acts& a, int64_t m) {
  const TensorType t = wm.type;
  return OnEachVnniTarget([&] {
    std::vector<float> y(m * wm.n, NAN);
    Int8Rows(wm, a, 0, wm.n, y.data(), wm.n);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t r = 0; r < wm.n; ++r) {
        const double ref = DotInt8Ref(t, wm.row(r), a, i);
        ASSERT_EQ(static_cast<double>(y[i * wm.n + r]), ref)
            << TensorTypeName(t) << " k=" << wm.k << " m=" << m << " i=" << i << " r=" << r;
        ASSERT_EQ(static_cast<double>(DotInt8(t, wm.row(r), a, i)), ref);
      }
    }
  });
}

// Q2_K / Q3_K (the group-major row kernels: weight codes permuted within a
// super-block, activations read from a transposed copy): with unit fp16
// scales and integer activations of block maximum 127 (so d = 1, q = x),
// every product and partial sum is an integer below 2^24, so every kernel
// (decode M = 1, row kernels M = 4 and 2, the GEMM panels) must equal the
// oracle exactly, whatever its summation order; random quant bytes reach
// every code, hmask bit and 4/6-bit scale, including the extremes.
TEST(Int8Acts, LowBitKQuantsExactOnIntegerProducts) {
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> byte(0, 255), val(-127, 127);
  for (TensorType t : {TensorType::kQ2_K, TensorType::kQ3_K}) {
    const int64_t k = 512;
    for (int64_t m : {1, 6, 13}) {
      const int64_t n = 5;
      std::vector<uint8_t> w(n * RowBytes(t, k));
      for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
      for (size_t o = 0; o < w.size(); o += BlockBytes(t)) {
        PutHalf(w.data() + o + (t == TensorType::kQ2_K ? 80 : 108), 1.0f);
        if (t == TensorType::kQ2_K) PutHalf(w.data() + o + 82, 1.0f);
      }
      const Int8Acts a = IntegerActs(m, k, 5, val, rng);
      ASSERT_EQ(a.d[0], 1.0f);
      const WeightMatrix wm{t, w.data(), n, k};
      EXPECT_GT(ExpectExactOnEachTarget(wm, a, m), 0);
    }
  }
}

// Q6_K (AVX-512 VNNI with GFNI: the group-major row kernel, codes gathered
// by dword permutes and GFNI field extracts, the -32 offset in the integer
// sums; elsewhere the contiguous kernel): unit fp16 d, int8 group scales in
// [-4, 4] and integer activations of block maximum 127 keep every product and
// partial sum an integer below 2^24 (per super-block at most 16 * 4 * 16 * 32
// * 127 = 4.2e6, k = 512: two), so every kernel must equal the oracle
// exactly; random ql / qh bytes reach every 6-bit code.
TEST(Int8Acts, Q6KExactOnIntegerProducts) {
  std::mt19937 rng(43);
  std::uniform_int_distribution<int> byte(0, 255), val(-127, 127), sc(-4, 4);
  const TensorType t = TensorType::kQ6_K;
  const int64_t k = 512;
  for (int64_t m : {1, 6, 13}) {
    const int64_t n = 5;
    std::vector<uint8_t> w(n * RowBytes(t, k));
    for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
    for (size_t o = 0; o < w.size(); o += BlockBytes(t)) {
      for (int g = 0; g < 16; ++g) w[o + 192 + g] = static_cast<uint8_t>(sc(rng));
      PutHalf(w.data() + o + 208, 1.0f);
    }
    const Int8Acts a = IntegerActs(m, k, 3, val, rng);
    ASSERT_EQ(a.d[0], 1.0f);
    const WeightMatrix wm{t, w.data(), n, k};
    EXPECT_GT(ExpectExactOnEachTarget(wm, a, m), 0);
  }
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1 (AVX-512 VNNI: four blocks per step, codes and
// scales gathered by byte permutes; AVX-512: two blocks; the tail blocks):
// with unit fp16 scales, integer mins and integer activations of block
// maximum 127, every product and partial sum is an integer below 2^24, so
// every kernel (decode M = 1, row kernels M = 4 and 2, the GEMM panels) must
// equal the oracle exactly; random bytes reach every code and 5th bit.
TEST(Int8Acts, LegacyBlocksExactOnIntegerProducts) {
  std::mt19937 rng(37);
  std::uniform_int_distribution<int> byte(0, 255), val(-127, 127), mn(-20, 20);
  for (TensorType t :
       {TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kQ5_0, TensorType::kQ5_1}) {
    const bool has_min = t == TensorType::kQ4_1 || t == TensorType::kQ5_1;
    for (int64_t k : {128, 224, 416, 1024}) {
      for (int64_t m : {1, 6, 13}) {
        const int64_t n = 5;
        std::vector<uint8_t> w(n * RowBytes(t, k));
        for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
        for (size_t o = 0; o < w.size(); o += BlockBytes(t)) {
          PutHalf(w.data() + o, 1.0f);
          if (has_min) PutHalf(w.data() + o + 2, static_cast<float>(mn(rng)));
        }
        const Int8Acts a = IntegerActs(m, k, 7, val, rng);
        ASSERT_EQ(a.d[0], 1.0f);
        const WeightMatrix wm{t, w.data(), n, k};
        EXPECT_GT(ExpectExactOnEachTarget(wm, a, m), 0);
      }
    }
  }
}

// IQ4_NL / IQ4_XS (grid through a byte shuffle; AVX-512 VNNI: unsigned codes
// grid + 128 with the offset term, four NL blocks or one XS super-block per
// step; other x86 targets: |w| and w's sign on q; the GEMM panels): unit fp16
// d, XS sub-block scales ls - 32 in [-2, 2] and integer activations of block
// maximum 127 (the rest in [-15, 15]) keep every product and partial sum an
// integer below 2^24, so every kernel must equal the oracle exactly; random
// bytes reach every grid value.
TEST(Int8Acts, Iq4ExactOnIntegerProducts) {
  std::mt19937 rng(41);
  std::uniform_int_distribution<int> byte(0, 255), val(-15, 15), ls(30, 34);
  for (TensorType t : {TensorType::kIQ4_NL, TensorType::kIQ4_XS}) {
    const bool xs = t == TensorType::kIQ4_XS;
    for (int64_t k : {128, 224, 256, 416, 1024}) {
      if (k % BlockSize(t) != 0) continue;
      for (int64_t m : {1, 6, 13}) {
        const int64_t n = 5;
        std::vector<uint8_t> w(n * RowBytes(t, k));
        for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
        for (size_t o = 0; o < w.size(); o += BlockBytes(t)) {
          PutHalf(w.data() + o, 1.0f);
          if (!xs) continue;
          uint16_t sh = 0;
          for (int i = 0; i < 8; ++i) {
            const int l = ls(rng);
            if (i % 2 == 0) w[o + 4 + i / 2] = 0;
            w[o + 4 + i / 2] |= static_cast<uint8_t>((l & 15) << (4 * (i % 2)));
            sh |= static_cast<uint16_t>((l >> 4) << (2 * i));
          }
          std::memcpy(w.data() + o + 2, &sh, 2);
        }
        const Int8Acts a = IntegerActs(m, k, 9, val, rng);
        ASSERT_EQ(a.d[0], 1.0f);
        const WeightMatrix wm{t, w.data(), n, k};
        std::vector<float> wf(k);
        DequantizeRowRef(t, wm.row(0), k, wf.data());
        ASSERT_EQ(wf[0], std::rint(wf[0]));  // integer weights
        EXPECT_GT(ExpectExactOnEachTarget(wm, a, m), 0);
      }
    }
  }
}

// The int8 product differs from the fp32-activation one by at most the
// activation rounding: sum_j |w_j| d_x / 2 per block.
// The SIMD row decoder (GEMM panels, embedding rows) is bit-identical to the
// scalar one: every fp16 pattern (subnormals, infinities; NaNs stay NaNs),
// random BF16 and Q8_0 rows, on every target.
TEST(KernelsSimd, DequantizeRowEqualsOracleOnEveryTarget) {
  std::mt19937 rng(21);
  std::vector<uint8_t> f16(2 * 65536);
  for (int i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    std::memcpy(&f16[2 * i], &h, 2);
  }
  const auto bf16 = RandomInt8Rows(TensorType::kQ8_0, 1, 4096, rng);  // any bytes: 2176 values
  const auto q8 = RandomInt8Rows(TensorType::kQ8_0, 3, 1024, rng);
  struct Row {
    TensorType t;
    const uint8_t* p;
    int64_t k;
  };
  const Row rows[] = {{TensorType::kF16, f16.data(), 65536},
                      {TensorType::kF16, f16.data() + 2, 65533},  // odd tail
                      {TensorType::kBF16, bf16.data(), 2176},
                      {TensorType::kQ8_0, q8.data(), 3072}};
  EXPECT_GT(OnEachVnniTarget([&] {
              for (const Row& r : rows) {
                std::vector<float> ref(r.k), got(r.k);
                DequantizeRowRef(r.t, r.p, r.k, ref.data());
                DequantizeRow(r.t, r.p, r.k, got.data());
                for (int64_t i = 0; i < r.k; ++i) {
                  if (std::isnan(ref[i])) {
                    ASSERT_TRUE(std::isnan(got[i])) << i;
                  } else {
                    ASSERT_EQ(std::memcmp(&ref[i], &got[i], 4), 0)
                        << TensorTypeName(r.t) << " " << i << ": " << ref[i] << " vs " << got[i];
                  }
                }
              }
            }),
            0);
}

TEST(Int8Acts, ErrorWithinQuantizationBound) {
  std::mt19937 rng(9);
  for (TensorType t : kInt8Types) {
    const int64_t k = 2048;
    const auto w = RandomInt8Rows(t, 1, k, rng);
    const auto x = ActsWithTies(k, rng);
    Int8Acts a;
    QuantizeActsRef(x.data(), 1, k, &a);
    std::vector<float> wf(k);
    DequantizeRowRef(t, w.data(), k, wf.data());
    double bound = 0, moved = 0;
    for (int64_t j = 0; j < k; ++j) {
      bound += std::abs(wf[j]) * a.d[j / 32] / 2;
      moved += std::abs(wf[j] * (x[j] - a.d[j / 32] * a.q[j]));
    }
    const double err = std::abs(DotInt8Ref(t, w.data(), a, 0) - DotRef(t, w.data(), x.data(), k));
    EXPECT_LE(err, bound * 1.0001 + 1e-6) << TensorTypeName(t);
    EXPECT_LE(moved, bound * 1.0001 + 1e-6);
    EXPECT_GT(err, 0.0);  // the path really quantizes
  }
}

TEST(Int8Acts, MatVecAndMatMulTakeThePathWhenEnabled) {
  std::mt19937 rng(3);
  for (int threads : {1, 2}) {
    SetNumThreads(threads);
    for (TensorType t : kInt8Types) {
      const int64_t n = 37, k = 2048;
      const auto wb = RandomInt8Rows(t, n, k, rng);
      const WeightMatrix w{t, wb.data(), n, k};
      for (int64_t m : {1, 5, 20}) {
        const auto x = ActsWithTies(m * k, rng);
        Int8Acts a;
        QuantizeActsRef(x.data(), m, k, &a);
        std::vector<float> y(m * n), off(m * n), ref(m * n);
        SetInt8Activations(false);
        MatMul(w, x.data(), m, off.data());
        MatMulRef(w, x.data(), m, ref.data());
        SetInt8Activations(true);
        MatMul(w, x.data(), m, y.data());
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t r = 0; r < n; ++r) {
            const double tol = 2e-6 * AbsTerms(t, w.row(r), a, i);
            ASSERT_NEAR(y[i * n + r], DotInt8Ref(t, w.row(r), a, i), tol) << "m=" << m;
            ASSERT_NEAR(off[i * n + r], ref[i * n + r],
                        1e-5 * AbsDotF32(t, w.row(r), &x[i * k], k));
          }
        }
        EXPECT_NE(y, off);
      }
    }
  }
  SetNumThreads(1);
}

}  // namespace
}  // namespace hqekv::kernels
