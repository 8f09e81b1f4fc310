#include "calib/tpe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

namespace hqekv::calib {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Branin on [-5, 10] x [0, 15]; global minimum 0.397887 (three minimisers).
double Branin(const std::vector<double>& x) {
  const double pi = 3.14159265358979323846;
  const double a = 1, b = 5.1 / (4 * pi * pi), c = 5 / pi, r = 6, s = 10, t = 1 / (8 * pi);
  const double y = x[1] - b * x[0] * x[0] + c * x[0] - r;
  return a * y * y + s * (1 - t) * std::cos(x[0]) + s;
}

// Shifted quadratic on [-5, 5]^3, minimum 0 at (1.3, -2.1, 0.7).
double ShiftedQuadratic(const std::vector<double>& x) {
  const double c[3] = {1.3, -2.1, 0.7};
  double s = 0;
  for (int i = 0; i < 3; ++i) s += (x[i] - c[i]) * (x[i] - c[i]);
  return s;
}

// Like the ratio search: a unit square of which only x0 + x1 <= 0.6 (18%) is
// feasible; minimum 0.1 at (0.35, 0.2), inside the feasible triangle.
double Constrained(const std::vector<double>& x) {
  if (x[0] + x[1] > 0.6) return kInf;
  return (x[0] - 0.35) * (x[0] - 0.35) + (x[1] - 0.2) * (x[1] - 0.2) + 0.1;
}

using Fn = double (*)(const std::vector<double>&);

double BestLoss(const std::vector<TpeParam>& params, Fn fn, int n_trials, uint64_t seed,
                bool random_search) {
  TpeOptions opt;
  opt.seed = seed;
  if (random_search) opt.n_startup = n_trials;  // never leaves the random phase
  auto s = TpeSampler::Create(params, opt);
  EXPECT_TRUE(s.ok()) << s.message();
  Status st =
      RunTpe(*s, n_trials, [&](const std::vector<double>& x) -> Result<double> { return fn(x); });
  EXPECT_TRUE(st.ok()) << st.message();
  const int b = s->best_index();
  return b >= 0 ? s->trials()[b].loss : kInf;
}

// Mean best loss over seeds, TPE versus random search at the same budget.
void ExpectTpeBeatsRandom(const std::vector<TpeParam>& params, Fn fn, int n_trials) {
  const int kSeeds = 12;
  double tpe = 0, rnd = 0;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    tpe += BestLoss(params, fn, n_trials, seed, false) / kSeeds;
    rnd += BestLoss(params, fn, n_trials, seed + 1000, true) / kSeeds;
  }
  EXPECT_LT(tpe, rnd) << "mean best loss: TPE " << tpe << ", random " << rnd;
  std::printf("mean best loss over %d seeds: TPE %.5f  random %.5f\n", kSeeds, tpe, rnd);
  ::testing::Test::RecordProperty("tpe_mean_best", std::to_string(tpe));
  ::testing::Test::RecordProperty("random_mean_best", std::to_string(rnd));
}

TEST(Tpe, BeatsRandomSearchOnBranin) {
  ExpectTpeBeatsRandom({{"x", -5, 10}, {"y", 0, 15}}, Branin, 60);
}

TEST(Tpe, BeatsRandomSearchOnShiftedQuadratic) {
  ExpectTpeBeatsRandom({{"a", -5, 5}, {"b", -5, 5}, {"c", -5, 5}}, ShiftedQuadratic, 60);
}

TEST(Tpe, BeatsRandomSearchWithInfeasibleRegion) {
  ExpectTpeBeatsRandom({{"r1", 0, 1}, {"r0", 0, 1}}, Constrained, 60);
}

TEST(Tpe, ProposesMostlyFeasiblePointsOnceItHasLearned) {
  // Infeasible trials are "bad": after the startup they should repel the
  // proposals. Count feasible proposals in trials 31..80 for TPE vs random.
  int feasible_tpe = 0, feasible_rnd = 0;
  for (int seed = 1; seed <= 5; ++seed) {
    for (bool rnd : {false, true}) {
      TpeOptions opt;
      opt.seed = seed;
      if (rnd) opt.n_startup = 1000;
      auto s = TpeSampler::Create({{"r1", 0, 1}, {"r0", 0, 1}}, opt);
      ASSERT_TRUE(s.ok());
      ASSERT_TRUE(RunTpe(*s, 80, [](const std::vector<double>& x) -> Result<double> {
                    return Constrained(x);
                  }).ok());
      for (int i = 30; i < 80; ++i) {
        (rnd ? feasible_rnd : feasible_tpe) += std::isfinite(s->trials()[i].loss) ? 1 : 0;
      }
    }
  }
  EXPECT_GT(feasible_tpe, 2 * feasible_rnd) << feasible_tpe << " vs " << feasible_rnd;
}

TEST(Tpe, SeededRunsReproduceExactly) {
  auto run = [](uint64_t seed) {
    TpeOptions opt;
    opt.seed = seed;
    auto s = TpeSampler::Create({{"x", -5, 10}, {"y", 0, 15}}, opt);
    EXPECT_TRUE(s.ok());
    EXPECT_TRUE(RunTpe(*s, 40, [](const std::vector<double>& x) -> Result<double> {
                  return Branin(x);
                }).ok());
    return s->trials();
  };
  const auto a = run(7), b = run(7), c = run(8);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].x, b[i].x) << "trial " << i;
    EXPECT_EQ(a[i].loss, b[i].loss);
  }
  EXPECT_NE(a[0].x, c[0].x);
  EXPECT_NE(a[39].x, c[39].x);
}

TEST(Tpe, RespectsBounds) {
  TpeOptions opt;
  opt.seed = 3;
  opt.n_startup = 5;
  auto s = TpeSampler::Create({{"a", 2.0, 2.001}, {"b", -1e3, 1e3}}, opt);
  ASSERT_TRUE(s.ok());
  // Optimum outside the box drives the model against the edges.
  ASSERT_TRUE(RunTpe(*s, 100, [](const std::vector<double>& x) -> Result<double> {
                return -x[0] - x[1];
              }).ok());
  for (const auto& t : s->trials()) {
    EXPECT_GE(t.x[0], 2.0);
    EXPECT_LE(t.x[0], 2.001);
    EXPECT_GE(t.x[1], -1e3);
    EXPECT_LE(t.x[1], 1e3);
  }
  // and it learned to push b up.
  EXPECT_GT(s->trials()[s->best_index()].x[1], 800);
}

TEST(Tpe, NanIsRecordedAsWorstAndAllInfeasibleStaysRandom) {
  auto s = TpeSampler::Create({{"x", 0, 1}}, {});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(RunTpe(*s, 20, [](const std::vector<double>&) -> Result<double> {
                return std::nan("");
              }).ok());
  EXPECT_EQ(s->best_index(), -1);
  for (const auto& t : s->trials()) EXPECT_EQ(t.loss, kInf);
}

TEST(Tpe, StopFlagEndsEarlyAndKeepsTrials) {
  auto s = TpeSampler::Create({{"x", 0, 1}}, {});
  ASSERT_TRUE(s.ok());
  std::atomic<bool> stop{false};
  int calls = 0;
  ASSERT_TRUE(RunTpe(
                  *s, 100,
                  [&](const std::vector<double>& x) -> Result<double> {
                    if (++calls == 7) stop = true;
                    return x[0];
                  },
                  nullptr, &stop)
                  .ok());
  EXPECT_EQ(s->trials().size(), 7u);
  EXPECT_GE(s->best_index(), 0);
}

TEST(Tpe, LossErrorAbortsTheRun) {
  auto s = TpeSampler::Create({{"x", 0, 1}}, {});
  ASSERT_TRUE(s.ok());
  Status st = RunTpe(*s, 10, [](const std::vector<double>&) -> Result<double> {
    return MakeError("model failed");
  });
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "model failed");
}

TEST(Tpe, RejectsBadBoxesAndPoints) {
  EXPECT_FALSE(TpeSampler::Create({}, {}).ok());
  EXPECT_FALSE(TpeSampler::Create({{"x", 1, 1}}, {}).ok());
  EXPECT_FALSE(TpeSampler::Create({{"x", 0, kInf}}, {}).ok());
  TpeOptions bad;
  bad.n_ei_candidates = 0;
  EXPECT_FALSE(TpeSampler::Create({{"x", 0, 1}}, bad).ok());
  auto s = TpeSampler::Create({{"x", 0, 1}}, {});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->Tell({2.0}, 1.0).ok());
  EXPECT_FALSE(s->Tell({0.5, 0.5}, 1.0).ok());
}

TEST(Parzen1D, IsANormalizedDensityOnTheBox) {
  const Parzen1D p = Parzen1D::Build({0.1, 0.12, 0.8}, 0.0, 1.0, 1.0);
  double integral = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) integral += std::exp(p.LogPdf((i + 0.5) / n)) / n;
  EXPECT_NEAR(integral, 1.0, 1e-3);
  // Mass concentrates near the clustered observations.
  EXPECT_GT(p.LogPdf(0.11), p.LogPdf(0.5));
  Rng rng(1);
  for (int i = 0; i < 1000; ++i) {
    const double x = p.Sample(rng);
    ASSERT_GE(x, 0.0);
    ASSERT_LE(x, 1.0);
  }
}

}  // namespace
}  // namespace hqekv::calib
