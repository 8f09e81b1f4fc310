// Degenerate groups (constant, zero) and non-finite input, for every format,
// through the dispatched API and the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "quant_test_util.h"

namespace hqekv::quant {
namespace {

std::vector<Format> FormatsAndRotations() {
  std::vector<Format> fs = testing::AllFormats();
  for (const char* n : {"u4:tok:had", "n1:chan:had", "int8:had"}) fs.push_back(*ParseFormat(n));
  return fs;
}

TEST(QuantDegenerate, ConstantAndZeroGroupsReconstructExactly) {
  for (bool reference : {true, false}) {
    for (const Format& f : FormatsAndRotations()) {
      for (float c : {0.0f, 1.0f, -3.14159f, 1e-3f, 2000.5f}) {
        for (int T : {1, 7, 32}) {
          const int D = 64;
          const std::vector<float> x(static_cast<size_t>(T) * D, c);
          const std::vector<float> y =
              testing::Decode(f, testing::Encode(f, x, T, D, reference), T, D, reference);
          // Up to fp16 rounding of the constant (a rotation spreads it first,
          // whose float error the quantizer then sees).
          float tol = f.hadamard ? std::fabs(c) * 0.02f : std::fabs(c) * 0x1p-10f;
          // Beyond that, the kind's own precision (quant_test_util.h): e.g.
          // fp8 maps c to c / s16, which need not be an fp8 value when s16
          // was rounded.
          const testing::SymmetricBounds b = testing::SymmetricBoundsOf(f, T, D);
          tol += b.const_rel * std::fabs(c) + b.const_abs;
          for (float v : y) {
            ASSERT_TRUE(std::isfinite(v)) << FormatName(f);
            ASSERT_NEAR(v, c, tol) << FormatName(f) << " c=" << c << " T=" << T;
          }
          if (c == 0.0f && !f.hadamard) {
            for (float v : y) ASSERT_EQ(v, 0.0f) << FormatName(f);
          }
        }
      }
    }
  }
}

TEST(QuantDegenerate, NonFiniteInputNeverYieldsNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (bool reference : {true, false}) {
    for (const Format& f : FormatsAndRotations()) {
      if (f.kind == Kind::kF32) continue;  // the oracle kind stores its input bit-exactly
      const int T = 32, D = 64;
      std::vector<float> x = testing::Gaussian(T, D, 8);
      x[0] = nan;
      x[5] = inf;
      x[70] = -inf;
      x[200] = 1e30f;
      x[300] = -1e38f;
      const std::vector<float> y =
          testing::Decode(f, testing::Encode(f, x, T, D, reference), T, D, reference);
      for (float v : y) {
        ASSERT_TRUE(std::isfinite(v)) << FormatName(f);
        ASSERT_LE(std::fabs(v), 65504.0f * 1.01f) << FormatName(f);
      }
      if (f.kind == Kind::kF16 && !f.hadamard) {
        EXPECT_EQ(y[0], 0.0f);      // NaN -> 0
        EXPECT_EQ(y[5], 65504.0f);  // +inf -> largest finite fp16
        EXPECT_EQ(y[70], -65504.0f);
        EXPECT_EQ(y[200], 65504.0f);  // beyond the fp16 range: clamped
      }
    }
    // An all-NaN chunk quantizes like zeros.
    for (const Format& f : testing::AllFormats()) {
      if (f.kind == Kind::kF32) continue;
      const int T = 8, D = 32;
      const std::vector<float> x(T * D, nan);
      const std::vector<float> y =
          testing::Decode(f, testing::Encode(f, x, T, D, reference), T, D, reference);
      for (float v : y) ASSERT_EQ(v, 0.0f) << FormatName(f);
    }
  }
}

TEST(QuantDegenerate, TinyNonzeroGroupsKeepTheirShape) {
  // Values whose scale underflows fp16: the scale becomes the smallest
  // subnormal instead of 0, so the group does not collapse to a constant.
  const int T = 32, D = 32;
  std::vector<float> x(static_cast<size_t>(T) * D);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 ? 1.0f : -1.0f) * 3e-7f;
  for (const Format& f : {Int8PerToken(), Uniform(4, Grouping::kPerToken), Fp8E4M3()}) {
    const std::vector<float> y =
        testing::Decode(f, testing::Encode(f, x, T, D, false), T, D, false);
    EXPECT_GT(y[1], y[0]) << FormatName(f);
  }
}

}  // namespace
}  // namespace hqekv::quant
