// The bf16-activation GEMM (gemm_bf16_avx512.cc, vdpbf16ps) against its scalar
// oracle GemmBf16Ref (same bf16 rounding of the activations, same fp32
// summation order), on every x86 target this CPU runs (only AVX3_DL on an
// AVX512_BF16 CPU has the kernel; the others must report it unavailable and
// MatMul must keep the fp32-panel path there); its routing from MatMul; and
// the model-level effect (tests/kernels/kernels_int8_test.cc has the KL).
//
// Exactness: the oracle sums each pair as the instruction's definition does
// (odd product, then even, each sum rounded to fp32). Measured on Zen 5:
// bit-identical on every shape below (the test asserts ==), i.e. this CPU's
// vdpbf16ps rounds like the two sequential fp32 additions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/parallel.h"
#include "kernels/gemm_panel.h"
#include "kernels/kernels.h"
#include "../simd_targets.h"
#include "kernel_test_util.h"

namespace hqekv::kernels {
namespace {

using namespace test_util;

// Switches the reduced-precision activation paths off for a scope.
struct Fp32Activations {
  Fp32Activations() { SetInt8Activations(false); }
  ~Fp32Activations() { SetInt8Activations(true); }
};

// Keeps MatMul on the vdpbf16ps kernel (GemmBf16Ref's bits) on AMX CPUs for a scope.
struct NoAmx {
  NoAmx() { SetBf16Amx(false); }
  ~NoAmx() { SetBf16Amx(true); }
};

TEST(Bf16Round, NearestEvenAndSpecialValues) {
  auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return F32ToBF16(f);
  };
  EXPECT_EQ(bits(0x3F800000u), 0x3F80);  // 1.0
  EXPECT_EQ(bits(0x3F807FFFu), 0x3F80);  // below half: down
  EXPECT_EQ(bits(0x3F808001u), 0x3F81);  // above half: up
  EXPECT_EQ(bits(0x3F808000u), 0x3F80);  // tie, even stays
  EXPECT_EQ(bits(0x3F818000u), 0x3F82);  // tie, odd rounds up to even
  EXPECT_EQ(bits(0xBF818000u), 0xBF82);  // sign kept
  EXPECT_EQ(bits(0x7F7FFFFFu), 0x7F80);  // max float rounds to inf
  EXPECT_EQ(bits(0x7F800000u), 0x7F80);  // inf
  EXPECT_EQ(bits(0x00008000u), 0x0000);  // subnormal tie to even (kept, not flushed)
  EXPECT_EQ(bits(0x00018000u), 0x0002);
  const uint16_t nan = bits(0x7F800001u);  // a NaN whose payload is in the low half
  EXPECT_TRUE(std::isnan(BF16BitsToF32(nan))) << nan;
  for (float v : {0.f, -2.5f, 3.140625f, 1e-3f}) {
    EXPECT_EQ(BF16BitsToF32(F32ToBF16(v)), BF16BitsToF32(F32ToBF16(BF16BitsToF32(F32ToBF16(v)))));
  }
}

TEST(Bf16Acts, PackLayoutAndOddK) {
  const int64_t m = 11, k = 7;  // two groups (8 + 3 rows), an odd last pair
  std::vector<float> x(m * k);
  for (int64_t i = 0; i < m * k; ++i) x[i] = 0.5f + static_cast<float>(i);
  Bf16Acts a;
  PackBf16Acts(x.data(), m, k, &a);
  ASSERT_EQ(a.kp, 4);
  ASSERT_EQ(a.words.size(), static_cast<size_t>(m * 4));
  for (int64_t i = 0; i < m; ++i) {
    const int64_t g0 = i / 8 * 8, rows = std::min<int64_t>(8, m - g0);
    for (int64_t c = 0; c < 4; ++c) {
      const uint32_t word = a.group(g0)[c * rows + (i - g0)];
      EXPECT_EQ(word & 0xFFFF, F32ToBF16(x[i * k + 2 * c])) << i << " " << c;
      const uint32_t hi = 2 * c + 1 < k ? F32ToBF16(x[i * k + 2 * c + 1]) : 0;
      EXPECT_EQ(word >> 16, hi) << i << " " << c;
    }
  }
}

// The oracle itself: its result is within the bf16 activation rounding
// (|x - bf16(x)| <= 2^-9 |x|) plus fp32 summation of the exact fp32 product.
TEST(Bf16Acts, OracleIsWithinActivationRoundingOfFp32) {
  std::mt19937 rng(21);
  const int64_t n = 9, k = 1500, m = 5;
  auto wb = RandomFloatRows(TensorType::kBF16, n, k, rng);
  const WeightMatrix w{TensorType::kBF16, wb.data(), n, k};
  auto x = NormalValues(m * k, rng);
  std::vector<float> got(m * n), ref(m * n);
  GemmBf16Ref(w, x.data(), m, got.data());
  MatMulRef(w, x.data(), m, ref.data());
  bool any_differs = false;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < n; ++r) {
      double abs = 0;
      for (int64_t c = 0; c < k; ++c) {
        uint16_t b;
        std::memcpy(&b, w.row(r) + 2 * c, 2);
        abs += std::fabs(double{BF16BitsToF32(b)} * x[i * k + c]);
      }
      EXPECT_NEAR(got[i * n + r], ref[i * n + r], abs * (1.0 / 512 + 1e-5)) << i << " " << r;
      any_differs = any_differs || got[i * n + r] != ref[i * n + r];
    }
  }
  EXPECT_TRUE(any_differs);
}

// MatMul (threads split by panels) and GemmBf16Range == GemmBf16Ref bit for
// bit: partial panels (n % 32 != 0), partial activation groups (m % 8 != 0),
// odd k, k tails below and above one block (kBf16Kc = 1024) and two blocks
// plus a tail, m above the 512-row activation block.
TEST(GemmBf16, EqualsOracleOnEveryTargetThatRunsIt) {
  const NoAmx vdpbf16ps;
  std::mt19937 rng(22);
  int with_kernel = 0;
  const int ran = OnEachVnniTarget([&] {
    if (!GemmBf16Available()) return;
    ++with_kernel;
    for (int threads : {1, 2}) {
      SetNumThreads(threads);
      for (auto [n, k] : {std::pair<int64_t, int64_t>{7, 37},
                          {33, 256},
                          {70, 301},
                          {64, 32},
                          {45, 528},
                          {96, 771},
                          {21, 1100},
                          {40, 2100},
                          {35, 2049}}) {
        auto wb = RandomFloatRows(TensorType::kBF16, n, k, rng);
        const WeightMatrix w{TensorType::kBF16, wb.data(), n, k};
        for (int64_t m : {33, 41, 64, 77}) {
          auto x = NormalValues(m * k, rng);
          std::vector<float> y(m * n, NAN), ref(m * n);
          MatMul(w, x.data(), m, y.data());
          GemmBf16Ref(w, x.data(), m, ref.data());
          for (int64_t j = 0; j < m * n; ++j) {
            ASSERT_EQ(y[j], ref[j])
                << "n=" << n << " k=" << k << " m=" << m << " i=" << j / n << " r=" << j % n;
          }
        }
      }
    }
    SetNumThreads(1);
    // Fewer than 33 and more than 512 rows through the range entry point.
    for (int64_t m : {1, 3, 8, 9, 520}) {
      const int64_t n = 40, k = 129;
      auto wb = RandomFloatRows(TensorType::kBF16, n, k, rng);
      const WeightMatrix w{TensorType::kBF16, wb.data(), n, k};
      auto x = NormalValues(m * k, rng);
      Bf16Acts a;
      PackBf16Acts(x.data(), m, k, &a);
      std::vector<float> y(m * n, NAN), ref(m * n);
      GemmBf16Range(w, a, 0, n, y.data(), n);
      GemmBf16Ref(w, x.data(), m, ref.data());
      for (int64_t j = 0; j < m * n; ++j) ASSERT_EQ(y[j], ref[j]) << "m=" << m << " j=" << j;
    }
  });
  EXPECT_GE(ran, 1);
  if (with_kernel == 0) GTEST_SKIP() << "no AVX512_BF16 on this CPU / build";
}

// A row range that starts inside a panel and ends before the matrix does,
// written into a wider output (ldy > n): only its columns are touched.
TEST(GemmBf16, RangeWritesOnlyItsColumns) {
  std::mt19937 rng(23);
  int with_kernel = 0;
  OnEachVnniTarget([&] {
    if (!GemmBf16Available()) return;
    ++with_kernel;
    const int64_t n = 80, k = 291, m = 45, ldy = 100, r0 = 5, r1 = 61;
    auto wb = RandomFloatRows(TensorType::kBF16, n, k, rng);
    const WeightMatrix w{TensorType::kBF16, wb.data(), n, k};
    auto x = NormalValues(m * k, rng);
    Bf16Acts a;
    PackBf16Acts(x.data(), m, k, &a);
    std::vector<float> y(m * ldy, -7.f), ref(m * n);
    GemmBf16Range(w, a, r0, r1, y.data(), ldy);
    GemmBf16Ref(w, x.data(), m, ref.data());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t r = 0; r < ldy; ++r) {
        if (r < r0 || r >= r1) {
          ASSERT_EQ(y[i * ldy + r], -7.f) << "i=" << i << " r=" << r;
        } else {
          ASSERT_EQ(y[i * ldy + r], ref[i * n + r]) << "i=" << i << " r=" << r;
        }
      }
    }
  });
  if (with_kernel == 0) GTEST_SKIP() << "no AVX512_BF16 on this CPU / build";
}

// Routing: with the kernel, MatMul of BF16 weights (m > 32) is the bf16 path
// (== GemmBf16Ref), and with SetInt8Activations(false) the fp32-panel path
// (within the fp32 contract of MatMulRef, and not the bf16 result); targets
// without it always take the fp32 path.
TEST(GemmBf16, MatMulRoutingFollowsTheActivationSwitch) {
  const NoAmx vdpbf16ps;
  std::mt19937 rng(24);
  const int64_t n = 64, k = 512, m = 48;
  auto wb = RandomFloatRows(TensorType::kBF16, n, k, rng);
  const WeightMatrix w{TensorType::kBF16, wb.data(), n, k};
  auto x = NormalValues(m * k, rng);
  std::vector<float> bf16_ref(m * n), fp32_ref(m * n);
  GemmBf16Ref(w, x.data(), m, bf16_ref.data());
  MatMulRef(w, x.data(), m, fp32_ref.data());
  const int ran = OnEachVnniTarget([&] {
    const bool kernel = GemmBf16Available();
    for (int on = 0; on < 2; ++on) {
      std::vector<float> y(m * n);
      {
        const Fp32Activations fp32;
        if (on == 1) SetInt8Activations(true);
        MatMul(w, x.data(), m, y.data());
      }
      if (on == 1 && kernel) {
        EXPECT_EQ(y, bf16_ref);
      } else {
        int differs = 0;
        for (int64_t j = 0; j < m * n; ++j) {
          ASSERT_NEAR(y[j], fp32_ref[j], 1e-3) << j;  // bf16 acts: ~3e-2 off
          differs += y[j] != bf16_ref[j];
        }
        EXPECT_GT(differs, m * n / 2);
      }
    }
  });
  EXPECT_GE(ran, 1);
}

// The AVX512_BF16 kernel really runs in this build on a CPU that has the
// instructions (GCC x86 builds compile it; skipped elsewhere).
TEST(GemmBf16, KernelRunsOnAvx512Bf16Cpus) {
  const NoAmx vdpbf16ps;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "CPU without AVX512_BF16";
  ASSERT_TRUE(GemmBf16Available());
  // The default dispatch takes it: MatMul's result is the bf16 oracle's, bit for bit.
  std::mt19937 rng(25);
  const int64_t n = 48, k = 300, m = 40;
  auto wb = RandomFloatRows(TensorType::kBF16, n, k, rng);
  const WeightMatrix w{TensorType::kBF16, wb.data(), n, k};
  auto x = NormalValues(m * k, rng);
  std::vector<float> y(m * n), ref(m * n);
  MatMul(w, x.data(), m, y.data());
  GemmBf16Ref(w, x.data(), m, ref.data());
  EXPECT_EQ(y, ref);
#else
  GTEST_SKIP() << "the kernel is compiled by GCC x86 builds only";
#endif
}

// ---- AMX tiles (gemm_panel.h "AMX tiles") ----

// The tile-major activation layout, on any CPU (the packing is scalar).
TEST(Bf16AmxActs, TileMajorLayoutWithZeroPads) {
  std::mt19937 rng(26);
  for (auto [m, k] : {std::pair<int64_t, int64_t>{1, 3}, {33, 37}, {64, 64}, {45, 2049}}) {
    auto x = NormalValues(m * k, rng);
    Bf16Acts a;
    a.words.assign(4096, 0xDEADBEEFu);  // stale words from an earlier call
    ResizeBf16TileMajor(m, k, &a);
    ASSERT_TRUE(a.tile_major);
    const int64_t kp = (k + 1) / 2, ld = (kp + 15) / 16 * 16, rows = (m + 31) / 32 * 32;
    ASSERT_EQ(a.ld, ld);
    ASSERT_EQ(static_cast<int64_t>(a.words.size()), rows * ld);
    PackBf16TileMajor(x.data(), 0, m / 2, &a);  // in two parts, as MatMul's threads do
    PackBf16TileMajor(x.data(), m / 2, m, &a);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t c = 0; c < ld; ++c) {
        const uint32_t word = a.words[(i / 32) * 32 * ld + (c / 16) * 512 + (i % 32) * 16 + c % 16];
        uint32_t want = 0;
        if (i < m && 2 * c < k) {
          want = F32ToBF16(x[i * k + 2 * c]);
          if (2 * c + 1 < k) want |= static_cast<uint32_t>(F32ToBF16(x[i * k + 2 * c + 1])) << 16;
        }
        ASSERT_EQ(word, want) << "m=" << m << " k=" << k << " i=" << i << " c=" << c;
      }
    }
  }
}

// y within 2^-17 of sum |w x| of the exact sum (double) of the products of
// the weights (BF16, or F16: split into two bf16 parts on AMX) and the bf16
// activations: the tile unit's own summation order and precision (gemm_panel.h).
// One missed or doubled pair moves a sum by ~1/k of sum |w x| (5e-4 at k =
// 2100), 60x over the bound.
void ExpectNearExactBf16Sums(const WeightMatrix& w, const float* x, int64_t m, const float* y,
                             int64_t ldy, int64_t r0, int64_t r1) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = r0; r < r1; ++r) {
      double sum = 0, mag = 0;
      for (int64_t c = 0; c < w.k; ++c) {
        uint16_t b = 0;
        std::memcpy(&b, w.row(r) + 2 * c, 2);
        const float wv = w.type == TensorType::kF16 ? LoadHalf(w.row(r) + 2 * c) : BF16BitsToF32(b);
        const double p = double{wv} * BF16BitsToF32(F32ToBF16(x[i * w.k + c]));
        sum += p;
        mag += std::abs(p);
      }
      ASSERT_NEAR(y[i * ldy + r], sum, std::ldexp(mag, -17) + 1e-30)
          << "n=" << w.n << " k=" << w.k << " m=" << m << " i=" << i << " r=" << r;
    }
  }
}

TEST(GemmAmxBf16, MatMulIsTheExactSumOfTheProductsWithinTheBound) {
  if (!GemmAmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU / kernel / build";
  std::mt19937 rng(27);
  for (int threads : {1, 2}) {
    SetNumThreads(threads);
    for (auto [n, k] : {std::pair<int64_t, int64_t>{7, 37},
                        {33, 256},
                        {70, 301},
                        {45, 528},
                        {21, 1100},
                        {40, 2100},
                        {35, 8193}}) {
      for (TensorType t : {TensorType::kBF16, TensorType::kF16}) {
        auto wb = RandomFloatRows(t, n, k, rng);
        const WeightMatrix w{t, wb.data(), n, k};
        for (int64_t m : {33, 41, 64, 77}) {
          auto x = NormalValues(m * k, rng);
          std::vector<float> y(m * n, NAN);
          MatMul(w, x.data(), m, y.data());
          ExpectNearExactBf16Sums(w, x.data(), m, y.data(), n, 0, n);
          if (HasFatalFailure()) return SetNumThreads(1);
        }
      }
    }
  }
  SetNumThreads(1);
}

// A row range that starts inside a panel, into a wider output: only its
// columns are written; m past several 32-row blocks with a partial last one.
TEST(GemmAmxBf16, RangeWritesOnlyItsColumns) {
  if (!GemmAmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU / kernel / build";
  std::mt19937 rng(28);
  const int64_t n = 80, k = 291, m = 109, ldy = 100, r0 = 5, r1 = 61;
  auto wb = RandomFloatRows(TensorType::kBF16, n, k, rng);
  const WeightMatrix w{TensorType::kBF16, wb.data(), n, k};
  auto x = NormalValues(m * k, rng);
  Bf16Acts a;
  ResizeBf16TileMajor(m, k, &a);
  PackBf16TileMajor(x.data(), 0, m, &a);
  std::vector<float> y(m * ldy, -7.f);
  GemmBf16Range(w, a, r0, r1, y.data(), ldy);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < ldy; ++r) {
      if (r < r0 || r >= r1) {
        ASSERT_EQ(y[i * ldy + r], -7.f) << "i=" << i << " r=" << r;
      }
    }
  }
  ExpectNearExactBf16Sums(w, x.data(), m, y.data(), ldy, r0, r1);
}

// F16 weights on AMX: every finite fp16 value (subnormals, +-0, +-65504)
// split into two bf16 parts comes back whole: one-hot activation rows pick
// single weights, so y = w exactly.
TEST(GemmAmxBf16, F16SplitKeepsEveryFiniteValue) {
  if (!GemmAmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU / kernel / build";
  const int64_t n = 32, k = 2048;
  std::vector<uint8_t> wb(2 * n * k, 0);
  int64_t filled = 0;
  for (uint32_t h = 0; h < 65536 && filled < n * k; ++h) {
    if ((h & 0x7C00) == 0x7C00) continue;  // inf / NaN
    const uint16_t bits = static_cast<uint16_t>(h);
    std::memcpy(wb.data() + 2 * filled++, &bits, 2);
  }
  ASSERT_EQ(filled, 63488);
  const WeightMatrix w{TensorType::kF16, wb.data(), n, k};
  std::vector<float> x(k * k, 0.f), y(k * n, NAN);
  for (int64_t i = 0; i < k; ++i) x[i * k + i] = 1.f;
  MatMul(w, x.data(), k, y.data());
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t r = 0; r < n; ++r) {
      const float want = LoadHalf(w.row(r) + 2 * i);
      ASSERT_EQ(y[i * n + r], want) << "fp16 value at row " << r << " column " << i;
    }
  }
}

// Routing (m > 32) on AMX CPUs: MatMul takes the tiles by default (its result
// then is neither of the others' bits); with SetBf16Amx(false) BF16 weights
// take the vdpbf16ps kernel (GemmBf16Ref's bits) and F16 weights the fp32
// panels (fp32 activations' bits, as with SetInt8Activations(false)).
TEST(GemmAmxBf16, MatMulRoutingFollowsBothSwitches) {
  if (!GemmAmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU / kernel / build";
  std::mt19937 rng(29);
  const int64_t n = 64, k = 777, m = 48;
  for (TensorType t : {TensorType::kBF16, TensorType::kF16}) {
    auto wb = RandomFloatRows(t, n, k, rng);
    const WeightMatrix w{t, wb.data(), n, k};
    auto x = NormalValues(m * k, rng);
    std::vector<float> tiles(m * n), no_amx(m * n), want(m * n);
    MatMul(w, x.data(), m, tiles.data());
    {
      const NoAmx off;
      MatMul(w, x.data(), m, no_amx.data());
    }
    if (t == TensorType::kBF16) {
      GemmBf16Ref(w, x.data(), m, want.data());
    } else {
      const Fp32Activations acts;
      MatMul(w, x.data(), m, want.data());
    }
    EXPECT_EQ(no_amx, want) << TensorTypeName(t);
    EXPECT_NE(tiles, want) << TensorTypeName(t) << ": the tile kernel did not run";
    ExpectNearExactBf16Sums(w, x.data(), m, tiles.data(), n, 0, n);
  }
}

}  // namespace
}  // namespace hqekv::kernels
