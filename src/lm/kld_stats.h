// Statistics of a KV cache (or any test run) against a base run, token by
// token, with the uncertainty llama.cpp's `llama-perplexity --kl-divergence`
// reports, so that the figures can be compared with what people in the field
// quote. Every value is in nats (log-probabilities) or probability units.
//
// Per scored position i (n of them) the inputs are
//   nll_test[i] = -log q(t_i), nll_base[i] = -log p(t_i)    (t_i the true next token)
//   kld[i]      = KL(p || q) of the two next-token distributions
//   p_diff[i]   = q(t_i) - p(t_i)                            ("delta p")
//   same_top[i] = argmax q == argmax p
// Uncertainties are standard errors of a mean over the n positions:
//   se(x) = sqrt(sample variance of x / n) = sqrt((mean(x^2) - mean(x)^2) / (n - 1)),
// treating positions as independent (they are not quite: neighbouring tokens
// of a text are correlated, so the true uncertainty is somewhat larger).
//   PPL = exp(mean nll), se(PPL) = PPL * se(nll) (first-order propagation);
//   ln(PPL(Q)/PPL(base)) = mean(nll_test - nll_base), whose se accounts for
//     the covariance of the two (they are strongly correlated);
//   same-top fraction f: se = sqrt(f (1 - f) / (n - 1)).
// Percentiles interpolate linearly between order statistics at rank
// fraction * (n - 1) (the median is the 50% percentile).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hqekv::lm {

// One scored position (see above).
struct PositionScore {
  double nll_test = 0, nll_base = 0, kld = 0, p_diff = 0;
  bool same_top = false;
};

struct MeanSe {
  double mean = 0, se = 0;  // se = 0 when n < 2
};

// Mean and standard error of v (two passes). Empty -> {0, 0}.
MeanSe MeanAndStandardError(const std::vector<double>& v);

// Linear-interpolation percentile of `sorted` (ascending, non-empty) at
// fraction f in [0, 1].
double Percentile(const std::vector<double>& sorted, double f);

// The percentiles of a distribution the block prints, highest first.
struct Quantiles {
  double max = 0, p999 = 0, p99 = 0, p95 = 0, p90 = 0, p75 = 0, median = 0, p25 = 0, p10 = 0,
         p5 = 0, p1 = 0, p01 = 0, min = 0;
};
Quantiles QuantilesOf(std::vector<double> v);  // v non-empty

struct KldSummary {
  int64_t n = 0;                  // positions
  MeanSe ppl_test, ppl_base;      // perplexities
  double ln_ppl_correlation = 0;  // of the per-position nll_test and nll_base
  MeanSe ln_ppl_ratio;            // ln(PPL(Q)/PPL(base))
  MeanSe ppl_ratio;               // PPL(Q)/PPL(base) = exp(ln ratio), se propagated
  MeanSe ppl_diff;                // PPL(Q) - PPL(base)
  MeanSe kld;                     // mean KLD
  Quantiles kld_q;
  MeanSe p_diff;  // mean delta p
  Quantiles p_diff_q;
  MeanSe p_diff_rms;  // sqrt(mean delta p^2), se propagated
  MeanSe same_top;    // fraction of positions with the same top-1 token
};

// The summary of `positions` (non-empty). quantiles = false skips the
// percentiles (kld_q, p_diff_q stay 0): the per-chunk progress lines need
// only the means, and sorting every prefix would make a run quadratic.
KldSummary Summarize(const std::vector<PositionScore>& positions, bool quantiles = true);

// The three statistics blocks (perplexity, KL divergence, token probability)
// in llama-perplexity's layout, '\n'-terminated lines.
std::string FormatKldBlock(const KldSummary& s);

}  // namespace hqekv::lm
