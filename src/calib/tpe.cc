#include "calib/tpe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace hqekv::calib {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kPi = 3.14159265358979323846;

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// Optuna's default_weights: recent observations weigh 1, older ones less.
std::vector<double> ObservationWeights(size_t n) {
  std::vector<double> w(n, 1.0);
  if (n >= 25) {
    const size_t n_ramp = n - 25;
    for (size_t i = 0; i < n_ramp; ++i) {
      w[i] =
          n_ramp == 1 ? 1.0 / n : 1.0 / n + (1.0 - 1.0 / n) * static_cast<double>(i) / (n_ramp - 1);
    }
  }
  return w;
}

double LogSumExp(const std::vector<double>& v) {
  double m = -kInf;
  for (double x : v) m = std::max(m, x);
  if (m == -kInf) return -kInf;
  double s = 0.0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}

}  // namespace

Parzen1D Parzen1D::Build(const std::vector<double>& obs, double low, double high,
                         double prior_weight) {
  Parzen1D p;
  p.low = low;
  p.high = high;
  const double range = high - low;
  const size_t n = obs.size();
  std::vector<double> w = ObservationWeights(n);
  // Components: the observations, then the prior.
  p.mus = obs;
  p.mus.push_back(0.5 * (low + high));
  w.push_back(prior_weight);
  const size_t m = p.mus.size();
  // Bandwidth: larger gap to the sorted neighbours (the box ends count as
  // neighbours only for interior points, as Optuna's consider_endpoints=False).
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return p.mus[a] < p.mus[b]; });
  p.sigmas.assign(m, range);
  for (size_t r = 0; r < m; ++r) {
    const double mu = p.mus[order[r]];
    const double left = r > 0 ? mu - p.mus[order[r - 1]] : -1.0;
    const double right = r + 1 < m ? p.mus[order[r + 1]] - mu : -1.0;
    double s = std::max(left, right);
    if (s < 0) s = range;  // a single component
    p.sigmas[order[r]] = s;
  }
  const double min_sigma = range / std::min(100.0, 1.0 + static_cast<double>(m));
  for (double& s : p.sigmas) s = std::clamp(s, min_sigma, range);
  p.sigmas[m - 1] = range;  // the prior is wide
  const double wsum = std::accumulate(w.begin(), w.end(), 0.0);
  p.weights.resize(m);
  for (size_t i = 0; i < m; ++i) p.weights[i] = w[i] / wsum;
  return p;
}

double Parzen1D::Sample(Rng& rng) const {
  double u = rng.Uniform();
  size_t k = 0;
  while (k + 1 < weights.size() && u >= weights[k]) u -= weights[k++];
  // Rejection from the untruncated component: sigma <= range and mu in the
  // box keep acceptance >= ~34%, so this ends fast; the cap is a safeguard.
  for (int tries = 0; tries < 1000; ++tries) {
    const double x = mus[k] + sigmas[k] * rng.Normal();
    if (x >= low && x <= high) return x;
  }
  return std::clamp(mus[k], low, high);
}

double Parzen1D::LogPdf(double x) const {
  std::vector<double> terms(weights.size());
  for (size_t k = 0; k < weights.size(); ++k) {
    const double s = sigmas[k];
    const double z = (x - mus[k]) / s;
    const double mass = NormalCdf((high - mus[k]) / s) - NormalCdf((low - mus[k]) / s);
    terms[k] = std::log(weights[k]) - 0.5 * z * z - std::log(s * std::sqrt(2.0 * kPi)) -
               std::log(std::max(mass, 1e-300));
  }
  return LogSumExp(terms);
}

TpeSampler::TpeSampler(std::vector<TpeParam> params, TpeOptions options)
    : params_(std::move(params)), options_(options), rng_(options.seed) {}

Result<TpeSampler> TpeSampler::Create(std::vector<TpeParam> params, TpeOptions options) {
  if (params.empty()) return MakeError("TPE: no parameters to search");
  for (const auto& p : params) {
    if (!std::isfinite(p.low) || !std::isfinite(p.high) || !(p.low < p.high)) {
      return MakeError("TPE: parameter '" + p.name +
                       "' needs finite bounds with low < high (got [" + std::to_string(p.low) +
                       ", " + std::to_string(p.high) + "])");
    }
  }
  if (options.n_startup < 1) return MakeError("TPE: n_startup must be >= 1");
  if (options.n_ei_candidates < 1) return MakeError("TPE: n_ei_candidates must be >= 1");
  if (!(options.prior_weight > 0)) return MakeError("TPE: prior_weight must be > 0");
  return TpeSampler(std::move(params), options);
}

std::vector<double> TpeSampler::SampleUniform() {
  std::vector<double> x(params_.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = params_[i].low + (params_[i].high - params_[i].low) * rng_.Uniform();
  }
  return x;
}

std::vector<double> TpeSampler::Ask() {
  const size_t n = trials_.size();
  size_t n_finite = 0;
  for (const auto& t : trials_) n_finite += std::isfinite(t.loss) ? 1 : 0;
  if (n < static_cast<size_t>(options_.n_startup) || n_finite == 0) return SampleUniform();

  // Split: best n_good finite trials are "good", the rest (infeasible too) "bad".
  size_t n_good = std::min<size_t>(static_cast<size_t>(std::ceil(0.1 * n)), 25);
  n_good = std::clamp<size_t>(n_good, 1, n_finite);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return trials_[a].loss < trials_[b].loss; });
  std::vector<bool> good(n, false);
  for (size_t r = 0; r < n_good; ++r) good[order[r]] = true;

  const size_t d = params_.size();
  std::vector<Parzen1D> l(d), g(d);
  for (size_t p = 0; p < d; ++p) {
    std::vector<double> xs_good, xs_bad;  // trial order = age order, for the weights
    for (size_t i = 0; i < n; ++i) (good[i] ? xs_good : xs_bad).push_back(trials_[i].x[p]);
    l[p] = Parzen1D::Build(xs_good, params_[p].low, params_[p].high, options_.prior_weight);
    g[p] = Parzen1D::Build(xs_bad, params_[p].low, params_[p].high, options_.prior_weight);
  }
  std::vector<double> best;
  double best_score = -kInf;
  for (int c = 0; c < options_.n_ei_candidates; ++c) {
    std::vector<double> x(d);
    double score = 0.0;
    for (size_t p = 0; p < d; ++p) {
      x[p] = l[p].Sample(rng_);
      score += l[p].LogPdf(x[p]) - g[p].LogPdf(x[p]);
    }
    if (best.empty() || score > best_score) {
      best = std::move(x);
      best_score = score;
    }
  }
  return best;
}

Status TpeSampler::Tell(const std::vector<double>& x, double loss) {
  if (x.size() != params_.size()) {
    return MakeError("TPE: told a point with " + std::to_string(x.size()) + " values, expected " +
                     std::to_string(params_.size()));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(x[i] >= params_[i].low && x[i] <= params_[i].high)) {
      return MakeError("TPE: value " + std::to_string(x[i]) + " of parameter '" + params_[i].name +
                       "' is outside its box");
    }
  }
  if (std::isnan(loss)) loss = kInf;
  trials_.push_back({x, loss});
  return Status::Ok();
}

int TpeSampler::best_index() const {
  int best = -1;
  for (size_t i = 0; i < trials_.size(); ++i) {
    if (std::isfinite(trials_[i].loss) && (best < 0 || trials_[i].loss < trials_[best].loss)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

Status RunTpe(TpeSampler& sampler, int n_trials,
              const std::function<Result<double>(const std::vector<double>&)>& loss_fn,
              const std::function<void(const TpeProgress&)>& progress,
              const std::atomic<bool>* stop) {
  for (int t = 0; t < n_trials; ++t) {
    if (stop && stop->load()) break;
    std::vector<double> x = sampler.Ask();
    Result<double> loss = loss_fn(x);
    if (!loss.ok()) return loss.error();
    HQEKV_RETURN_IF_ERROR(sampler.Tell(x, *loss));
    if (progress) {
      const int b = sampler.best_index();
      progress({t + 1, n_trials, sampler.trials().back().loss,
                b >= 0 ? sampler.trials()[b].loss : kInf});
    }
  }
  return Status::Ok();
}

}  // namespace hqekv::calib
