// The HqeKV ratio search (paper Algorithm 1, with the reference code's
// defects fixed): TPE over the free variables (r1, r0), r4 and r2 solved from
// the budget equation (budget.h), infeasible mixes rejected with +inf without
// running the model, loss = mean KL(full || compressed) + alpha r1 + beta r0.
//
// Per-layer mode (beyond the paper): TPE over (r1, r0, tilt, slope), four
// dimensions instead of 2 x n_layers. With pos_l = 2 l / (L - 1) - 1 in
// [-1, 1] (first to last layer), layer l gets
//   budget B_l = B + tilt * pos_l            (a linear slope of bits with
//                                             depth; averages to exactly B
//                                             over equal-size layers),
//   r1_l = r1 m_l, r0_l = r0 m_l, m_l = max(0, 1 - slope * pos_l)
//                                            (how the 1-bit / evicted share
//                                             moves with depth),
// and its own r4_l, r2_l from B_l. tilt = slope = 0 is the global solution,
// so the search space contains it. The regularizer uses the layer-mean r1, r0.
//
// The model is behind TrialScorer, so the search is testable without one.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "policy/budget.h"
#include "policy/profile.h"

namespace hqekv::calib {

// The tier-ratio budget equations live with the other budgets (policy/budget.h).
using Ratios = policy::TierRatios;  // what the search finds
using policy::CheckBudget;
using policy::FeasibleBox;
using policy::ModelBits;
using policy::NominalCosts;
using policy::RatiosText;
using policy::SearchBox;
using policy::SolveRatios;
using policy::TierCosts;
using policy::ValidateCosts;

// A cache configuration to score: global ratios, or one row per layer.
struct CacheChoice {
  Ratios global;
  std::vector<Ratios> per_layer;  // empty = global
};

struct TrialScore {
  double kl = 0;         // mean KL(full || compressed), nats per teacher-forced position
  double true_bits = 0;  // measured: cache bytes * 8 / original K,V elements (see budget.h)
};

class TrialScorer {
 public:
  virtual ~TrialScorer() = default;
  virtual int n_layers() const = 0;
  virtual Result<TrialScore> Score(const CacheChoice& choice) = 0;
};

struct CalibOptions {
  double budget = 2.0;
  bool nominal = false;  // budget in the paper's nominal bits (4 r4 + 2 r2 + r1)
  int trials = 200;      // TPE trials (infeasible ones count, as in the paper)
  uint64_t seed = 0;
  double alpha = 2.0, beta = 4.0;
  bool per_layer = false;
  // True-bits mode: a trial whose measured true bits exceed budget + this is
  // over budget and rejected (+inf) — the linear model is exact only up to
  // the rounding of chunk counts.
  double bits_tolerance = 0.05;
};

struct CalibProgress {
  int trial = 0, n_trials = 0;
  double best = 0;               // best loss so far (+inf: none feasible yet)
  bool measuring_costs = false;  // the 4 tier-cost measurements before the search
};

// Measures the tier costs (true mode: 4 pure-tier scorings), checks the
// budget, runs the search and fills a Profile's search fields (ratios,
// per_layer, loss, kl, achieved bits, trials done, seed, alpha, beta, budget,
// mode, tier costs, trial log). The caller fills model and calibration text.
// stop: when set (Ctrl-C), the search ends and the best so far is returned
// (an error if no feasible trial was done yet).
Result<policy::Profile> Calibrate(
    TrialScorer& scorer, const CalibOptions& opt,
    const std::function<void(const CalibProgress&)>& progress = nullptr,
    const std::atomic<bool>* stop = nullptr);

// Tier costs measured with the scorer: b_t = true bits with ratios 1 on tier t.
Result<TierCosts> MeasureTierCosts(TrialScorer& scorer);

// Per-layer rows for a base (r1, r0), tilt and slope; nullopt when a layer
// is infeasible.
std::optional<std::vector<Ratios>> TiltedLayers(const TierCosts& c, double budget, double r1,
                                                double r0, double tilt, double slope, int n_layers);

}  // namespace hqekv::calib
