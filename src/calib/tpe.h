// Tree-structured Parzen Estimator (Bergstra, Bardenet, Bengio, Kégl,
// "Algorithms for Hyper-Parameter Optimization", NeurIPS 2011), univariate,
// with the defaults of Optuna's TPESampler (v3/v4):
//   - the first n_startup trials are uniform random in the box;
//   - then the finite observations are sorted by loss and split at
//     n_good = min(ceil(0.1 n), 25) (n = number of observations); the best
//     n_good form the "good" set, everything else (infeasible trials
//     included, whatever their count) the "bad" set. Infeasible trials
//     (loss +inf or NaN) are never good, so they cannot pull l(x) into the
//     infeasible region; they do shape g(x), steering away from it;
//   - per parameter, l(x) and g(x) are mixtures of Gaussians truncated to
//     [low, high]: one component per observation (sigma = the larger gap to
//     its sorted neighbours, clipped to [range / min(100, 1 + n_comp), range])
//     plus a prior component N((low+high)/2, range) with weight prior_weight;
//     observation weights are 1 for the 25 most recent and ramp linearly from
//     1/n to 1 for older ones (Optuna's default_weights);
//   - n_ei_candidates points are drawn from l(x) and the one maximising
//     sum over parameters of log l(x_p) - log g(x_p) is proposed.
// Randomness comes only from the sampler's own xoshiro256** generator seeded
// by `seed`, so a seeded run is bit-reproducible on every platform.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/xoshiro.h"

namespace hqekv::calib {

struct TpeParam {
  std::string name;
  double low = 0.0;
  double high = 1.0;  // low < high, both finite
};

struct TpeOptions {
  int n_startup = 10;        // random trials before the model is used
  int n_ei_candidates = 24;  // candidates drawn from l(x) per proposal
  double prior_weight = 1.0;
  uint64_t seed = 0;
};

struct TpeTrial {
  std::vector<double> x;  // one value per parameter, inside its box
  double loss = 0.0;      // +inf when infeasible
};

// Own PRNG (xoshiro256**, seeded through splitmix64): std:: distributions are
// implementation-defined, this is not.
using Rng = Xoshiro256;  // core/xoshiro.h (Next, Uniform, Normal)

class TpeSampler {
 public:
  // Error if params is empty, a bound is not finite, low >= high, or an
  // option is out of range (n_startup < 1, n_ei_candidates < 1, prior_weight <= 0).
  static Result<TpeSampler> Create(std::vector<TpeParam> params, TpeOptions options = {});

  // Next point to evaluate.
  std::vector<double> Ask();
  // Records an evaluation; NaN is recorded as +inf (worst). Error if x has the
  // wrong size or lies outside the box.
  Status Tell(const std::vector<double>& x, double loss);

  const std::vector<TpeParam>& params() const { return params_; }
  const std::vector<TpeTrial>& trials() const { return trials_; }
  // Index of the best finite trial, -1 when none.
  int best_index() const;

 private:
  TpeSampler(std::vector<TpeParam> params, TpeOptions options);
  std::vector<double> SampleUniform();

  std::vector<TpeParam> params_;
  TpeOptions options_;
  Rng rng_;
  std::vector<TpeTrial> trials_;
};

struct TpeProgress {
  int trial = 0;  // trials done (1-based count)
  int n_trials = 0;
  double loss = 0.0;  // loss of the trial just done
  double best = 0.0;  // best loss so far (+inf if none finite)
};

// Runs up to n_trials Ask/evaluate/Tell rounds. loss_fn returns the loss of
// a point (+inf when infeasible) or an error, which aborts the run and is
// returned. progress (optional) is called after each trial. stop (optional)
// is polled before each trial: when it becomes true the run ends early and
// returns Ok with the trials done so far (Ctrl-C keeps the best so far).
Status RunTpe(TpeSampler& sampler, int n_trials,
              const std::function<Result<double>(const std::vector<double>&)>& loss_fn,
              const std::function<void(const TpeProgress&)>& progress = nullptr,
              const std::atomic<bool>* stop = nullptr);

// Parzen estimator of one parameter (exposed for tests).
struct Parzen1D {
  std::vector<double> weights, mus, sigmas;  // normalized weights
  double low = 0.0, high = 1.0;
  // obs: observed values (in any order), oldest first for the weights.
  static Parzen1D Build(const std::vector<double>& obs, double low, double high,
                        double prior_weight);
  double Sample(Rng& rng) const;
  double LogPdf(double x) const;
};

}  // namespace hqekv::calib
