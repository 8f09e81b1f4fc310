// "Did you mean ...?": the known name closest to a mistyped one, by edit
// distance. One home for the CLI's subcommands and flags (cli/suggest.h) and
// the KV policy spec's names and keys (policy/spec.cc).
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace hqekv {

// Edit distance: insert, delete, substitute and swap two neighbours, each 1
// (optimal string alignment), so "bist" is 1 from "bits".
inline size_t EditDistance(std::string_view a, std::string_view b) {
  const size_t w = b.size() + 1;
  std::vector<size_t> d((a.size() + 1) * w);
  for (size_t i = 0; i <= a.size(); ++i) d[i * w] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t v = std::min({d[(i - 1) * w + j] + 1, d[i * w + j - 1] + 1,
                           d[(i - 1) * w + j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        v = std::min(v, d[(i - 2) * w + j - 2] + 1);
      d[i * w + j] = v;
    }
  }
  return d[a.size() * w + b.size()];
}

// The known name closest to `word`, or "" when none is close: within a third
// of the word's length (at least 1, at most 3 edits), or a name that starts
// with the word (an abbreviation of 3 or more letters).
inline std::string ClosestName(std::string_view word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = std::min<size_t>(3, std::max<size_t>(1, word.size() / 3)) + 1;
  for (const std::string& n : names) {
    const size_t d = EditDistance(word, n);
    if (d < best_d) best_d = d, best = n;
  }
  if (best.empty() && word.size() >= 3) {
    for (const std::string& n : names) {
      if (n.compare(0, word.size(), word) == 0) return n;
    }
  }
  return best;
}

}  // namespace hqekv
