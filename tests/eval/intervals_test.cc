// Interval math (eval/run/intervals.h), Pareto fronts and byte units of the
// report tables, and the independence of task instances across seeds and
// configurations (eval/run/suite.h InstanceSeed).
#include "eval/run/intervals.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "eval/report/report_tables.h"
#include "eval/run/suite.h"
#include "eval/run/tasks.h"
#include "toy_model.h"

namespace hqekv::eval {
namespace {

TEST(Intervals, WilsonMatchesPublishedValues) {
  // 8 of 10 at 95%: [0.4902, 0.9433] (Wilson 1927; e.g. Newcombe 1998, Table I method 3).
  Interval w = Wilson(8, 10);
  EXPECT_NEAR(w.lo, 0.4902, 5e-4);
  EXPECT_NEAR(w.hi, 0.9433, 5e-4);
  // 0 of 10: the lower end is 0, the upper one is not (the normal
  // approximation would give [0, 0]).
  w = Wilson(0, 10);
  EXPECT_DOUBLE_EQ(w.lo, 0);
  EXPECT_NEAR(w.hi, 0.2775, 5e-4);
  w = Wilson(10, 10);
  EXPECT_NEAR(w.lo, 0.7225, 5e-4);
  EXPECT_DOUBLE_EQ(w.hi, 1);
  // Narrower with more trials; the centre (p + z^2/2n) / (1 + z^2/n) is pulled
  // toward 1/2: 0.80192 / 1.00384 = 0.79885 for 800 of 1000.
  const Interval big = Wilson(800, 1000);
  EXPECT_LT(big.hi - big.lo, 0.06);
  EXPECT_NEAR((big.lo + big.hi) / 2, 0.79885, 1e-5);
  EXPECT_EQ(Wilson(0, 0).lo, 0);
  EXPECT_EQ(Wilson(0, 0).hi, 1);
  EXPECT_TRUE(Interval({0.1, 0.3}).Overlaps({0.25, 0.5}));
  EXPECT_FALSE(Interval({0.1, 0.2}).Overlaps({0.25, 0.5}));
}

TEST(Intervals, StandardErrorFromSums) {
  // {1, 2, 3, 4}: sample variance 5/3, se = sqrt(5/12).
  EXPECT_NEAR(StandardError(4, 10, 30), std::sqrt(5.0 / 12.0), 1e-12);
  EXPECT_EQ(StandardError(1, 3, 9), 0);
}

TEST(Ranking, ParetoFrontsByMemoryThenQuality) {
  // bits:    16    8     4     4     2     NaN
  // quality: 0.9   0.9   0.7   0.5   0.6   0.99
  const std::vector<int> f = ParetoFronts({16, 8, 4, 4, 2, NAN}, {0.9, 0.9, 0.7, 0.5, 0.6, 0.99});
  EXPECT_EQ(f, (std::vector<int>{2, 1, 1, 2, 1, 3}));
}

TEST(Ranking, BytesInReadableUnits) {
  EXPECT_EQ(Bytes(512), "512 B");
  EXPECT_EQ(Bytes(4096), "4.00 KiB");
  EXPECT_EQ(Bytes(12.5 * 1024 * 1024), "12.5 MiB");
}

// N seeds give N distinct instances in every cell and independent instances
// across depths and contexts; the paired design repeats them.
TEST(Seeds, IndependentAcrossConfigurationsUnlessPaired) {
  auto corpus = LoadCorpus("tinystories",
                           std::string(HQEKV_SOURCE_DIR) + "/data/text/tinystories_val_subset.txt");
  ASSERT_TRUE(corpus.ok()) << corpus.message();
  const TokenCounter count = [](const std::string& s) { return testing::WordCount(s); };
  for (bool paired : {false, true}) {
    Suite suite;
    suite.paired_seeds = paired;
    std::set<std::string> keys;
    int instances = 0;
    for (int ctx : {200, 300}) {
      for (double depth : {0.25, 0.75}) {
        QualityTask qt;
        qt.spec.kind = TaskKind::kPasskey;
        qt.spec.context_tokens = ctx;
        qt.spec.depth = depth;
        qt.corpus = "tinystories";
        qt.seeds = 3;
        std::set<std::string> in_cell;
        for (int i = 0; i < qt.seeds; ++i) {
          auto t = MakeTask(qt.spec, *corpus, InstanceSeed(suite, qt, i), count);
          ASSERT_TRUE(t.ok()) << t.message();
          in_cell.insert(t->answers.at(0));
          keys.insert(t->answers.at(0));
          ++instances;
        }
        EXPECT_EQ(in_cell.size(), 3u) << "3 seeds -> 3 distinct keys in a cell";
      }
    }
    if (paired) {
      EXPECT_EQ(keys.size(), 3u) << "paired: the same 3 keys in every cell";
    } else {
      EXPECT_EQ(keys.size(), static_cast<size_t>(instances)) << "12 cells x seeds, 12 keys";
    }
  }
}

}  // namespace
}  // namespace hqekv::eval

namespace hqekv::eval {
namespace {

// A copy passage never overshoots its span by more than half: with
// independent seeds every configuration of the paper suite's smallest copy
// cell (128 tokens, span 32) must fit, for many seeds.
TEST(Seeds, CopyPassagesFitTheirContext) {
  auto corpus = LoadCorpus("tinystories",
                           std::string(HQEKV_SOURCE_DIR) + "/data/text/tinystories_val_subset.txt");
  ASSERT_TRUE(corpus.ok()) << corpus.message();
  const TokenCounter count = [](const std::string& s) { return testing::WordCount(s); };
  QualityTask qt;
  qt.spec.kind = TaskKind::kCopy;
  qt.spec.context_tokens = 128;
  qt.spec.span_tokens = 32;
  qt.corpus = "tinystories";
  Suite suite;
  for (double depth : {0.1, 0.5, 0.9}) {
    qt.spec.depth = depth;
    for (int i = 0; i < 200; ++i) {
      auto t = MakeTask(qt.spec, *corpus, InstanceSeed(suite, qt, i), count);
      ASSERT_TRUE(t.ok()) << "depth " << depth << " seed " << i << ": " << t.message();
      EXPECT_LE(count(t->continuation), 48);
    }
  }
}

}  // namespace
}  // namespace hqekv::eval
