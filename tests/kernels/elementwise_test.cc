// The SIMD element-wise steps of the forward pass (kernels/elementwise.h)
// against their scalar oracles on every SIMD target this CPU has.
#include "kernels/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "../simd_targets.h"

namespace hqekv::kernels {
namespace {

std::vector<float> Normal(size_t n, float sd, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

TEST(Elementwise, RmsNormMatchesTheOracleOnEveryTarget) {
  const int ran = test::OnEachTarget([] {
    std::mt19937 rng(11);
    for (int d : {1, 7, 8, 64, 100, 2048}) {
      const std::vector<float> x = Normal(d, 3.f, rng), w = Normal(d, 1.f, rng);
      std::vector<float> want(d), got(d), in_place = x;
      RmsNormRef(x.data(), w.data(), d, 1e-5f, want.data());
      RmsNorm(x.data(), w.data(), d, 1e-5f, got.data());
      RmsNorm(in_place.data(), w.data(), d, 1e-5f, in_place.data());
      for (int i = 0; i < d; ++i) {
        // Only the order of the sum of squares differs: a few ulp of 1/rms.
        EXPECT_NEAR(got[i], want[i], 1e-5f * std::abs(want[i]) + 1e-30f) << "d " << d << " i " << i;
        EXPECT_EQ(in_place[i], got[i]) << "d " << d << " i " << i;
      }
    }
  });
  EXPECT_GE(ran, 1);
}

TEST(Elementwise, SwiGluMatchesTheOracleOnEveryTarget) {
  const int ran = test::OnEachTarget([] {
    std::mt19937 rng(12);
    for (size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{33}, size_t{8192}}) {
      std::vector<float> g = Normal(n, 4.f, rng);
      const std::vector<float> u = Normal(n, 1.f, rng);
      if (n > 4) g[0] = 0.f, g[1] = 30.f, g[2] = -30.f, g[3] = -87.f;  // the flat tails
      std::vector<float> want = g, got = g;
      SwiGluRef(want.data(), u.data(), n);
      SwiGlu(got.data(), u.data(), n);
      for (size_t i = 0; i < n; ++i) {
        EXPECT_NEAR(got[i], want[i], 4e-6f * std::abs(want[i]) + 1e-35f) << "n " << n << " i " << i;
      }
    }
  });
  EXPECT_GE(ran, 1);
}

TEST(Elementwise, SwiGluKeepsNonFiniteInputsNonFinite) {
  // The forward pass reports a NaN/inf after each block: SwiGLU must not
  // turn one into a finite number (the clamp of exp(-g) must not hide it).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const int ran = test::OnEachTarget([&] {
    for (size_t at : {size_t{0}, size_t{5}, size_t{20}}) {
      for (float bad : {nan, inf, -inf}) {
        std::vector<float> g(24, 0.5f), u(24, 1.f);
        g[at] = bad;
        SwiGlu(g.data(), u.data(), g.size());
        EXPECT_FALSE(std::isfinite(g[at])) << "at " << at << " value " << bad;
        std::vector<float> g2(24, 0.5f), u2(24, 1.f);
        u2[at] = bad;
        SwiGlu(g2.data(), u2.data(), g2.size());
        EXPECT_FALSE(std::isfinite(g2[at])) << "u at " << at << " value " << bad;
      }
    }
  });
  EXPECT_GE(ran, 1);
}

TEST(Elementwise, AddIntoAddsEveryElement) {
  const int ran = test::OnEachTarget([] {
    for (size_t n : {size_t{1}, size_t{17}, size_t{64}, size_t{1001}}) {
      std::vector<float> x(n), y(n);
      for (size_t i = 0; i < n; ++i) x[i] = 0.5f * i, y[i] = 1.0f - i;
      AddInto(x.data(), y.data(), n);
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(x[i], 0.5f * i + (1.0f - i)) << i;
    }
  });
  EXPECT_GE(ran, 1);
}

}  // namespace
}  // namespace hqekv::kernels
