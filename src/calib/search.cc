#include "calib/search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "calib/tpe.h"

namespace hqekv::calib {

Result<TierCosts> MeasureTierCosts(TrialScorer& scorer) {
  const Ratios pure[4] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}};
  double b[4];
  for (int t = 0; t < 4; ++t) {
    Result<TrialScore> s = scorer.Score({pure[t], {}});
    if (!s.ok()) return s.error();
    b[t] = s->true_bits;
  }
  TierCosts c{b[0], b[1], b[2], b[3]};
  HQEKV_RETURN_IF_ERROR(ValidateCosts(c));
  return c;
}

std::optional<std::vector<Ratios>> TiltedLayers(const TierCosts& c, double budget, double r1,
                                                double r0, double tilt, double slope,
                                                int n_layers) {
  std::vector<Ratios> rows;
  for (int l = 0; l < n_layers; ++l) {
    const double pos = n_layers > 1 ? 2.0 * l / (n_layers - 1) - 1.0 : 0.0;
    const double m = std::max(0.0, 1.0 - slope * pos);
    auto r = SolveRatios(c, budget + tilt * pos, r1 * m, r0 * m);
    if (!r) return std::nullopt;
    rows.push_back(*r);
  }
  return rows;
}

Result<policy::Profile> Calibrate(TrialScorer& scorer, const CalibOptions& opt,
                                  const std::function<void(const CalibProgress&)>& progress,
                                  const std::atomic<bool>* stop) {
  if (opt.trials < 1) return MakeError("--trials must be >= 1");
  if (!(opt.alpha >= 0) || !(opt.beta >= 0)) return MakeError("--alpha and --beta must be >= 0");
  const int n_layers = scorer.n_layers();
  if (opt.per_layer && n_layers < 2) return MakeError("--per-layer needs a model with >= 2 layers");

  if (progress) progress({0, opt.trials, std::numeric_limits<double>::infinity(), true});
  TierCosts measured;
  {
    Result<TierCosts> m = MeasureTierCosts(scorer);
    if (!m.ok()) return m.error();
    measured = *m;
  }
  const TierCosts costs = opt.nominal ? NominalCosts() : measured;
  HQEKV_RETURN_IF_ERROR(CheckBudget(
      costs, opt.budget, opt.nominal ? "nominal bits per element" : "true bits per element"));

  // Box: per-layer mode widens (r1, r0) to what the lowest-budget layer allows.
  const double max_tilt =
      opt.per_layer ? std::min(costs.b4 - opt.budget, opt.budget - costs.b0) : 0.0;
  const SearchBox box = FeasibleBox(costs, opt.budget - max_tilt);
  // Per-layer mode scales r1, r0 per layer, so only the upper bounds apply.
  const double r1_lo = opt.per_layer ? 0.0 : box.r1_min, r0_lo = opt.per_layer ? 0.0 : box.r0_min;
  std::vector<TpeParam> params = {{"r1", r1_lo, std::max(box.r1_max, r1_lo + 1e-9)},
                                  {"r0", r0_lo, std::max(box.r0_max, r0_lo + 1e-9)}};
  if (opt.per_layer) {
    params.push_back({"tilt", -std::max(max_tilt, 1e-9), std::max(max_tilt, 1e-9)});
    params.push_back({"slope", -1.0, 1.0});
  }
  TpeOptions topt;
  topt.seed = opt.seed;
  Result<TpeSampler> sampler = TpeSampler::Create(params, topt);
  if (!sampler.ok()) return sampler.error();

  policy::Profile prof;
  prof.n_layers = n_layers;
  prof.budget_bits = opt.budget;
  prof.bits_mode = opt.nominal ? "nominal" : "true";
  prof.alpha = opt.alpha;
  prof.beta = opt.beta;
  prof.seed = opt.seed;
  prof.tier_costs = measured;
  std::vector<CacheChoice> choices;  // parallel to trial_log, for the best one

  auto loss_fn = [&](const std::vector<double>& x) -> Result<double> {
    policy::TrialRecord rec;
    rec.kl = NAN;
    rec.true_bits = NAN;
    rec.loss = std::numeric_limits<double>::infinity();
    CacheChoice choice;
    const double r1 = x[0], r0 = x[1];
    auto g = SolveRatios(costs, opt.budget, r1, r0);
    rec.ratios = g ? *g : Ratios{NAN, NAN, r1, r0};
    bool feasible = g.has_value();
    if (opt.per_layer) {
      rec.tilt = x[2];
      rec.slope = x[3];
      auto rows = TiltedLayers(costs, opt.budget, r1, r0, x[2], x[3], n_layers);
      feasible = rows.has_value();
      if (rows) {
        choice.per_layer = *rows;
        // The base mix is the layer-average (what the budget sees).
        Ratios avg;
        for (const auto& r : *rows) {
          avg.r4 += r.r4 / n_layers;
          avg.r2 += r.r2 / n_layers;
          avg.r1 += r.r1 / n_layers;
          avg.r0 += r.r0 / n_layers;
        }
        rec.ratios = avg;
      }
    }
    if (feasible) {
      choice.global = rec.ratios;
      Result<TrialScore> s = scorer.Score(choice);
      if (!s.ok()) return s.error();
      rec.kl = s->kl;
      rec.true_bits = s->true_bits;
      const bool over = !opt.nominal && s->true_bits > opt.budget + opt.bits_tolerance;
      if (!over) rec.loss = s->kl + opt.alpha * rec.ratios.r1 + opt.beta * rec.ratios.r0;
    }
    prof.trial_log.push_back(rec);
    choices.push_back(choice);
    return rec.loss;
  };
  auto tpe_progress = [&](const TpeProgress& p) {
    if (progress) progress({p.trial, p.n_trials, p.best, false});
  };
  HQEKV_RETURN_IF_ERROR(RunTpe(*sampler, opt.trials, loss_fn, tpe_progress, stop));

  const int best = sampler->best_index();
  if (best < 0) {
    return MakeError("no feasible trial within the budget after " +
                     std::to_string(sampler->trials().size()) +
                     " trials; try more --trials or another --bits");
  }
  const policy::TrialRecord& b = prof.trial_log[best];
  prof.ratios = b.ratios;
  prof.per_layer = choices[best].per_layer;
  prof.loss = b.loss;
  prof.kl = b.kl;
  prof.achieved_true_bits = b.true_bits;
  prof.achieved_nominal_bits = ModelBits(NominalCosts(), b.ratios);
  prof.trials = static_cast<int>(sampler->trials().size());
  return prof;
}

}  // namespace hqekv::calib
