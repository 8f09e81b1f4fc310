#include "eval/scoring.h"

#include <gtest/gtest.h>

#include <cmath>

#include "eval/rng.h"

namespace hqekv::eval {
namespace {

// Naive oracle: softmax by direct exponentiation in long double.
long double NaiveKl(const std::vector<float>& a, const std::vector<float>& b) {
  long double za = 0, zb = 0;
  for (float x : a) za += std::exp(static_cast<long double>(x));
  for (float x : b) zb += std::exp(static_cast<long double>(x));
  long double kl = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const long double p = std::exp(static_cast<long double>(a[i])) / za;
    const long double q = std::exp(static_cast<long double>(b[i])) / zb;
    kl += p * std::log(p / q);
  }
  return kl;
}

TEST(Scoring, Normalize) {
  EXPECT_EQ(NormalizeAnswer("  The Pass-Key: 71432!\n"), "the pass key 71432");
  EXPECT_EQ(NormalizeAnswer(""), "");
  EXPECT_EQ(NormalizeAnswer("..."), "");
}

TEST(Scoring, ExactMatchWholeWords) {
  EXPECT_TRUE(ExactMatch(" 71432. Remember", {"71432"}));
  EXPECT_TRUE(ExactMatch("71432", {"71432"}));
  EXPECT_TRUE(ExactMatch("Marmalade!", {"marmalade"}));
  EXPECT_FALSE(ExactMatch("714325", {"71432"}));
  EXPECT_FALSE(ExactMatch("7143", {"71432"}));
  EXPECT_FALSE(ExactMatch("the key is 71432", {"71432"}));  // must come first
  EXPECT_TRUE(ExactMatch("12 345", {"99999", "12 345"}));
  EXPECT_FALSE(ExactMatch("anything", {""}));
  EXPECT_FALSE(ExactMatch("", {"1"}));
}

TEST(Scoring, KlMatchesNaiveDoublePrecision) {
  Rng r(3);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 2 + static_cast<int>(r.Below(300));
    std::vector<float> a(n), b(n);
    for (int i = 0; i < n; ++i) {
      a[i] = static_cast<float>(r.Uniform() * 8 - 4);
      b[i] = a[i] + static_cast<float>((r.Uniform() - 0.5) * (trial % 5));
    }
    const double kl = KlFromLogits(a.data(), b.data(), n);
    const long double ref = NaiveKl(a, b);
    EXPECT_NEAR(kl, static_cast<double>(ref), 1e-12 + 1e-9 * static_cast<double>(ref)) << "trial " << trial;
    EXPECT_GE(kl, 0);
  }
}

TEST(Scoring, KlZeroForIdenticalAndShiftInvariant) {
  std::vector<float> a = {1, 2, 3, -1}, b = {11, 12, 13, 9};
  EXPECT_EQ(KlFromLogits(a.data(), a.data(), 4), 0.0);
  EXPECT_NEAR(KlFromLogits(a.data(), b.data(), 4), 0.0, 1e-12);
  // Large logits do not overflow (log-sum-exp).
  std::vector<float> big = {1000, 999, 0}, big2 = {999, 1000, 0};
  const double kl = KlFromLogits(big.data(), big2.data(), 3);
  EXPECT_TRUE(std::isfinite(kl));
  // Two-point closed form: p = sigmoid(1), q = sigmoid(-1).
  const double p = 1 / (1 + std::exp(-1.0)), q = 1 - p;
  EXPECT_NEAR(kl, p * std::log(p / q) + q * std::log(q / p), 1e-9);
}

TEST(Scoring, TeacherForcedStats) {
  TeacherForcedStats s;
  std::vector<float> ref = {0, 5, 0}, same = {0, 5, 0}, other = {5, 0, 0};
  s.Add(same.data(), ref.data(), 3, 1);   // correct, agrees
  s.Add(other.data(), ref.data(), 3, 1);  // wrong, disagrees
  EXPECT_EQ(s.steps, 2);
  EXPECT_DOUBLE_EQ(s.accuracy(), 0.5);
  EXPECT_DOUBLE_EQ(s.agreement(), 0.5);
  EXPECT_NEAR(s.mean_kl(), KlFromLogits(ref.data(), other.data(), 3) / 2, 1e-12);
  EXPECT_NEAR(s.ppl(), std::exp((Nll(same.data(), 3, 1) + Nll(other.data(), 3, 1)) / 2), 1e-9);
  TeacherForcedStats t;
  t.Add(same.data(), nullptr, 3, 0);
  EXPECT_EQ(t.ref_steps, 0);
  EXPECT_EQ(t.mean_kl(), 0);
  s += t;
  EXPECT_EQ(s.steps, 3);
}

}  // namespace
}  // namespace hqekv::eval
