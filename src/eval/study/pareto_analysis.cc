#include "eval/study/pareto_analysis.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace hqekv::eval {

std::vector<bool> ParetoFrontier(const std::vector<BitsKl>& points) {
  const size_t n = points.size();
  std::vector<bool> on(n, true);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n && on[i]; ++j) {
      const BitsKl &a = points[j], &b = points[i];
      const bool no_worse = a.bits <= b.bits && a.kl <= b.kl;
      const bool better = a.bits < b.bits || a.kl < b.kl;
      if (j != i && no_worse && better) on[i] = false;
    }
  }
  return on;
}

namespace {

// The lowest-KL point within the window whose family is (or is not) `family`.
TargetPoint Best(const std::vector<BitsKl>& points, const std::vector<std::string>& families,
                 const std::string& family, bool want_family, double lo, double hi) {
  TargetPoint best;
  for (size_t i = 0; i < points.size(); ++i) {
    if ((families[i] == family) != want_family) continue;
    if (points[i].bits < lo || points[i].bits > hi) continue;
    if (!best.found || points[i].kl < best.kl) {
      best = {true, static_cast<int>(i), points[i].bits, points[i].kl};
    }
  }
  return best;
}

}  // namespace

std::vector<TargetRow> TargetCheck(const std::vector<BitsKl>& points,
                                   const std::vector<std::string>& families,
                                   const std::string& target_family) {
  std::vector<TargetRow> rows;
  for (const TargetBudget& t : kParetoTargets) {
    TargetRow r;
    r.budget = t.bits;
    r.threshold = t.threshold;
    const double lo = t.bits * (1 - kParetoTolerance), hi = t.bits * (1 + kParetoTolerance);
    r.target = Best(points, families, target_family, true, lo, hi);
    r.other = Best(points, families, target_family, false, lo, hi);
    char window[64];
    std::snprintf(window, sizeof window, "within %.3g..%.3g bits", lo, hi);
    if (!r.target.found) {
      r.verdict = "no " + target_family + " point " + window;
      for (size_t i = 0; i < points.size(); ++i) {
        if (families[i] != target_family) continue;
        const double d = std::abs(points[i].bits - t.bits);
        if (!r.nearest.found || d < std::abs(r.nearest.bits - t.bits))
          r.nearest = {true, static_cast<int>(i), points[i].bits, points[i].kl};
      }
      if (r.nearest.found) {
        r.nearest_other =
            Best(points, families, target_family, false, r.nearest.bits * (1 - kParetoTolerance),
                 r.nearest.bits * (1 + kParetoTolerance));
      }
    } else if (!r.other.found) {
      r.verdict = "no other point " + std::string(window);
    } else {
      if (r.other.kl > 0) {
        r.ratio = r.target.kl / r.other.kl;
      } else {
        r.ratio = r.target.kl > 0 ? std::numeric_limits<double>::infinity() : 1.0;
      }
      r.verdict = r.ratio <= r.threshold ? "PASS" : "FAIL";
    }
    rows.push_back(r);
  }
  return rows;
}

}  // namespace hqekv::eval
