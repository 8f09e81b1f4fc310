#include "lm/kld_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hqekv::lm {
namespace {

// Covariance of the two means (population moments / (n - 1)), the term that
// the standard error of a difference of correlated means subtracts.
double CovarianceOfMeans(const std::vector<double>& a, const std::vector<double>& b, double ma,
                         double mb) {
  const size_t n = a.size();
  if (n < 2) return 0;
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += (a[i] - ma) * (b[i] - mb);
  return s / static_cast<double>(n) / static_cast<double>(n - 1);
}

MeanSe Exp(const MeanSe& log_value) {
  const double v = std::exp(log_value.mean);
  return {v, v * log_value.se};
}

std::string Line(const char* fmt, double a) {
  char buf[128];
  std::snprintf(buf, sizeof buf, fmt, a);
  return buf;
}

std::string Line(const char* fmt, double a, double b) {
  char buf[128];
  std::snprintf(buf, sizeof buf, fmt, a, b);
  return buf;
}

}  // namespace

MeanSe MeanAndStandardError(const std::vector<double>& v) {
  const size_t n = v.size();
  if (n == 0) return {};
  double sum = 0;
  for (double x : v) sum += x;
  const double mean = sum / static_cast<double>(n);
  if (n < 2) return {mean, 0};
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return {mean, std::sqrt(ss / static_cast<double>(n - 1) / static_cast<double>(n))};
}

double Percentile(const std::vector<double>& sorted, double f) {
  if (f <= 0) return sorted.front();
  if (f >= 1) return sorted.back();
  const double r = f * static_cast<double>(sorted.size() - 1);
  const size_t i = static_cast<size_t>(r);
  const double w = r - static_cast<double>(i);
  const size_t j = std::min(i + 1, sorted.size() - 1);
  return (1 - w) * sorted[i] + w * sorted[j];
}

Quantiles QuantilesOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Quantiles q;
  q.max = v.back();
  q.p999 = Percentile(v, 0.999);
  q.p99 = Percentile(v, 0.99);
  q.p95 = Percentile(v, 0.95);
  q.p90 = Percentile(v, 0.90);
  q.p75 = Percentile(v, 0.75);
  q.median = Percentile(v, 0.5);
  q.p25 = Percentile(v, 0.25);
  q.p10 = Percentile(v, 0.10);
  q.p5 = Percentile(v, 0.05);
  q.p1 = Percentile(v, 0.01);
  q.p01 = Percentile(v, 0.001);
  q.min = v.front();
  return q;
}

KldSummary Summarize(const std::vector<PositionScore>& positions, bool quantiles) {
  const size_t n = positions.size();
  KldSummary s;
  s.n = static_cast<int64_t>(n);
  if (n == 0) return s;
  std::vector<double> nt(n), nb(n), d(n), kld(n), pd(n), pd2(n), top(n);
  for (size_t i = 0; i < n; ++i) {
    const PositionScore& p = positions[i];
    nt[i] = p.nll_test;
    nb[i] = p.nll_base;
    d[i] = p.nll_test - p.nll_base;
    kld[i] = p.kld;
    pd[i] = p.p_diff;
    pd2[i] = p.p_diff * p.p_diff;
    top[i] = p.same_top ? 1.0 : 0.0;
  }
  const MeanSe lt = MeanAndStandardError(nt), lb = MeanAndStandardError(nb);
  s.ppl_test = Exp(lt);
  s.ppl_base = Exp(lb);
  const double cov = CovarianceOfMeans(nt, nb, lt.mean, lb.mean);
  s.ln_ppl_correlation = lt.se > 0 && lb.se > 0 ? cov / (lt.se * lb.se) : 0;
  // The se of the mean difference equals sqrt(se_t^2 + se_b^2 - 2 cov).
  s.ln_ppl_ratio = MeanAndStandardError(d);
  s.ppl_ratio = Exp(s.ln_ppl_ratio);
  const double ppl_cov = s.ppl_test.mean * s.ppl_base.mean * cov;
  s.ppl_diff = {s.ppl_test.mean - s.ppl_base.mean,
                std::sqrt(std::max(0.0, s.ppl_test.se * s.ppl_test.se +
                                            s.ppl_base.se * s.ppl_base.se - 2 * ppl_cov))};
  s.kld = MeanAndStandardError(kld);
  if (quantiles) s.kld_q = QuantilesOf(kld);
  s.p_diff = MeanAndStandardError(pd);
  if (quantiles) s.p_diff_q = QuantilesOf(pd);
  const MeanSe mse = MeanAndStandardError(pd2);
  const double rms = std::sqrt(mse.mean);
  s.p_diff_rms = {rms, rms > 0 ? 0.5 / rms * mse.se : 0};
  const double f = MeanAndStandardError(top).mean;
  s.same_top = {f, n > 1 ? std::sqrt(f * (1 - f) / static_cast<double>(n - 1)) : 0};
  return s;
}

std::string FormatKldBlock(const KldSummary& s) {
  std::string o;
  o += "====== Perplexity statistics ======\n";
  o += Line("Mean PPL(Q)                   : %10.6f ± %10.6f\n", s.ppl_test.mean, s.ppl_test.se);
  o += Line("Mean PPL(base)                : %10.6f ± %10.6f\n", s.ppl_base.mean, s.ppl_base.se);
  o += Line("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * s.ln_ppl_correlation);
  o += Line("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", s.ln_ppl_ratio.mean,
            s.ln_ppl_ratio.se);
  o += Line("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", s.ppl_ratio.mean, s.ppl_ratio.se);
  o += Line("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", s.ppl_diff.mean, s.ppl_diff.se);
  o += "\n====== KL divergence statistics ======\n";
  const Quantiles& k = s.kld_q;
  o += Line("Mean    KLD: %10.6f ± %10.6f\n", s.kld.mean, s.kld.se);
  o += Line("Maximum KLD: %10.6f\n", k.max);
  o += Line("99.9%%   KLD: %10.6f\n", k.p999);
  o += Line("99.0%%   KLD: %10.6f\n", k.p99);
  o += Line("95.0%%   KLD: %10.6f\n", k.p95);
  o += Line("90.0%%   KLD: %10.6f\n", k.p90);
  o += Line("Median  KLD: %10.6f\n", k.median);
  o += Line("10.0%%   KLD: %10.6f\n", k.p10);
  o += Line(" 5.0%%   KLD: %10.6f\n", k.p5);
  o += Line(" 1.0%%   KLD: %10.6f\n", k.p1);
  o += Line(" 0.1%%   KLD: %10.6f\n", k.p01);
  o += Line("Minimum KLD: %10.6f\n", k.min);
  o += "\n====== Token probability statistics ======\n";
  const Quantiles& p = s.p_diff_q;
  o += Line("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * s.p_diff.mean, 100 * s.p_diff.se);
  o += Line("Maximum Δp: %6.3f%%\n", 100 * p.max);
  o += Line("99.9%%   Δp: %6.3f%%\n", 100 * p.p999);
  o += Line("99.0%%   Δp: %6.3f%%\n", 100 * p.p99);
  o += Line("95.0%%   Δp: %6.3f%%\n", 100 * p.p95);
  o += Line("90.0%%   Δp: %6.3f%%\n", 100 * p.p90);
  o += Line("75.0%%   Δp: %6.3f%%\n", 100 * p.p75);
  o += Line("Median  Δp: %6.3f%%\n", 100 * p.median);
  o += Line("25.0%%   Δp: %6.3f%%\n", 100 * p.p25);
  o += Line("10.0%%   Δp: %6.3f%%\n", 100 * p.p10);
  o += Line(" 5.0%%   Δp: %6.3f%%\n", 100 * p.p5);
  o += Line(" 1.0%%   Δp: %6.3f%%\n", 100 * p.p1);
  o += Line(" 0.1%%   Δp: %6.3f%%\n", 100 * p.p01);
  o += Line("Minimum Δp: %6.3f%%\n", 100 * p.min);
  o += Line("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * s.p_diff_rms.mean, 100 * s.p_diff_rms.se);
  o += Line("Same top p: %6.3f ± %5.3f %%\n", 100 * s.same_top.mean, 100 * s.same_top.se);
  return o;
}

}  // namespace hqekv::lm
