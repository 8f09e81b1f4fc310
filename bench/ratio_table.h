// Ratio tables of the attention benchmarks: a time per (row label, context
// length), printed as a ratio to a base row measured in the same run (the
// machines are shared and noisy, so only same-run ratios mean anything).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <map>
#include <span>
#include <string>
#include <utility>

namespace hqekv::bench {

// (row label, context length in tokens) -> seconds (CPU time per unit of work).
using RatioTimes = std::map<std::pair<std::string, int>, double>;

// The one table of a benchmark program.
inline RatioTimes& Times() {
  static RatioTimes t;
  return t;
}

// "<Case>/<label>/<n>" -> label, n: the label is everything between the first
// and the last slash (a --kv spec such as "kivi:nominal_bits=2"); false when
// the name has fewer than two slashes.
inline bool SplitLabelLength(const std::string& name, std::string* label, int* n) {
  const auto a = name.find('/'), b = name.rfind('/');
  if (a == std::string::npos || b <= a) return false;
  *label = name.substr(a + 1, b - a - 1);
  *n = std::atoi(name.c_str() + b + 1);
  return true;
}

// Prints " 0.123x" per length for `row` against `base` ("-" where either is
// missing); no newline.
inline void PrintRatioCells(const std::string& base, const std::string& row,
                            std::span<const int> lengths) {
  for (int n : lengths) {
    const auto b = Times().find({base, n}), t = Times().find({row, n});
    if (b == Times().end() || t == Times().end()) {
      std::printf(" %10s", "-");
    } else {
      std::printf(" %9.3fx", t->second / b->second);
    }
  }
}

}  // namespace hqekv::bench
