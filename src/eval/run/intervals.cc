#include "eval/run/intervals.h"

#include <algorithm>
#include <cmath>

namespace hqekv::eval {

Interval Wilson(double k, double n, double z) {
  if (n <= 0) return {0, 1};
  const double p = std::clamp(k / n, 0.0, 1.0), z2 = z * z;
  const double denom = 1 + z2 / n;
  const double center = (p + z2 / (2 * n)) / denom;
  const double half = z / denom * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

double StandardError(double n, double sum, double sum2) {
  if (n < 2) return 0;
  const double m = sum / n;
  return std::sqrt(std::max(0.0, (sum2 / n - m * m) / (n - 1)));
}

}  // namespace hqekv::eval
