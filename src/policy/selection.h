// Scoring and selection rules of the policies, as pure functions over plain
// vectors (no cache state), so each is unit-tested against its definition.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace hqekv::policy {

// ---- HqeKV importance (digest §2) -------------------------------------------

// a_i = sum_i / c_i, c_i = number of the recorded queries that can see token
// i (query position >= token position): min(m, N - i) when the last m queries
// are recorded, as in the reference. Tokens no recorded query sees get 0.
// sum: [n] accumulated attention (summed over query heads); token_pos: [n];
// query_pos: the recorded queries' positions (any order).
std::vector<double> NormalizeImportance(const std::vector<double>& sum,
                                        const std::vector<int32_t>& token_pos,
                                        const std::vector<int32_t>& query_pos);

// Range of one token's V over head_dim, summed over the heads given:
// sum_h (max_d v[h][d] - min_d v[h][d]). v: [n_heads][D].
double ValueRange(const float* v, int n_heads, int D);

// Mean of each run of G consecutive scores (the last run may be shorter).
std::vector<double> ChunkMeans(const std::vector<double>& token_scores, int G);

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
