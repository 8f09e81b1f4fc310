// Weight kernels: SIMD vs the scalar reference on every weight type, and the
// block layouts on hand-built blocks.
#include "kernels/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/parallel.h"
#include "kernel_test_util.h"

namespace hqekv::kernels {
namespace {

using namespace test_util;

// Every weight type of the block table.
const std::vector<TensorType> kAll = [] {
  std::vector<TensorType> v;
  for (const auto& i : kTensorTypes) v.push_back(i.type);
  return v;
}();

// Random rows of a type: random quant bytes with finite, moderate scales.
std::vector<uint8_t> RandomRows(TensorType t, int64_t n, int64_t k, std::mt19937& rng) {
  std::vector<uint8_t> buf(n * RowBytes(t, k));
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& b : buf) b = static_cast<uint8_t>(byte(rng));
  const int64_t blocks = static_cast<int64_t>(buf.size()) / BlockBytes(t);
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t* p = buf.data() + i * BlockBytes(t);
    switch (t) {
      case TensorType::kF32: {
        const float v = nd(rng);
        std::memcpy(p, &v, 4);
        break;
      }
      case TensorType::kF16:
        PutHalf(p, nd(rng));
        break;
      case TensorType::kBF16: {
        const float v = nd(rng);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        const uint16_t hi = static_cast<uint16_t>(bits >> 16);
        std::memcpy(p, &hi, 2);
        break;
      }
      case TensorType::kQ8_0:
      case TensorType::kQ4_0:
        PutHalf(p, 0.01f + 0.02f * std::abs(nd(rng)));
        break;
      case TensorType::kQ4_K:
        PutHalf(p, 0.003f * std::abs(nd(rng)));
        PutHalf(p + 2, 0.002f * std::abs(nd(rng)));
        break;
      case TensorType::kQ6_K:
        PutHalf(p + 208, 0.001f * std::abs(nd(rng)));
        break;
      case TensorType::kQ5_0:
      case TensorType::kIQ4_NL:
      case TensorType::kIQ4_XS:
        PutHalf(p, 0.001f + 0.002f * std::abs(nd(rng)));
        break;
      case TensorType::kQ4_1:
      case TensorType::kQ5_1:
      case TensorType::kQ5_K:
        PutHalf(p, 0.003f * std::abs(nd(rng)));
        PutHalf(p + 2, 0.02f * nd(rng));
        break;
      case TensorType::kQ2_K:
        PutHalf(p + 80, 0.01f * std::abs(nd(rng)));
        PutHalf(p + 82, 0.01f * std::abs(nd(rng)));
        break;
      case TensorType::kQ3_K:
        PutHalf(p + 108, 0.002f * std::abs(nd(rng)));
        break;
    }
  }
  return buf;
}

std::vector<float> RandomVec(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// Tolerance of an fp32 dot vs a double one: relative to sum |w x|.
double AbsDot(TensorType t, const void* row, const float* x, int64_t k) {
  std::vector<float> w(k);
  DequantizeRowRef(t, row, k, w.data());
  double s = 0;
  for (int64_t i = 0; i < k; ++i) s += std::abs(double(w[i]) * x[i]);
  return s;
}

TEST(Kernels, SimdDotMatchesScalarOnEveryType) {
  std::mt19937 rng(1);
  for (TensorType t : kAll) {
    for (int64_t k : {256, 768, 2048}) {
      auto w = RandomRows(t, 1, k, rng);
      auto x = RandomVec(k, rng);
      const double ref = DotRef(t, w.data(), x.data(), k);
      const float got = Dot(t, w.data(), x.data(), k);
      EXPECT_NEAR(got, ref, 1e-5 * AbsDot(t, w.data(), x.data(), k) + 1e-6)
          << TensorTypeName(t) << " k=" << k;
    }
  }
}

TEST(Kernels, FloatTypesHandleOddLengths) {
  std::mt19937 rng(2);
  for (TensorType t : {TensorType::kF32, TensorType::kF16, TensorType::kBF16}) {
    for (int64_t k : {1, 7, 37, 100}) {
      auto w = RandomRows(t, 1, k, rng);
      auto x = RandomVec(k, rng);
      EXPECT_NEAR(Dot(t, w.data(), x.data(), k), DotRef(t, w.data(), x.data(), k),
                  1e-5 * AbsDot(t, w.data(), x.data(), k) + 1e-6)
          << TensorTypeName(t) << " k=" << k;
    }
  }
}

// The fp32-activation contract (the int8-activation path of Q8_0 / Q4_K is
// switched off here; kernels_int8_test.cc covers it).
TEST(Kernels, MatVecAndMatMulMatchReference) {
  SetInt8Activations(false);
  std::mt19937 rng(3);
  for (int threads : {1, 2}) {
    SetNumThreads(threads);
    for (TensorType t : kAll) {
      // n not a multiple of the 4-row panel; the second shape is large enough
      // (>= 2^16 multiply-adds) to run on the thread pool.
      for (auto [n, k] : {std::pair<int64_t, int64_t>{11, 512}, {37, 2048}}) {
        auto wb = RandomRows(t, n, k, rng);
        const WeightMatrix w{t, wb.data(), n, k};
        for (int64_t m : {1, 2, 5, 9}) {
          auto x = RandomVec(m * k, rng);
          std::vector<float> y(m * n), ref(m * n);
          MatMul(w, x.data(), m, y.data());
          MatMulRef(w, x.data(), m, ref.data());
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t r = 0; r < n; ++r) {
              const double tol = 1e-5 * AbsDot(t, w.row(r), x.data() + i * k, k) + 1e-6;
              ASSERT_NEAR(y[i * n + r], ref[i * n + r], tol)
                  << TensorTypeName(t) << " m=" << m << " r=" << r;
            }
          }
        }
      }
    }
  }
  SetNumThreads(1);
  SetInt8Activations(true);
}

TEST(Kernels, MatVecManyEqualsSeparateProducts) {
  std::mt19937 rng(4);
  SetNumThreads(2);
  const int64_t k = 1024;
  // Mixed types and sizes; big enough in total to use the pool.
  auto a = RandomRows(TensorType::kQ8_0, 45, k, rng), b = RandomRows(TensorType::kF16, 7, k, rng),
       c = RandomRows(TensorType::kQ4_K, 80, k, rng);
  const WeightMatrix wa{TensorType::kQ8_0, a.data(), 45, k}, wb{TensorType::kF16, b.data(), 7, k},
      wc{TensorType::kQ4_K, c.data(), 80, k};
  auto x = RandomVec(k, rng);
  std::vector<float> ya(45), yb(7), yc(80), ra(45), rb(7), rc(80);
  const WeightMatrix* ws[3] = {&wa, &wb, &wc};
  float* ys[3] = {ya.data(), yb.data(), yc.data()};
  MatVecMany(ws, ys, 3, x.data());
  MatVec(wa, x.data(), ra.data());
  MatVec(wb, x.data(), rb.data());
  MatVec(wc, x.data(), rc.data());
  EXPECT_EQ(ya, ra);  // same kernel per row: bit-identical
  EXPECT_EQ(yb, rb);
  EXPECT_EQ(yc, rc);
  SetNumThreads(1);
}

TEST(Kernels, Q8_0AndQ4_0BlockLayout) {
  uint8_t q8[34];
  PutHalf(q8, 0.5f);
  for (int j = 0; j < 32; ++j) q8[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  float out[32];
  DequantizeRowRef(TensorType::kQ8_0, q8, 32, out);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * (j - 16));

  uint8_t q4[18];
  PutHalf(q4, 2.0f);
  for (int j = 0; j < 16; ++j) q4[2 + j] = static_cast<uint8_t>((j & 15) | ((15 - j) << 4));
  DequantizeRowRef(TensorType::kQ4_0, q4, 32, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 2.0f * (j - 8));            // low nibbles: elements 0..15
    EXPECT_EQ(out[16 + j], 2.0f * (15 - j - 8));  // high nibbles: elements 16..31
  }
}

TEST(Kernels, Q4_KBlockLayout) {
  uint8_t b[144] = {};
  PutHalf(b, 1.0f);      // d
  PutHalf(b + 2, 0.5f);  // dmin
  // Sub-block 1: scale 3, min 2 (bytes 1 and 5); sub-block 5: scale 0b100101
  // = 37 (low 4 bits 5 in byte 9's low nibble, high 2 bits 0b10 in byte 1's
  // top bits), min 0b010011 = 19 (low 4 bits 3 in byte 9's high nibble, high
  // bits 0b01 in byte 5's top bits).
  b[4 + 1] = 3 | (2 << 6);
  b[4 + 5] = 2 | (1 << 6);
  b[4 + 9] = 5 | (3 << 4);
  b[16 + 0] = 0x70;       // qs[0]: high nibble 7 -> element 32 (sub-block 1)
  b[16 + 64 + 3] = 0x90;  // qs[67]: group 2, l = 3, high nibble 9 -> element 128+32+3 (sub-block 5)
  float out[256];
  DequantizeRowRef(TensorType::kQ4_K, b, 256, out);
  EXPECT_EQ(out[32], 3.0f * 7 - 0.5f * 2);
  EXPECT_EQ(out[33], -0.5f * 2);
  EXPECT_EQ(out[128 + 32 + 3], 37.0f * 9 - 0.5f * 19);
  EXPECT_EQ(out[0], 0.0f);  // sub-block 0: scale 0, min 0
}

TEST(Kernels, Q6_KBlockLayout) {
  uint8_t b[210] = {};
  PutHalf(b + 208, 0.25f);
  for (int i = 0; i < 16; ++i) b[192 + i] = static_cast<uint8_t>(i + 1);  // scales 1..16
  // Element 128 + 64 + 17 (second half, q3 of l = 17): low 4 bits from the
  // high nibble of ql[64 + 17], high 2 bits from bits 4..5 of qh[32 + 17];
  // scale index 8 + 17/16 + 4 = 13 -> scale 14.
  b[64 + 17] = 0xA0;          // low bits 10
  b[128 + 32 + 17] = 2 << 4;  // high bits 2 -> q = 42 - 32 = 10
  float out[256];
  DequantizeRowRef(TensorType::kQ6_K, b, 256, out);
  EXPECT_EQ(out[128 + 64 + 17], 0.25f * 14 * 10);
  EXPECT_EQ(out[0], 0.25f * 1 * -32);  // all-zero bits: q = -32, scale 1
}

TEST(Kernels, RowLengthChecks) {
  EXPECT_TRUE(CheckRowLength(TensorType::kQ4_K, 512, "w").ok());
  EXPECT_FALSE(CheckRowLength(TensorType::kQ4_K, 288, "w").ok());
  EXPECT_FALSE(CheckRowLength(TensorType::kQ8_0, 0, "w").ok());
  EXPECT_EQ(RowBytes(TensorType::kQ6_K, 512), 420);
  EXPECT_EQ(RowBytes(TensorType::kQ8_0, 64), 68);
}

}  // namespace
}  // namespace hqekv::kernels
