// Fused Q2_K / Q3_K / IQ4_NL / IQ4_XS dots (kernels/kernels_lowbit.h) equal the
// scalar oracle DotRef on every SIMD target compiled here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/kernels.h"
#include "kernels/kernels_lowbit.h"
#include "../simd_targets.h"
#include "kernel_test_util.h"

namespace hqekv::kernels {
namespace {

using namespace test_util;

// Random blocks: every code byte random (so every scale, min, high bit and
// grid entry occurs), the fp16 scales finite and moderate.
std::vector<uint8_t> RandomRow(TensorType t, int64_t k, std::mt19937& rng) {
  std::vector<uint8_t> row(RowBytes(t, k));
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
  for (size_t off = 0; off < row.size(); off += BlockBytes(t)) {
    uint8_t* p = row.data() + off;
    if (t == TensorType::kQ2_K) {
      PutHalf(p + 80, 0.01f * std::abs(nd(rng)));
      PutHalf(p + 82, 0.01f * std::abs(nd(rng)));
    } else if (t == TensorType::kQ3_K) {
      PutHalf(p + 108, 0.002f * std::abs(nd(rng)));
    } else {
      PutHalf(p, 0.001f + 0.002f * std::abs(nd(rng)));
    }
  }
  return row;
}

using hqekv::test::OnEachTarget;

TEST(LowBitKernels, FusedDotEqualsOracleOnEveryTarget) {
  const TensorType types[] = {TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kIQ4_NL,
                              TensorType::kIQ4_XS};
  const int ran = OnEachTarget([&] {
    std::mt19937 rng(7);
    for (TensorType t : types) {
      ASSERT_TRUE(IsLowBitType(t));
      for (int64_t k : {256, 512, 4096}) {
        const std::vector<uint8_t> w = RandomRow(t, k, rng);
        std::vector<float> x(k), wf(k);
        std::normal_distribution<float> nd(0.f, 1.f);
        for (float& v : x) v = nd(rng);
        DequantizeRowRef(t, w.data(), k, wf.data());
        double mag = 0;
        for (int64_t i = 0; i < k; ++i) mag += std::abs(double(wf[i]) * x[i]);
        const double ref = DotRef(t, w.data(), x.data(), k);
        EXPECT_NEAR(DotLowBit(t, w.data(), x.data(), k), ref, 1e-5 * mag + 1e-6)
            << TensorTypeName(t) << " k=" << k;
        EXPECT_NEAR(Dot(t, w.data(), x.data(), k), ref, 1e-5 * mag + 1e-6)  // through DotAny
            << TensorTypeName(t) << " k=" << k;
      }
    }
  });
  if (ran == 0) GTEST_SKIP() << "no x86 SIMD target on this CPU";
  EXPECT_FALSE(IsLowBitType(TensorType::kQ4_K));
}

}  // namespace
}  // namespace hqekv::kernels
