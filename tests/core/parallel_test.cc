#include "core/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace hqekv {
namespace {

TEST(Parallel, CoversRangeExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    SetNumThreads(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      for (int rep = 0; rep < 20; ++rep) {
        ParallelFor(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
      }
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 20) << threads << " " << n;
    }
  }
  SetNumThreads(2);
}

TEST(Parallel, NestedCallsRunInline) {
  SetNumThreads(2);
  std::atomic<int64_t> sum{0};
  ParallelFor(4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      ParallelFor(10, [&](int64_t b2, int64_t e2) { sum += e2 - b2; });
    }
  });
  EXPECT_EQ(sum.load(), 40);
}

}  // namespace
}  // namespace hqekv
