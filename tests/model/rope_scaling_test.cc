// RoPE scaling variants (model/rope.h) against hand-computed frequencies and
// angles: linear, YaRN (ggml's rope_yarn with beta_fast 32, beta_slow 1).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/rope.h"

namespace hqekv {
namespace {

ModelConfig Config(int head_dim, RopeScaling s, float factor) {
  ModelConfig c;
  c.head_dim = head_dim;
  c.rope_theta = 10000.0f;
  c.rope_scaling = s;
  c.rope_factor = factor;
  return c;
}

// Linear, factor 4, head_dim 8: theta^(-2i/8) = 1, 0.1, 0.01, 0.001, / 4.
TEST(RopeScaling, LinearDividesEveryFrequency) {
  const std::vector<float> f = RopeInvFreq(Config(8, RopeScaling::kLinear, 4.0f));
  ASSERT_EQ(f.size(), 4u);
  const double want[] = {0.25, 0.025, 0.0025, 0.00025};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], want[i], want[i] * 1e-6) << i;
  EXPECT_EQ(RopeAttentionScale(Config(8, RopeScaling::kLinear, 4.0f)), 1.0f);
  // The angle at position 1000 of pair 1 is 1000 * 0.025 = 25 rad.
  std::vector<float> x = {1, 0, 1, 0, 1, 0, 1, 0};
  ApplyRope(RopeStyle::kNormal, f, 1000, 1, 8, x.data());
  EXPECT_NEAR(x[2], std::cos(25.0), 1e-4);
  EXPECT_NEAR(x[3], std::sin(25.0), 1e-4);
  EXPECT_NEAR(x[0], std::cos(250.0), 2e-4);  // pair 0: 1000 * 0.25
}

// YaRN, head_dim 64, theta 1e4, original context 4096, factor 4. The
// correction dims are 64 ln(4096 / (beta 2 pi)) / (2 ln 1e4): 10.47 for
// beta_fast 32 (floor 10) and 22.51 for beta_slow 1 (ceil 23). Pair i keeps
// ramp(i) = 1 - clamp((i - 10) / 13, 0, 1) of its own frequency and the rest
// divided by 4: frequency * (ramp + (1 - ramp) / 4).
TEST(RopeScaling, YarnRampsBetweenTheCorrectionDims) {
  ModelConfig c = Config(64, RopeScaling::kYarn, 4.0f);
  c.rope_orig_ctx = 4096;
  const YarnRamp r = YarnCorrectionDims(c);
  EXPECT_EQ(r.low, 10.0f);
  EXPECT_EQ(r.high, 23.0f);
  const std::vector<float> f = RopeInvFreq(c);
  ASSERT_EQ(f.size(), 32u);
  const struct {
    int i;
    double want;
  } cases[] = {{0, 1.0},                     // ramp 1: untouched
               {10, 0.05623413251903491},    // 1e4^(-20/64), ramp 1
               {11, 0.039736785900001015},   // ramp 12/13
               {16, 0.006538461538461539},   // 0.01 * (7/13 + 6/13 / 4)
               {22, 0.0005471628953965915},  // ramp 1/13
               {23, 0.000333380358040831},   // ramp 0: 1e4^(-46/64) / 4
               {31, 3.33380358040831e-05}};
  for (const auto& k : cases) EXPECT_NEAR(f[k.i], k.want, k.want * 2e-6) << k.i;
  // ggml's mscale: 1 + 0.1 ln 4, times attn_factor.
  EXPECT_NEAR(RopeAttentionScale(c), 1.138629436111989, 1e-6);
  c.rope_attn_factor = 0.5f;
  EXPECT_NEAR(RopeAttentionScale(c), 0.5 * 1.138629436111989, 1e-6);
}

TEST(RopeScaling, NoneLeavesFrequencies) {
  const std::vector<float> f = RopeInvFreq(Config(8, RopeScaling::kNone, 0.0f));
  EXPECT_FLOAT_EQ(f[1], 0.1f);
  EXPECT_EQ(RopeAttentionScale(Config(8, RopeScaling::kNone, 0.0f)), 1.0f);
}

}  // namespace
}  // namespace hqekv
