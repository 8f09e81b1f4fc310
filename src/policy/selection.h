// Scoring and selection rules of the policies, as pure functions over plain
// vectors (no cache state), so each is unit-tested against its definition.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace hqekv::policy {

// ---- HqeKV importance (docs/policies.md "HqeKV") -----------------------------

// a_i = sum_i / max(c_i, min_count), c_i = number of the recorded queries
// that can see token i (query position >= token position): min(m, N - i)
// when the last m queries are recorded. Tokens no recorded query sees get 0.
// min_count = 1 is the reference's rule; it divides the newest tokens' sums
// by 1, 2, ... and made the newest chunk rank first in most layers on refmodel-4l,
// so HqekvCache passes min_count = m (the window's mean: a query that cannot
// see a token gives it 0).
// sum: [n] accumulated attention (summed over query heads); token_pos: [n];
// query_pos: the recorded queries' positions (any order).
std::vector<double> NormalizeImportance(const std::vector<double>& sum,
                                        const std::vector<int32_t>& token_pos,
                                        const std::vector<int32_t>& query_pos, int min_count = 1);

// Range of one token's V over head_dim, summed over the heads given:
// sum_h (max_d v[h][d] - min_d v[h][d]). v: [n_heads][D].
double ValueRange(const float* v, int n_heads, int D);

// Mean of each run of G consecutive scores (the last run may be shorter).
std::vector<double> ChunkMeans(const std::vector<double>& token_scores, int G);

// ---- HqeKV chunk ranking (the `ranking=` ablation switch) ---------------

// paper:        K by the chunk mean of a_i, V by the chunk mean of a_i R_i;
// random:       a fixed pseudo-random score per chunk (hash of seed, pos0);
// recency:      newer chunks first (score = first position);
// sink_recency: recency with at least the first chunk protected;
// pooled:       SnapKV's window votes: a_i max-pooled over kPoolKernel
//               tokens, then chunk means (V: pooled a_i x R_i).
enum class Ranking { kPaper, kRandom, kRecency, kSinkRecency, kPooled };
inline constexpr int kPoolKernel = 7;
// "paper", "random", "recency", "sink_recency", "pooled"; others: error.
Result<Ranking> ParseRanking(const std::string& name);
const char* RankingName(Ranking r);

// Scores of the live chunks of one ranking unit, higher = keep better.
//   importance, range: [n_chunks * G] a_i and Range(V) of the chunks' tokens
//                      (walk order; only read by paper and pooled);
//   chunk_pos0:        [n_chunks] first position of each chunk;
//   seed:              varies the random ranking per layer / unit;
//   sink_tokens:       chunks holding a position < sink_tokens outrank every
//                      other chunk (the attention sink; every ranking, 0 =
//                      off; sink_recency uses at least 1).
struct ChunkScores {
  std::vector<double> k, v;
};
ChunkScores ScoreChunks(Ranking ranking, const std::vector<double>& importance,
                        const std::vector<double>& range, const std::vector<int32_t>& chunk_pos0,
                        int G, uint64_t seed, int sink_tokens);

// ---- SnapKV / PyramidKV ---------------------------------------------------

// out[i] = max of x[j] for |j - i| <= kernel / 2, 0 <= j < n (1-D max pooling,
// stride 1, same length; padding never wins). kernel >= 1, odd.
std::vector<double> MaxPool1d(const std::vector<double>& x, int kernel);

// SnapKV selection for one KV head of a prompt of L tokens: the last `window`
// tokens are kept; among the first L - window, the `budget - window` with the
// highest pooled votes (votes: [L - window], attention of the window queries
// summed over them and the head's query heads). Returns the kept token
// indices, ascending. budget >= L keeps everything; budget < window: error.
Result<std::vector<int32_t>> SnapKvSelect(const std::vector<double>& votes, int L, int window,
                                          int kernel, int64_t budget);

// PyramidKV per-layer budgets beyond the window (PyramidKV's allocation): with
// a = mean_extra, the smallest (last layer) is a / beta, the largest (first
// layer) 2a - a / beta, linear in depth; rounded by largest remainder so the
// sum is exactly n_layers * a. n_layers == 1: {a}.
std::vector<int64_t> PyramidBudgets(int64_t mean_extra, int n_layers, double beta);

// ---- H2O ------------------------------------------------------------------

// Which of n kept tokens (oldest first) H2O evicts to fit keep_total tokens:
// the newest `recent` stay, then the highest cumulative scores among the rest
// (ties: older first); returns the evicted indices, ascending.
std::vector<int32_t> H2oEvict(const std::vector<double>& scores, int64_t keep_total,
                              int64_t recent);

}  // namespace hqekv::policy
