#include "lm/logprob.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/splitmix64.h"

namespace hqekv::lm {
namespace {

const double kLn2 = std::log(2.0);

// Deterministic uniform numbers in [0, 1) (SplitMix64), portable across libraries.
class Uniform {
 public:
  explicit Uniform(uint64_t seed) : s_(seed) {}
  double operator()() { return static_cast<double>(SplitMix64Next(s_) >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

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

TEST(LogSoftmax, HandComputedValues) {
  const std::vector<float> two = {0, 0};
  std::vector<double> out(2);
  LogSoftmax(two.data(), 2, out.data());
  EXPECT_EQ(out[0], -kLn2);  // 0 - (0 + log 2), exactly
  EXPECT_EQ(out[1], -kLn2);
  EXPECT_EQ(LogSumExp(two.data(), 2), kLn2);

  // {1, 2, 3}: lse = 3 + log(1 + e^-1 + e^-2) = 3.4076059644443806.
  const std::vector<float> three = {1, 2, 3};
  std::vector<double> l(3);
  LogSoftmax(three.data(), 3, l.data());
  EXPECT_NEAR(l[0], -2.4076059644443806, 1e-15);
  EXPECT_NEAR(l[1], -1.4076059644443806, 1e-15);
  EXPECT_NEAR(l[2], -0.4076059644443806, 1e-15);
}

TEST(LogSoftmax, FloatIsTheDoubleResultRoundedAndWorksInPlace) {
  std::vector<float> v = {0.5f, -3.25f, 7.0f, 7.0f, -100.0f};
  std::vector<double> d(v.size());
  std::vector<float> f(v.size());
  LogSoftmax(v.data(), 5, d.data());
  LogSoftmax(v.data(), 5, f.data());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(f[i], static_cast<float>(d[i])) << i;
  LogSoftmax(v.data(), 5, v.data());  // in place
  EXPECT_EQ(v, f);
}

TEST(LogSoftmax, LargeLogitsAreStable) {
  // exp(1e4) overflows a double; the max shift keeps everything finite.
  const std::vector<float> big = {1e4f, 1e4f};
  std::vector<double> out(2);
  LogSoftmax(big.data(), 2, out.data());
  EXPECT_NEAR(out[0], -kLn2, 1e-11);  // 1e4 - (1e4 + log 2): the ulp at 1e4 is 1.8e-12
  EXPECT_EQ(out[0], out[1]);
  // One dominant logit: its log-prob is exactly 0 (exp(-2e4) underflows), the other exactly -2e4.
  const std::vector<float> apart = {1e4f, -1e4f};
  LogSoftmax(apart.data(), 2, out.data());
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], -2e4);
  // Very negative logits do not underflow to log(0).
  const std::vector<float> low = {-1e4f, -1e4f - 1};
  LogSoftmax(low.data(), 2, out.data());
  EXPECT_NEAR(out[0], -std::log1p(std::exp(-1.0)), 1e-11);
  EXPECT_TRUE(std::isfinite(out[1]));
}

TEST(Argmax, FirstOnTies) {
  const std::vector<float> f = {1, 3, 3, 2};
  EXPECT_EQ(Argmax(f.data(), 4), 1);
  const std::vector<double> d = {-std::numeric_limits<double>::infinity(), -1.0};
  EXPECT_EQ(Argmax(d.data(), 2), 1);
  const std::vector<float> one = {-5};
  EXPECT_EQ(Argmax(one.data(), 1), 0);
}

TEST(Nll, MatchesLogSoftmaxTableOfItsPrecision) {
  const std::vector<float> two = {0, 0};
  EXPECT_EQ(Nll(two.data(), 2, 1), kLn2);
  const std::vector<float> v = {0.25f, 2.5f, -1.0f, 4.0f};
  std::vector<double> d(4);
  std::vector<float> f(4);
  LogSoftmax(v.data(), 4, d.data());
  LogSoftmax(v.data(), 4, f.data());
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(Nll(v.data(), 4, t), -d[t]);
    EXPECT_EQ(Nll<float>(v.data(), 4, t), -static_cast<double>(f[t]));
  }
}

TEST(Kl, TwoPointClosedFormAndZeroForIdentical) {
  // p = (1/2, 1/2), q = (1/4, 3/4): KL = 1/2 log 2 + 1/2 log(2/3).
  const double p[2] = {std::log(0.5), std::log(0.5)}, q[2] = {std::log(0.25), std::log(0.75)};
  EXPECT_NEAR(Kl(p, q, 2), 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0), 1e-15);
  EXPECT_EQ(Kl(p, p, 2), 0.0);
  const float pf[2] = {std::log(0.5f), std::log(0.5f)};
  EXPECT_EQ(Kl(pf, pf, 2), 0.0);
}

TEST(Kl, SubsetSumIsUnclampedAndSkipsZeroMass) {
  // Over the subset {1} of q's outcomes: p_1 log(p_1 / q_1) < 0 when q_1 > p_1.
  const double logp[1] = {std::log(0.5)};
  const double logq[2] = {std::log(0.1), std::log(0.9)};
  const int32_t ids[1] = {1};
  EXPECT_NEAR(KlSum(logp, logq, 1, ids), 0.5 * std::log(0.5 / 0.9), 1e-15);
  // A zero-probability outcome contributes nothing (no 0 * inf = NaN).
  const double inf = std::numeric_limits<double>::infinity();
  const double p0[2] = {0.0, -inf}, q0[2] = {0.0, -inf};
  EXPECT_EQ(Kl(p0, q0, 2), 0.0);
}

TEST(KlFromLogits, MatchesNaiveDoublePrecision) {
  Uniform u(3);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 2 + static_cast<int>(u() * 300);
    std::vector<float> a(n), b(n);
    for (int i = 0; i < n; ++i) {
      a[i] = static_cast<float>(u() * 8 - 4);
      b[i] = a[i] + static_cast<float>((u() - 0.5) * (trial % 5));
    }
    const double kl = KlFromLogits(a.data(), b.data(), n);
    const long double ref = NaiveKl(a, b);
    EXPECT_NEAR(kl, static_cast<double>(ref), 1e-12 + 1e-9 * static_cast<double>(ref))
        << "trial " << trial;
    EXPECT_GE(kl, 0);
  }
}

TEST(KlFromLogits, ZeroForIdenticalAndShiftInvariant) {
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

}  // namespace
}  // namespace hqekv::lm
