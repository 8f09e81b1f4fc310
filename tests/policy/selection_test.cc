#include "policy/selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace hqekv::policy {
namespace {

TEST(Selection, ImportanceIsAMeanOverTheQueriesThatSeeTheToken) {
  // 25 tokens at positions 0..24; the last 20 queries are positions 5..24.
  std::vector<int32_t> tpos(25), qpos(20);
  std::iota(tpos.begin(), tpos.end(), 0);
  std::iota(qpos.begin(), qpos.end(), 5);
  std::vector<double> sum(25, 2.0);
  const auto a = NormalizeImportance(sum, tpos, qpos);
  EXPECT_DOUBLE_EQ(a[0], 2.0 / 20);  // every query sees it: min(20, 25 - 0)
  EXPECT_DOUBLE_EQ(a[5], 2.0 / 20);  // min(20, 20)
  EXPECT_DOUBLE_EQ(a[6], 2.0 / 19);  // min(20, 19)
  EXPECT_DOUBLE_EQ(a[24], 2.0 / 1);  // only its own query
  // Gaps in positions (evicted tokens) do not change the count of queries.
  EXPECT_DOUBLE_EQ(NormalizeImportance({3.0}, {100}, {99, 100, 101})[0], 1.5);
  EXPECT_DOUBLE_EQ(NormalizeImportance({3.0}, {102}, {99, 100, 101})[0], 0.0);
}

// Issue 12: with min_count = m the newest tokens are not divided by the few
// queries that see them.
TEST(Selection, ImportanceCountFloor) {
  std::vector<int32_t> tpos(25), qpos(20);
  std::iota(tpos.begin(), tpos.end(), 0);
  std::iota(qpos.begin(), qpos.end(), 5);
  std::vector<double> sum(25, 2.0);
  const auto a = NormalizeImportance(sum, tpos, qpos, 20);
  EXPECT_DOUBLE_EQ(a[0], 2.0 / 20);
  EXPECT_DOUBLE_EQ(a[6], 2.0 / 20);
  EXPECT_DOUBLE_EQ(a[24], 2.0 / 20);
  EXPECT_DOUBLE_EQ(NormalizeImportance({3.0}, {102}, {99, 100, 101}, 20)[0], 0.0);  // unseen
}

TEST(Selection, RankingNames) {
  for (const char* n : {"paper", "random", "recency", "sink_recency", "pooled"}) {
    auto r = ParseRanking(n);
    ASSERT_TRUE(r.ok()) << n;
    EXPECT_STREQ(RankingName(*r), n);
  }
  EXPECT_NE(ParseRanking("h2o").message().find("known: paper"), std::string::npos);
}

TEST(Selection, ChunkScoresPerRanking) {
  // 3 chunks of G = 4 tokens at positions 0, 4, 8.
  const std::vector<double> a = {0, 0, 0, 0.4, 0.1, 0.1, 0.1, 0.1, 0, 0.2, 0, 0};
  const std::vector<double> range(12, 2.0);
  const std::vector<int32_t> pos0 = {0, 4, 8};
  ChunkScores s = ScoreChunks(Ranking::kPaper, a, range, pos0, 4, 1, 0);
  EXPECT_EQ(s.k, (std::vector<double>{0.1, 0.1, 0.05}));
  EXPECT_EQ(s.v, (std::vector<double>{0.2, 0.2, 0.1}));
  // Pooled (kernel 7): 0.4 spreads over positions 0..6, 0.2 over 6..11.
  s = ScoreChunks(Ranking::kPooled, a, range, pos0, 4, 1, 0);
  EXPECT_DOUBLE_EQ(s.k[0], 0.4);
  EXPECT_DOUBLE_EQ(s.k[1], (0.4 * 3 + 0.2) / 4);
  EXPECT_DOUBLE_EQ(s.k[2], 0.2);
  s = ScoreChunks(Ranking::kRecency, a, range, pos0, 4, 1, 0);
  EXPECT_EQ(s.k, (std::vector<double>{0, 4, 8}));
  EXPECT_EQ(s.v, s.k);
  const ChunkScores r1 = ScoreChunks(Ranking::kRandom, a, range, pos0, 4, 1, 0);
  const ChunkScores r1b = ScoreChunks(Ranking::kRandom, {}, {}, pos0, 4, 1, 0);
  const ChunkScores r2 = ScoreChunks(Ranking::kRandom, a, range, pos0, 4, 2, 0);
  EXPECT_EQ(r1.k, r1b.k);  // fixed per chunk: the same at every event
  EXPECT_NE(r1.k, r2.k);   // and per seed (layer / unit)
  for (double x : r1.k) {
    EXPECT_GE(x, 0.0);
    EXPECT_LT(x, 1.0);
  }
}

// The sink chunk outranks every other chunk, for every ranking;
// sink_recency protects the first chunk even with sink = 0.
TEST(Selection, SinkChunkRanksFirst) {
  const std::vector<double> a = {0, 0, 0, 0, 0.1, 0.1, 0.1, 0.1, 0.9, 0.9, 0.9, 0.9};
  const std::vector<double> range(12, 1.0);
  const std::vector<int32_t> pos0 = {0, 4, 8};
  for (Ranking r : {Ranking::kPaper, Ranking::kRandom, Ranking::kRecency, Ranking::kSinkRecency,
                    Ranking::kPooled}) {
    const ChunkScores s = ScoreChunks(r, a, range, pos0, 4, 7, 4);
    EXPECT_GT(s.k[0], s.k[1]) << RankingName(r);
    EXPECT_GT(s.k[0], s.k[2]) << RankingName(r);
    EXPECT_GT(s.v[0], s.v[2]) << RankingName(r);
  }
  EXPECT_LT(ScoreChunks(Ranking::kRecency, a, range, pos0, 4, 7, 0).k[0], 4);
  EXPECT_GT(ScoreChunks(Ranking::kSinkRecency, a, range, pos0, 4, 7, 0).k[0], 8);
  // After evictions the first live chunk may start past the sink: no protection.
  EXPECT_LT(ScoreChunks(Ranking::kPaper, a, range, {32, 36, 40}, 4, 7, 4).k[0], 0.5);
}

TEST(Selection, ValueRangeSumsOverHeads) {
  const float v[2][4] = {{1, -2, 3, 0}, {0.5f, 0.5f, 0.5f, 0.5f}};
  EXPECT_DOUBLE_EQ(ValueRange(&v[0][0], 2, 4), 5.0);
  EXPECT_DOUBLE_EQ(ValueRange(&v[1][0], 1, 4), 0.0);
}

TEST(Selection, ChunkMeans) {
  std::vector<double> s(70);
  std::iota(s.begin(), s.end(), 0.0);
  const auto m = ChunkMeans(s, 32);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_DOUBLE_EQ(m[0], 15.5);
  EXPECT_DOUBLE_EQ(m[1], 47.5);
  EXPECT_DOUBLE_EQ(m[2], 66.5);  // 64..69
}

TEST(Selection, MaxPool) {
  const std::vector<double> x = {0, 5, 0, 0, 0, 0, 1};
  EXPECT_EQ(MaxPool1d(x, 3), (std::vector<double>{5, 5, 5, 0, 0, 1, 1}));
  EXPECT_EQ(MaxPool1d(x, 1), x);
  EXPECT_EQ(MaxPool1d(x, 7), (std::vector<double>{5, 5, 5, 5, 5, 1, 1}));
}

TEST(Selection, SnapKvKeepsPooledTopAndTheWindow) {
  // L = 12, window 4: prefix of 8 votes; one heavy token at 2 and a weaker
  // one at 6. budget 7 -> 3 from the prefix. Pooling with kernel 3 spreads 2's
  // vote to 1 and 3, which then outrank 6.
  std::vector<double> votes = {0, 0, 10, 0, 0, 0, 4, 0};
  auto k = SnapKvSelect(votes, 12, 4, 3, 7);
  ASSERT_TRUE(k.ok()) << k.message();
  EXPECT_EQ(*k, (std::vector<int32_t>{1, 2, 3, 8, 9, 10, 11}));
  // Without pooling: the two heavy tokens and the next (tie -> oldest, 0).
  k = SnapKvSelect(votes, 12, 4, 1, 7);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, (std::vector<int32_t>{0, 2, 6, 8, 9, 10, 11}));
  // Budget >= L keeps everything; below the window is an error.
  EXPECT_EQ(SnapKvSelect(votes, 12, 4, 3, 12)->size(), 12u);
  auto e = SnapKvSelect(votes, 12, 4, 3, 3);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("smaller than the observation window"), std::string::npos);
}

TEST(Selection, PyramidBudgetsShrinkWithDepthAndKeepTheTotal) {
  const auto b = PyramidBudgets(100, 5, 20);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_EQ(std::accumulate(b.begin(), b.end(), int64_t{0}), 500);
  // first = 2a - a/beta = 195, last = a/beta = 5, linear steps of 47.5
  EXPECT_EQ(b.front(), 195);
  EXPECT_EQ(b.back(), 5);
  for (size_t l = 1; l < b.size(); ++l) EXPECT_LT(b[l], b[l - 1]);
  EXPECT_EQ(PyramidBudgets(7, 1, 20), (std::vector<int64_t>{7}));
  const auto c = PyramidBudgets(33, 6, 3);
  EXPECT_EQ(std::accumulate(c.begin(), c.end(), int64_t{0}), 198);
}

TEST(Selection, H2oKeepsRecentAndHeavy) {
  // 10 tokens, keep 5 with 2 recent: heavy = top 3 of tokens 0..7.
  const std::vector<double> s = {9, 1, 8, 1, 1, 7, 1, 1, 0, 0};
  EXPECT_EQ(H2oEvict(s, 5, 2), (std::vector<int32_t>{1, 3, 4, 6, 7}));
  EXPECT_TRUE(H2oEvict(s, 10, 2).empty());
  // Ties go to the older token.
  EXPECT_EQ(H2oEvict({1, 1, 1, 1}, 3, 1), (std::vector<int32_t>{2}));
  // No heavy budget: only the recent window survives.
  EXPECT_EQ(H2oEvict({5, 5, 5, 5}, 2, 2), (std::vector<int32_t>{0, 1}));
}

// H2oEvict selects the heavy set in linear time; the oracle is its
// definition, a stable sort by score (descending) of the candidates, on
// scores with many ties and every keep / recent split of small sizes.
TEST(Selection, H2oEvictMatchesTheStableSortDefinition) {
  std::mt19937 rng(7);
  int cases = 0;
  for (int n : {1, 2, 5, 17, 64, 301}) {
    std::uniform_int_distribution<int> level(0, n < 20 ? 3 : 40);  // ties
    std::vector<double> s(n);
    for (double& x : s) x = level(rng) * 0.25;
    for (int64_t keep = 0; keep <= n + 1; keep += std::max(1, n / 7)) {
      for (int64_t recent : {int64_t{0}, int64_t{1}, keep / 2, keep}) {
        std::vector<int32_t> want;
        if (n > keep) {
          const int64_t r = std::min(recent, keep), old = n - r, heavy = keep - r;
          std::vector<int32_t> idx(old);
          std::iota(idx.begin(), idx.end(), 0);
          std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return s[a] > s[b]; });
          want.assign(idx.begin() + std::min(heavy, old), idx.end());
          std::sort(want.begin(), want.end());
        }
        ASSERT_EQ(H2oEvict(s, keep, recent), want)
            << "n=" << n << " keep=" << keep << " recent=" << recent;
        ++cases;
      }
    }
  }
  EXPECT_GT(cases, 100);
}

}  // namespace
}  // namespace hqekv::policy
