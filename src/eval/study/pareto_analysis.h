// What a Pareto study's points say: the frontier of quality per true bit and
// the target check of docs/evaluation.md (hqekv against the best other policy at equal
// true bits).
#pragma once

#include <string>
#include <vector>

namespace hqekv::eval {

// A measured point: memory (true bits per original element) and loss (KL).
struct BitsKl {
  double bits = 0, kl = 0;
};

// frontier[i]: no other point is at least as good on both axes and better on
// one (fewer bits with KL <= or lower KL with bits <=). Identical points are
// all on the frontier.
std::vector<bool> ParetoFrontier(const std::vector<BitsKl>& points);

// The target at one budget B: among points within +-tolerance*B of B, the
// lowest KL of the target family against the lowest KL of every other family.
struct TargetPoint {
  bool found = false;
  int index = -1;  // into the points given
  double bits = 0, kl = 0;
};
struct TargetRow {
  double budget = 0;
  double threshold = 0;  // PASS when target.kl <= threshold * other.kl
  TargetPoint target, other;
  // When no target point is in the window: the target family's point of
  // nearest bits, and the best other point within the tolerance of THAT
  // point's bits (an equal-bits comparison at the memory hqekv did reach).
  TargetPoint nearest, nearest_other;
  double ratio = 0;     // target.kl / other.kl (when both found; inf when other.kl = 0 < target.kl)
  std::string verdict;  // "PASS", "FAIL", "no <family> point within +-3%", "no other point ..."
};

struct TargetBudget {
  double bits, threshold;
};
// docs/evaluation.md, "The Pareto study": 3.4, 4.2 and 5.4 bits at <= 0.8x, 8 bits at <= 1.0x,
// +-3%.
inline constexpr TargetBudget kParetoTargets[] = {{3.4, 0.8}, {4.2, 0.8}, {5.4, 0.8}, {8, 1.0}};
inline constexpr double kParetoTolerance = 0.03;

// families[i] is the family of points[i]; `target_family` is compared to
// every other family.
std::vector<TargetRow> TargetCheck(const std::vector<BitsKl>& points,
                                   const std::vector<std::string>& families,
                                   const std::string& target_family);

}  // namespace hqekv::eval
