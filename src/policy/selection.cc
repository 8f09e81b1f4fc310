#include "policy/selection.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/splitmix64.h"

namespace hqekv::policy {

std::vector<double> NormalizeImportance(const std::vector<double>& sum,
                                        const std::vector<int32_t>& token_pos,
                                        const std::vector<int32_t>& query_pos, int min_count) {
  std::vector<int32_t> q = query_pos;
  std::sort(q.begin(), q.end());
  std::vector<double> a(sum.size(), 0.0);
  for (size_t i = 0; i < sum.size(); ++i) {
    // queries with position >= token position
    const auto c = q.end() - std::lower_bound(q.begin(), q.end(), token_pos[i]);
    a[i] = c > 0 ? sum[i] / static_cast<double>(std::max<int64_t>(c, min_count)) : 0.0;
  }
  return a;
}

double ValueRange(const float* v, int n_heads, int D) {
  double r = 0;
  for (int h = 0; h < n_heads; ++h) {
    const float* row = v + static_cast<int64_t>(h) * D;
    const auto [mn, mx] = std::minmax_element(row, row + D);
    r += static_cast<double>(*mx) - static_cast<double>(*mn);
  }
  return r;
}

std::vector<double> ChunkMeans(const std::vector<double>& s, int G) {
  std::vector<double> out;
  for (size_t b = 0; b < s.size(); b += G) {
    const size_t e = std::min(s.size(), b + G);
    out.push_back(std::accumulate(s.begin() + b, s.begin() + e, 0.0) / static_cast<double>(e - b));
  }
  return out;
}

Result<Ranking> ParseRanking(const std::string& name) {
  for (Ranking r : {Ranking::kPaper, Ranking::kRandom, Ranking::kRecency, Ranking::kSinkRecency,
                    Ranking::kPooled}) {
    if (name == RankingName(r)) return r;
  }
  return MakeError("unknown hqekv ranking '" + name +
                   "' (known: paper, random, recency, sink_recency, pooled)");
}

const char* RankingName(Ranking r) {
  switch (r) {
    case Ranking::kPaper:
      return "paper";
    case Ranking::kRandom:
      return "random";
    case Ranking::kRecency:
      return "recency";
    case Ranking::kSinkRecency:
      return "sink_recency";
    case Ranking::kPooled:
      return "pooled";
  }
  return "?";
}

namespace {
// A well-mixed 64-bit hash of x.
uint64_t Mix64(uint64_t x) { return SplitMix64Hash(x); }
}  // namespace

ChunkScores ScoreChunks(Ranking ranking, const std::vector<double>& importance,
                        const std::vector<double>& range, const std::vector<int32_t>& chunk_pos0,
                        int G, uint64_t seed, int sink_tokens) {
  const size_t n = chunk_pos0.size();
  ChunkScores s;
  switch (ranking) {
    case Ranking::kPaper:
    case Ranking::kPooled: {
      const std::vector<double> a =
          ranking == Ranking::kPooled ? MaxPool1d(importance, kPoolKernel) : importance;
      std::vector<double> av(a.size());
      for (size_t i = 0; i < a.size(); ++i) av[i] = a[i] * range[i];
      s.k = ChunkMeans(a, G);
      s.v = ChunkMeans(av, G);
      s.k.resize(n, 0.0);
      s.v.resize(n, 0.0);
      break;
    }
    case Ranking::kRandom:
      for (size_t c = 0; c < n; ++c) {
        const uint64_t h = Mix64(Mix64(seed) ^ static_cast<uint32_t>(chunk_pos0[c]));
        s.k.push_back(static_cast<double>(h >> 11) * 0x1.0p-53);  // [0, 1)
      }
      s.v = s.k;
      break;
    case Ranking::kRecency:
    case Ranking::kSinkRecency:
      for (size_t c = 0; c < n; ++c) s.k.push_back(static_cast<double>(chunk_pos0[c]));
      s.v = s.k;
      if (ranking == Ranking::kSinkRecency) sink_tokens = std::max(sink_tokens, 1);
      break;
  }
  // The sink chunks outrank everything (a finite top: scores stay comparable).
  constexpr double kSinkScore = 1e300;
  for (size_t c = 0; c < n; ++c) {
    if (chunk_pos0[c] < sink_tokens) s.k[c] = s.v[c] = kSinkScore;
  }
  return s;
}

std::vector<double> MaxPool1d(const std::vector<double>& x, int kernel) {
  const int n = static_cast<int>(x.size()), r = kernel / 2;
  std::vector<double> out(n);
  for (int i = 0; i < n; ++i) {
    double m = x[i];
    for (int j = std::max(0, i - r); j <= std::min(n - 1, i + r); ++j) m = std::max(m, x[j]);
    out[i] = m;
  }
  return out;
}

Result<std::vector<int32_t>> SnapKvSelect(const std::vector<double>& votes, int L, int window,
                                          int kernel, int64_t budget) {
  std::vector<int32_t> kept;
  if (budget >= L) {
    kept.resize(L);
    std::iota(kept.begin(), kept.end(), 0);
    return kept;
  }
  if (budget < window) {
    return MakeError("snapkv: budget of " + std::to_string(budget) + " tokens for a prompt of " +
                     std::to_string(L) + " is smaller than the observation window " +
                     std::to_string(window) + " (raise keep/bits or lower window)");
  }
  const int prefix = L - window;
  if (static_cast<int>(votes.size()) != prefix) {
    return MakeError("snapkv: " + std::to_string(votes.size()) + " votes for a prefix of " +
                     std::to_string(prefix) + " tokens");
  }
  const std::vector<double> pooled = MaxPool1d(votes, kernel);
  std::vector<int32_t> idx(prefix);
  std::iota(idx.begin(), idx.end(), 0);
  const int64_t k = std::min<int64_t>(budget - window, prefix);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return pooled[a] > pooled[b]; });
  kept.assign(idx.begin(), idx.begin() + k);
  for (int i = prefix; i < L; ++i) kept.push_back(i);
  std::sort(kept.begin(), kept.end());
  return kept;
}

std::vector<int64_t> PyramidBudgets(int64_t a, int n_layers, double beta) {
  if (n_layers <= 1) return {a};
  const double lo = static_cast<double>(a) / beta, hi = 2.0 * a - lo;
  std::vector<double> real(n_layers);
  for (int l = 0; l < n_layers; ++l) real[l] = hi - (hi - lo) * l / (n_layers - 1);
  std::vector<int64_t> out(n_layers);
  int64_t sum = 0;
  for (int l = 0; l < n_layers; ++l) {
    out[l] = static_cast<int64_t>(std::floor(real[l]));
    sum += out[l];
  }
  // Largest remainder: give the missing units to the largest fractional parts
  // (ties: shallower layer first).
  std::vector<int> order(n_layers);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    return real[x] - std::floor(real[x]) > real[y] - std::floor(real[y]);
  });
  for (int64_t i = 0; sum < a * n_layers; ++i, ++sum) ++out[order[i % n_layers]];
  return out;
}

std::vector<int32_t> H2oEvict(const std::vector<double>& scores, int64_t keep_total,
                              int64_t recent) {
  const int64_t n = static_cast<int64_t>(scores.size());
  std::vector<int32_t> evicted;
  if (n <= keep_total) return evicted;
  recent = std::min(recent, keep_total);
  const int64_t old = n - recent;  // candidates: [0, old)
  const int64_t heavy = keep_total - recent;
  if (heavy >= old) return evicted;
  std::vector<int32_t> idx(old);
  std::iota(idx.begin(), idx.end(), 0);
  // The `heavy` best by (score descending, older first): a strict total
  // order, so the kept set is unique and a partial selection (linear time;
  // a decode step evicts about one token of thousands) picks exactly the set
  // a full stable sort by score would.
  auto better = [&](int32_t a, int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  };
  std::nth_element(idx.begin(), idx.begin() + heavy, idx.end(), better);
  evicted.assign(idx.begin() + heavy, idx.end());
  std::sort(evicted.begin(), evicted.end());
  return evicted;
}

}  // namespace hqekv::policy
