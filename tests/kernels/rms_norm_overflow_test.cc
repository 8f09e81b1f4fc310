// RMSNorm of a finite row whose fp32 sum of squares overflows (elements past
// ~1.8e19): the norm must still be x / rms(x) (unit RMS out), not zeros.
// Before, 1 / sqrt(inf) = 0 made the output all zeros with no error.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/elementwise.h"

namespace hqekv::kernels {
namespace {

TEST(RmsNormOverflow, AFiniteRowWhoseSquaresOverflowIsStillNormalised) {
  for (int d : {7, 64, 130}) {
    std::vector<float> x(d), w(d, 1.0f), out(d), ref(d);
    for (int i = 0; i < d; ++i) x[i] = (i % 2 ? 3e19f : -2e19f) * (1.0f + 0.01f * i);
    for (auto* f : {&RmsNorm, &RmsNormRef}) {
      f(x.data(), w.data(), d, 1e-5f, out.data());
      double ms = 0;
      for (int i = 0; i < d; ++i) {
        ASSERT_TRUE(std::isfinite(out[i])) << d << " " << i;
        ms += static_cast<double>(out[i]) * out[i];
      }
      EXPECT_NEAR(ms / d, 1.0, 1e-3) << "d " << d << ": the output's mean square";
      EXPECT_NEAR(out[1] / out[0], x[1] / x[0], 1e-4);
    }
  }
}

}  // namespace
}  // namespace hqekv::kernels
