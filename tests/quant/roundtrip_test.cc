// Round trip within the documented error bounds, for every format and
// grouping, through both the scalar reference and the dispatched API.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "quant_test_util.h"

namespace hqekv::quant {
namespace {
using testing::Decode;
using testing::Encode;
using testing::Gaussian;
using testing::Group16;

// Element index (row-major [T][D]) of member i of group g.
size_t Member(const Format& f, int T, int D, int g, int i) {
  if (f.grouping == Grouping::kPerChannel) return static_cast<size_t>(i) * D + g;
  const int gpt = D / f.group;
  return static_cast<size_t>(g / gpt) * D + static_cast<size_t>(g % gpt) * f.group + i;
}
int GroupSize(const Format& f, int T) { return f.grouping == Grouping::kPerChannel ? T : f.group; }

void CheckUniform(const Format& f, const std::vector<float>& x, const testing::Encoded& e,
                  const std::vector<float>& y, int T, int D) {
  const int groups = NumGroups(f, T, D);
  const float levels = static_cast<float>((1 << f.bits) - 1);
  for (int g = 0; g < groups; ++g) {
    const float s = Group16(e.meta.data(), 0, groups, g);
    const float m = Group16(e.meta.data(), 1, groups, g);
    float mn = INFINITY, mx = -INFINITY;
    for (int i = 0; i < GroupSize(f, T); ++i) {
      mn = std::min(mn, x[Member(f, T, D, g, i)]);
      mx = std::max(mx, x[Member(f, T, D, g, i)]);
    }
    // Metadata: the fp16 roundings of the min and of (max - min16) / (2^b - 1).
    EXPECT_LE(std::fabs(m - mn), std::fabs(mn) * 0x1p-11f + 0x1p-25f);
    const float s_exact = std::max(0.0f, (mx - m) / levels);
    EXPECT_LE(std::fabs(s - s_exact), s_exact * 0x1p-11f + 0x1p-24f)
        << FormatName(f) << " T=" << T << " D=" << D << " s=" << s << " m=" << m << " mn=" << mn
        << " mx=" << mx;
    // |x - x^| <= s/2 plus what the fp16 rounding of min and scale moved the grid.
    const float slack = std::max({0.0f, m - mn, mx - (m + levels * s)});
    for (int i = 0; i < GroupSize(f, T); ++i) {
      const size_t k = Member(f, T, D, g, i);
      ASSERT_LE(std::fabs(x[k] - y[k]), s / 2 + slack + 1e-6f * (std::fabs(x[k]) + 1.0f))
          << FormatName(f) << " T=" << T << " D=" << D << " g=" << g << " i=" << i;
    }
  }
}

void CheckNormal(const Format& f, const std::vector<float>& x, const testing::Encoded& e,
                 const std::vector<float>& y, int T, int D) {
  const int groups = NumGroups(f, T, D);
  const int n = GroupSize(f, T);
  for (int g = 0; g < groups; ++g) {
    const float sd = Group16(e.meta.data(), 0, groups, g);
    const float mu = Group16(e.meta.data(), 1, groups, g);
    double sum = 0, ss = 0;
    for (int i = 0; i < n; ++i) sum += x[Member(f, T, D, g, i)];
    const double mean = sum / n;
    for (int i = 0; i < n; ++i) ss += std::pow(x[Member(f, T, D, g, i)] - mean, 2);
    const double sd_exact = n > 1 ? std::sqrt(ss / (n - 1)) : 0.0;  // unbiased
    EXPECT_NEAR(mu, mean, std::fabs(mean) * 0x1p-10 + 1e-5);
    EXPECT_NEAR(sd, sd_exact, sd_exact * 0x1p-10 + 1e-5);
    const float* c = NormalCentres(f.bits);
    const float* u = NormalThresholds(f.bits);
    for (int i = 0; i < n; ++i) {
      const size_t k = Member(f, T, D, g, i);
      int code = 0;
      for (int j = 0; j < (1 << f.bits) - 1; ++j) code += x[k] > NormalThreshold(mu, sd, u[j]);
      ASSERT_NEAR(y[k], mu + sd * c[code], 1e-5f * (std::fabs(mu) + sd + 1.0f))
          << FormatName(f) << " T=" << T << " D=" << D << " g=" << g << " i=" << i;
    }
  }
}

// The kinds with one symmetric scale per run of values: bounds from
// quant_test_util.h (SymmetricBoundsOf), checked against the stored scale.
void CheckSymmetric(const Format& f, const std::vector<float>& x, const testing::Encoded& e,
                    const std::vector<float>& y, int T, int D) {
  const testing::SymmetricBounds b = testing::SymmetricBoundsOf(f, T, D);
  ASSERT_GT(b.run, 0u) << "no bounds for " << FormatName(f) << " in quant_test_util.h";
  for (size_t k = 0; k < x.size(); ++k) {
    const float s = std::fabs(F16ToF32(LoadF16(e.meta.data() + 2 * (k / b.run))));
    const float bound = b.x_rel * std::fabs(x[k]) + b.s_rel * s;
    ASSERT_LE(std::fabs(x[k] - y[k]), bound + 1e-6f)
        << FormatName(f) << " t=" << k / D << " d=" << k % D;
  }
}

void CheckRoundTrip(const Format& f, int T, int D, bool reference, float scale, uint32_t seed) {
  const std::vector<float> x = Gaussian(T, D, seed, scale);
  const testing::Encoded e = Encode(f, x, T, D, reference);
  EXPECT_EQ(e.codes.back(), 0xA5) << "wrote past CodeBytes: " << FormatName(f);
  EXPECT_EQ(e.meta.back(), 0xA5) << "wrote past MetaBytes: " << FormatName(f);
  const std::vector<float> y = Decode(f, e, T, D, reference);
  for (float v : y) ASSERT_TRUE(std::isfinite(v));
  switch (f.kind) {
    case Kind::kF32:
      EXPECT_EQ(x, y);
      break;
    case Kind::kF16:
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_LE(std::fabs(x[i] - y[i]), std::fabs(x[i]) * 0x1p-11f + 0x1p-25f);
      }
      break;
    case Kind::kUniform:
    case Kind::kUniform3:
      CheckUniform(f, x, e, y, T, D);
      break;
    case Kind::kNormal:
      CheckNormal(f, x, e, y, T, D);
      break;
    default:
      CheckSymmetric(f, x, e, y, T, D);
  }
}

TEST(QuantRoundTrip, EveryFormatGroupingAndShapeWithinBounds) {
  uint32_t seed = 1;
  for (bool reference : {true, false}) {
    for (const Format& f : testing::AllFormats()) {
      for (int T : {1, 7, 32}) {
        for (int D : {8, 64, 128}) {
          if (!testing::TakesD(f, D)) continue;
          ASSERT_TRUE(Validate(f, T, D).ok()) << FormatName(f);
          for (float scale : {1.0f, 1e-3f, 300.0f})
            CheckRoundTrip(f, T, D, reference, scale, ++seed);
        }
      }
    }
  }
}

TEST(QuantRoundTrip, DefaultGroupOf32) {
  for (bool reference : {true, false}) {
    CheckRoundTrip(Uniform(4, Grouping::kPerToken), 32, 128, reference, 1.0f, 7);
    CheckRoundTrip(Uniform(2, Grouping::kPerToken), 7, 64, reference, 1.0f, 8);
    CheckRoundTrip(Normal(1, Grouping::kPerToken), 32, 128, reference, 1.0f, 9);
  }
}

TEST(QuantRoundTrip, HadamardIsUndoneOnDequantize) {
  for (const char* name : {"f16:had", "u4:tok:had", "u4:chan:had", "int8:had", "fp8e4m3:had"}) {
    Format f = *ParseFormat(name);
    const std::vector<float> x = Gaussian(32, 128, 3);
    for (bool reference : {true, false}) {
      const std::vector<float> y = Decode(f, Encode(f, x, 32, 128, reference), 32, 128, reference);
      double err = 0, norm = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        err += std::pow(x[i] - y[i], 2);
        norm += std::pow(x[i], 2);
      }
      EXPECT_LT(err / norm, 0.02) << name;  // small relative error: rotation really undone
    }
  }
}

TEST(QuantRoundTrip, HadamardRotationIsAnInvolution) {
  std::vector<float> x = Gaussian(1, 64, 5);
  const std::vector<float> x0 = x;
  HadamardRotate(x.data(), 64);
  double n0 = 0, n1 = 0;
  for (int i = 0; i < 64; ++i) {
    n0 += x0[i] * x0[i];
    n1 += x[i] * x[i];
  }
  EXPECT_NEAR(n0, n1, 1e-4 * n0);  // orthonormal
  EXPECT_NE(x, x0);
  HadamardRotate(x.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(x[i], x0[i], 1e-5f);
  std::vector<float> e(4, 0.0f);
  e[0] = 1.0f;
  HadamardRotate(e.data(), 4);
  for (float v : e) EXPECT_FLOAT_EQ(v, 0.5f);
}

}  // namespace
}  // namespace hqekv::quant
