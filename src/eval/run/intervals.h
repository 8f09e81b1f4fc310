// Confidence intervals of the evaluation's figures.
//   Accuracies (k successes of n trials): the Wilson score interval, which
//   stays inside [0, 1] and is sensible at 0 / n and n / n where the normal
//   approximation collapses to a zero-width interval:
//     center = (p + z^2 / 2n) / (1 + z^2 / n),
//     half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2),
//   with p = k / n and z = 1.96 (95%).
//   Means (KL): the standard error from the count, sum and sum of squares,
//     se = sqrt((sum2 / n - mean^2) / (n - 1)).
#pragma once

#include <cstdint>

namespace hqekv::eval {

inline constexpr double kZ95 = 1.959963984540054;

struct Interval {
  double lo = 0, hi = 0;
  bool Overlaps(const Interval& o) const { return lo <= o.hi && o.lo <= hi; }
};

// Wilson interval of k successes in n trials (n > 0; n == 0 gives [0, 1]).
Interval Wilson(double k, double n, double z = kZ95);

// Standard error of a mean from n, sum and sum of squares (0 for n < 2).
double StandardError(double n, double sum, double sum2);

}  // namespace hqekv::eval
