// layer_bits= offsets from measured per-layer sensitivity (calib/layer_bits.h).
#include "calib/layer_bits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "policy/hqekv_options.h"
#include "policy/spec.h"

namespace hqekv::calib {
namespace {

LayerSensitivity Sens(std::vector<double> k, std::vector<double> v, double floor) {
  LayerSensitivity s;
  s.k = std::move(k);
  s.v = std::move(v);
  s.floor = floor;
  s.probe = "q5_1";
  return s;
}

TEST(LayerBits, RateDistortionSplitFollowsTheDamage) {
  // refmodel-4l's measurement (docs/results/frontier.md, q5_1): layer 1 far
  // above the others, then 0, 3, 2.
  const LayerSensitivity s =
      Sens({2.33e-4, 1.39e-3, 7.31e-5, 1.32e-4}, {5.94e-5, 1.19e-4, 2.81e-5, 3.62e-5}, 2.58e-5);
  const std::vector<double> full = LayerBitsFromSensitivity(s, 1.0, 8.0);
  ASSERT_EQ(full.size(), 4u);
  EXPECT_NEAR(std::accumulate(full.begin(), full.end(), 0.0), 0.0, 1e-9);
  EXPECT_GT(full[1], full[0]);
  EXPECT_GT(full[0], full[3]);
  EXPECT_GT(full[3], full[2]);
  // b_1 - b_2 = 1/2 log2(s_1 / s_2) with s = K + V damage above the floor.
  const double s1 = (1.39e-3 - 2.58e-5) + (1.19e-4 - 2.58e-5);
  const double s2 = (7.31e-5 - 2.58e-5) + (2.81e-5 - 2.58e-5);
  EXPECT_NEAR(full[1] - full[2], 0.5 * std::log2(s1 / s2), 1e-9);
  // shrink scales it; max_abs clamps it (and the mean stays 0).
  const std::vector<double> half = LayerBitsFromSensitivity(s, 0.5, 8.0);
  for (int l = 0; l < 4; ++l) EXPECT_NEAR(half[l], 0.5 * full[l], 1e-9);
  const std::vector<double> clamped = LayerBitsFromSensitivity(s, 1.0, 0.3);
  for (const double d : clamped) EXPECT_LE(std::fabs(d), 0.3 + 1e-9);
  EXPECT_NEAR(std::accumulate(clamped.begin(), clamped.end(), 0.0), 0.0, 1e-9);
  EXPECT_GT(clamped[1], clamped[2]);
}

TEST(LayerBits, EqualDamageOrNoiseGivesNoOffsets) {
  for (const auto& d :
       {LayerBitsFromSensitivity(Sens({2e-4, 2e-4, 2e-4}, {1e-4, 1e-4, 1e-4}, 1e-5), 1.0, 1.0),
        LayerBitsFromSensitivity(Sens({1e-5, 9e-6, 1e-5}, {1e-5, 1e-5, 8e-6}, 1e-5), 1.0, 1.0)}) {
    for (const double x : d) EXPECT_NEAR(x, 0.0, 1e-9);
  }
}

TEST(LayerBits, TextIsAValidLayerBitsKey) {
  const std::vector<double> d = {0.123, 0.456, -0.333, -0.246};
  const std::string text = LayerBitsText(d);
  EXPECT_EQ(text, "0.12/0.46/-0.33/-0.25");
  auto parsed = policy::ParseLayerBits(text, 4);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_NEAR(std::accumulate(parsed->begin(), parsed->end(), 0.0), 0.0, 1e-9);
  EXPECT_EQ(LayerBitsText({0.0, 0.0}), "0.00/0.00");
}

TEST(LayerBits, ProbeTrialsHoldOneStreamInTheProbe) {
  const TrialCache k1 = LayerProbeTrial(4, 1, true, "q5_1", "");
  EXPECT_NE(k1.spec.find("tiers=u8/q5_1/u2,vtiers=u8/u8/u2"), std::string::npos) << k1.spec;
  ASSERT_EQ(k1.layer_ratios.size(), 4u);
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(k1.layer_ratios[l].r2, l == 1 ? 1.0 : 0.0);
    EXPECT_EQ(k1.layer_ratios[l].r4, l == 1 ? 0.0 : 1.0);
  }
  const TrialCache v2 = LayerProbeTrial(4, 2, false, "q5_0", "m=8");
  EXPECT_NE(v2.spec.find("tiers=u8/u8/u2,vtiers=u8/q5_0/u2"), std::string::npos) << v2.spec;
  EXPECT_NE(v2.spec.find(",m=8"), std::string::npos) << v2.spec;
  const TrialCache floor = LayerProbeTrial(4, -1, true, "q5_1", "");
  EXPECT_NE(floor.spec.find("tiers=u8/u8/u2,vtiers=u8/u8/u2"), std::string::npos) << floor.spec;
  for (const auto& r : floor.layer_ratios) EXPECT_EQ(r.r4, 1.0);
  EXPECT_TRUE(policy::ParseSpec(k1.spec).ok());
}

}  // namespace
}  // namespace hqekv::calib
