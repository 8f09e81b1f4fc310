#include "calib/search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "policy/budget.h"
#include "calib/profile.h"

namespace hqekv::calib {
namespace {

// A stand-in for the model: bits follow the linear tier-cost model exactly,
// KL is a convex function of the ratios, and layer l's KL is weighted by
// layer_weight[l] (deeper layers more sensitive when the weights increase).
class FakeScorer : public TrialScorer {
 public:
  explicit FakeScorer(std::vector<double> layer_weight = {1, 1, 1, 1})
      : w_(std::move(layer_weight)) {}
  int n_layers() const override { return static_cast<int>(w_.size()); }
  Result<TrialScore> Score(const CacheChoice& c) override {
    ++calls;
    if (fail) return MakeError("fake scorer failure");
    double kl = 0, bits = 0;
    for (size_t l = 0; l < w_.size(); ++l) {
      const Ratios& r = c.per_layer.empty() ? c.global : c.per_layer[l];
      kl += w_[l] * LayerKl(r) / w_.size();
      bits += ModelBits(costs, r) / w_.size();
    }
    return TrialScore{kl, bits};
  }
  static double LayerKl(const Ratios& r) {
    // Information lost per tier; squares make mixing better than extremes.
    return 0.01 * r.r4 + 0.08 * r.r2 + 0.3 * r.r1 * r.r1 + 0.3 * r.r1 + 1.5 * r.r0 * r.r0 +
           0.2 * r.r0;
  }
  TierCosts costs{5.5, 3.5, 2.4, 0.6};
  int calls = 0;
  bool fail = false;

 private:
  std::vector<double> w_;
};

TEST(Budget, NominalEquationsMatchThePaper) {
  // Paper: r4 = (B - 2 + r1 + 2 r0) / 2, r2 = (4 - B - 3 r1 - 4 r0) / 2.
  const double B = 3.2, r1 = 0.0374, r0 = 0.0186;
  auto r = SolveRatios(NominalCosts(), B, r1, r0);
  ASSERT_TRUE(r.has_value());
  EXPECT_NEAR(r->r4, (B - 2 + r1 + 2 * r0) / 2, 1e-12);
  EXPECT_NEAR(r->r2, (4 - B - 3 * r1 - 4 * r0) / 2, 1e-12);
  EXPECT_NEAR(r->r4 + r->r2 + r->r1 + r->r0, 1.0, 1e-12);
  EXPECT_NEAR(ModelBits(NominalCosts(), *r), B, 1e-12);
}

TEST(Budget, TrueCostsHitTheBudgetAndRejectInfeasibleMixes) {
  const TierCosts c{5.5, 3.5, 2.4, 0.6};
  auto r = SolveRatios(c, 3.0, 0.2, 0.1);
  ASSERT_TRUE(r.has_value());
  EXPECT_NEAR(ModelBits(c, *r), 3.0, 1e-12);
  EXPECT_GE(r->r4, 0);
  EXPECT_GE(r->r2, 0);
  EXPECT_FALSE(SolveRatios(c, 3.0, 0.9, 0.2).has_value());  // r1 + r0 > 1
  EXPECT_FALSE(SolveRatios(c, 5.0, 0.5, 0.0).has_value());  // needs r4 > 1 - r1
  EXPECT_FALSE(SolveRatios(c, 3.0, 0.0, 0.0).has_value());  // below all-2-bit: r4 < 0
}

TEST(Budget, FeasibleBoxContainsEveryFeasiblePoint) {
  const TierCosts c{5.5, 3.5, 2.4, 0.6};
  for (double B : {1.0, 2.0, 3.2, 5.0}) {
    const SearchBox box = FeasibleBox(c, B);
    int feasible_in_box = 0;
    for (int i = 0; i <= 100; ++i) {
      for (int j = 0; j <= 100; ++j) {
        const double r1 = i / 100.0, r0 = j / 100.0;
        if (SolveRatios(c, B, r1, r0)) {
          EXPECT_LE(r1, box.r1_max + 1e-12) << B;
          EXPECT_LE(r0, box.r0_max + 1e-12) << B;
          EXPECT_GE(r1, box.r1_min - 1e-12) << B;
          EXPECT_GE(r0, box.r0_min - 1e-12) << B;
          ++feasible_in_box;
        }
      }
    }
    EXPECT_GT(feasible_in_box, 0) << B;
  }
  // Under the all-2-bit cost, eviction is required: the box excludes r0 = 0.
  EXPECT_GT(FeasibleBox(c, 1.0).r0_min, 0.3);
}

TEST(Budget, ImpossibleBudgetIsAClearError) {
  const TierCosts c{5.5, 3.5, 2.4, 0.6};
  Status s = CheckBudget(c, 6.0, "true bits per element");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("impossible"), std::string::npos);
  EXPECT_NE(s.message().find("5.5"), std::string::npos);
  EXPECT_FALSE(CheckBudget(c, 0.5, "true bits per element").ok());
  EXPECT_TRUE(CheckBudget(c, 2.0, "true bits per element").ok());
  EXPECT_FALSE(CheckBudget({3, 4, 1, 0}, 2.0, "x").ok());  // costs not decreasing
}

TEST(Calibrate, FindsAFeasibleMixAtTheBudgetBetterThanAFixedOne) {
  FakeScorer f;
  CalibOptions o;
  o.budget = 3.0;
  o.trials = 80;
  o.seed = 1;
  auto p = Calibrate(f, o);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_NEAR(p->achieved_true_bits, 3.0, 1e-9);
  EXPECT_NEAR(p->ratios.r4 + p->ratios.r2 + p->ratios.r1 + p->ratios.r0, 1.0, 1e-9);
  EXPECT_EQ(p->trials, 80);
  EXPECT_EQ(p->trial_log.size(), 80u);
  EXPECT_EQ(
      f.calls, 4 + [&] {
        int n = 0;
        for (const auto& t : p->trial_log) n += std::isnan(t.kl) ? 0 : 1;
        return n;
      }());
  // A hand-picked feasible mix at the same budget is not better.
  auto fixed = SolveRatios(f.costs, 3.0, 0.3, 0.1);
  ASSERT_TRUE(fixed.has_value());
  const double fixed_loss = FakeScorer::LayerKl(*fixed) + 2 * 0.3 + 4 * 0.1;
  EXPECT_LT(p->loss, fixed_loss);
  EXPECT_NEAR(p->loss, p->kl + 2 * p->ratios.r1 + 4 * p->ratios.r0, 1e-12);
}

TEST(Calibrate, IsReproducibleForASeed) {
  FakeScorer f1, f2;
  CalibOptions o;
  o.budget = 2.5;
  o.trials = 40;
  o.seed = 9;
  auto a = Calibrate(f1, o), b = Calibrate(f2, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(policy::ProfileToJson(*a), policy::ProfileToJson(*b));
}

TEST(Calibrate, NominalModeUsesThePaperBudget) {
  FakeScorer f;
  CalibOptions o;
  o.budget = 2.0;
  o.nominal = true;
  o.trials = 40;
  auto p = Calibrate(f, o);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->bits_mode, "nominal");
  EXPECT_NEAR(p->achieved_nominal_bits, 2.0, 1e-9);
  EXPECT_GT(p->achieved_true_bits, 2.0);  // metadata is not free
}

TEST(Calibrate, ImpossibleBudgetAndScorerErrorsAreReported) {
  FakeScorer f;
  CalibOptions o;
  o.budget = 7.0;
  auto p = Calibrate(f, o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("impossible"), std::string::npos);
  f.fail = true;
  o.budget = 3.0;
  auto q = Calibrate(f, o);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.message(), "fake scorer failure");
}

TEST(Calibrate, StopKeepsTheBestSoFar) {
  FakeScorer f;
  CalibOptions o;
  o.budget = 3.0;
  o.trials = 200;
  std::atomic<bool> stop{false};
  auto p = Calibrate(
      f, o,
      [&](const CalibProgress& pr) {
        if (pr.trial == 25) stop = true;
      },
      &stop);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->trials, 25);
  EXPECT_TRUE(std::isfinite(p->loss));
}

TEST(Calibrate, PerLayerTiltFavoursSensitiveLayersAndBeatsGlobal) {
  // Deep layers are 6x more sensitive: bits should flow to them (tilt > 0).
  const std::vector<double> w = {0.25, 0.5, 1.5, 2.5};
  FakeScorer fg(w), fl(w);
  CalibOptions o;
  o.budget = 2.6;
  o.trials = 150;
  o.seed = 3;
  o.alpha = o.beta = 0;  // compare pure KL
  auto g = Calibrate(fg, o);
  o.per_layer = true;
  auto l = Calibrate(fl, o);
  ASSERT_TRUE(g.ok() && l.ok());
  ASSERT_EQ(l->per_layer.size(), 4u);
  EXPECT_NEAR(l->achieved_true_bits, 2.6, 1e-9);
  EXPECT_LT(l->kl, g->kl);
  EXPECT_GT(ModelBits(fl.costs, l->per_layer[3]), ModelBits(fl.costs, l->per_layer[0]));
}

TEST(TiltedLayers, AverageToTheBudget) {
  const TierCosts c{5.5, 3.5, 2.4, 0.6};
  auto rows = TiltedLayers(c, 3.0, 0.35, 0.1, 0.1, 0.2, 5);
  ASSERT_TRUE(rows.has_value());
  double mean = 0, mean_r1 = 0;
  for (const auto& r : *rows) {
    mean += ModelBits(c, r) / 5;
    mean_r1 += r.r1 / 5;
  }
  EXPECT_NEAR(mean, 3.0, 1e-12);
  EXPECT_NEAR(mean_r1, 0.35, 1e-12);
  EXPECT_NEAR(ModelBits(c, (*rows)[0]), 2.9, 1e-12);
  EXPECT_NEAR(ModelBits(c, (*rows)[4]), 3.1, 1e-12);
  EXPECT_NEAR((*rows)[0].r1, 0.35 * 1.2, 1e-12);
  EXPECT_NEAR((*rows)[4].r0, 0.1 * 0.8, 1e-12);
  EXPECT_FALSE(TiltedLayers(c, 3.0, 0.35, 0.1, 0.5, 0.0, 5).has_value());  // first layer infeasible
}

// ---- profiles (the format's tests: tests/policy/profile_test.cc) ----

TEST(Profile, TextHashIsFnv1a64) {
  EXPECT_EQ(TextHash(""), "fnv1a64:cbf29ce484222325");
  EXPECT_EQ(TextHash("a"), "fnv1a64:af63dc4c8601ec8c");
}

}  // namespace
}  // namespace hqekv::calib
