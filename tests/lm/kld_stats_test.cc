// lm/kld_stats.h against naive formulas written out here (one-pass sums as
// llama-perplexity states them, percentiles by explicit floor/ceil), on
// hand-computed values and on seeded random data.
#include "lm/kld_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace hqekv::lm {
namespace {

struct Naive {
  double mean, se;
};

// Mean and sqrt((E[x^2] - E[x]^2) / (n - 1)).
Naive NaiveMeanSe(const std::vector<double>& v) {
  double s = 0, s2 = 0;
  for (double x : v) {
    s += x;
    s2 += x * x;
  }
  const double n = static_cast<double>(v.size()), m = s / n;
  return {m, std::sqrt((s2 / n - m * m) / (n - 1))};
}

double NaivePercentile(std::vector<double> v, double f) {
  std::sort(v.begin(), v.end());
  const double r = f * (v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(r)), hi = static_cast<size_t>(std::ceil(r));
  return v[lo] + (r - std::floor(r)) * (v[hi] - v[lo]);
}

TEST(KldStats, HandComputedValues) {
  const std::vector<double> v = {1, 2, 3, 4};
  const MeanSe m = MeanAndStandardError(v);
  EXPECT_DOUBLE_EQ(m.mean, 2.5);
  // Sample variance 5/3, se = sqrt(5/3 / 4).
  EXPECT_NEAR(m.se, std::sqrt(5.0 / 12.0), 1e-15);
  std::vector<double> sorted = v;
  EXPECT_DOUBLE_EQ(Percentile(sorted, 0.9), 3.7);  // rank 2.7: 3 + 0.7
  EXPECT_DOUBLE_EQ(Percentile(sorted, 0.5), 2.5);  // the median of an even count
  EXPECT_DOUBLE_EQ(Percentile(sorted, 0.0), 1);
  EXPECT_DOUBLE_EQ(Percentile(sorted, 1.0), 4);
  EXPECT_EQ(MeanAndStandardError({7}).se, 0);
  EXPECT_EQ(MeanAndStandardError({}).mean, 0);
}

TEST(KldStats, SummaryMatchesNaiveFormulasOnRandomData) {
  std::mt19937_64 rng(17);
  std::normal_distribution<double> nd(0, 1);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<PositionScore> pos(1000);
  std::vector<double> nt, nb, kl, pd, top;
  for (PositionScore& p : pos) {
    p.nll_base = std::abs(nd(rng)) * 2;
    p.nll_test = p.nll_base + 0.1 + 0.3 * nd(rng);  // correlated with the base
    p.kld = std::exp(nd(rng) - 3);
    p.p_diff = std::exp(-p.nll_test) - std::exp(-p.nll_base);
    p.same_top = u(rng) < 0.8;
    nt.push_back(p.nll_test);
    nb.push_back(p.nll_base);
    kl.push_back(p.kld);
    pd.push_back(p.p_diff);
    top.push_back(p.same_top);
  }
  const KldSummary s = Summarize(pos);
  const double n = 1000;
  EXPECT_EQ(s.n, 1000);
  const Naive a = NaiveMeanSe(nt), b = NaiveMeanSe(nb);
  EXPECT_NEAR(s.ppl_test.mean, std::exp(a.mean), 1e-12);
  EXPECT_NEAR(s.ppl_test.se, std::exp(a.mean) * a.se, 1e-12);
  EXPECT_NEAR(s.ppl_base.mean, std::exp(b.mean), 1e-12);
  // ln ratio: sqrt(se_a^2 + se_b^2 - 2 cov), cov = (E[ab] - E[a]E[b]) / (n - 1).
  double sab = 0;
  for (size_t i = 0; i < nt.size(); ++i) sab += nt[i] * nb[i];
  const double cov = (sab / n - a.mean * b.mean) / (n - 1);
  EXPECT_NEAR(s.ln_ppl_ratio.mean, a.mean - b.mean, 1e-12);
  EXPECT_NEAR(s.ln_ppl_ratio.se, std::sqrt(a.se * a.se + b.se * b.se - 2 * cov), 1e-9);
  EXPECT_LT(s.ln_ppl_ratio.se, a.se);  // correlation shrinks the uncertainty of the ratio
  EXPECT_NEAR(s.ln_ppl_correlation, cov / (a.se * b.se), 1e-9);
  EXPECT_GT(s.ln_ppl_correlation, 0.8);
  EXPECT_NEAR(s.ppl_ratio.mean, std::exp(a.mean - b.mean), 1e-12);
  EXPECT_NEAR(s.ppl_ratio.se, s.ppl_ratio.mean * s.ln_ppl_ratio.se, 1e-12);
  const Naive k = NaiveMeanSe(kl);
  EXPECT_NEAR(s.kld.mean, k.mean, 1e-12);
  EXPECT_NEAR(s.kld.se, k.se, 1e-10);
  EXPECT_NEAR(s.kld_q.p999, NaivePercentile(kl, 0.999), 1e-12);
  EXPECT_NEAR(s.kld_q.p99, NaivePercentile(kl, 0.99), 1e-12);
  EXPECT_NEAR(s.kld_q.p95, NaivePercentile(kl, 0.95), 1e-12);
  EXPECT_NEAR(s.kld_q.median, NaivePercentile(kl, 0.5), 1e-12);
  EXPECT_NEAR(s.kld_q.p1, NaivePercentile(kl, 0.01), 1e-12);
  EXPECT_DOUBLE_EQ(s.kld_q.max, *std::max_element(kl.begin(), kl.end()));
  EXPECT_DOUBLE_EQ(s.kld_q.min, *std::min_element(kl.begin(), kl.end()));
  const Naive d = NaiveMeanSe(pd);
  EXPECT_NEAR(s.p_diff.mean, d.mean, 1e-12);
  EXPECT_NEAR(s.p_diff.se, d.se, 1e-10);
  EXPECT_NEAR(s.p_diff_q.p25, NaivePercentile(pd, 0.25), 1e-12);
  double s2 = 0;
  for (double x : pd) s2 += x * x;
  EXPECT_NEAR(s.p_diff_rms.mean, std::sqrt(s2 / n), 1e-12);
  const double f = NaiveMeanSe(top).mean;
  EXPECT_NEAR(s.same_top.mean, f, 1e-12);
  EXPECT_NEAR(s.same_top.se, std::sqrt(f * (1 - f) / (n - 1)), 1e-12);
}

TEST(KldStats, BlockHasEveryLineOfLlamaPerplexity) {
  std::vector<PositionScore> pos(200);
  for (size_t i = 0; i < pos.size(); ++i) {
    pos[i].kld = 0.001 * static_cast<double>(i);
    pos[i].nll_test = pos[i].nll_base = 1.0;
  }
  const std::string b = FormatKldBlock(Summarize(pos));
  for (const char* line :
       {"Mean PPL(Q)/PPL(base)", "Mean ln(PPL(Q)/PPL(base))",
        "Mean    KLD:", "Maximum KLD:", "99.9%   KLD:", "99.0%   KLD:", "95.0%   KLD:",
        "90.0%   KLD:", "Median  KLD:", "10.0%   KLD:", " 5.0%   KLD:", " 1.0%   KLD:",
        "Minimum KLD:", "Mean    Δp:", "99.9%   Δp:", "Median  Δp:", "RMS Δp", "Same top p:"}) {
    EXPECT_NE(b.find(line), std::string::npos) << line;
  }
  EXPECT_NE(b.find("Mean    KLD:   0.099500 ±"), std::string::npos) << b;  // mean of 0..0.199
  EXPECT_NE(b.find("Maximum KLD:   0.199000"), std::string::npos) << b;
}

}  // namespace
}  // namespace hqekv::lm
