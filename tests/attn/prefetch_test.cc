// attn/prefetch.h: the page touches that walk the page table before the
// line prefetches of a later chunk or page (one load per 4 KiB page).
#include "attn/prefetch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

namespace hqekv::attn {
namespace {

std::vector<size_t> Touches(uintptr_t start, size_t n) {
  std::vector<size_t> offs;
  ForEachPageTouch(start, n, [&](size_t o) { offs.push_back(o); });
  return offs;
}

TEST(PageTouches, EveryOverlappedPageOnceAndNothingOutside) {
  for (uintptr_t start : {uintptr_t{0x10000}, uintptr_t{0x10001}, uintptr_t{0x10FFF},
                          uintptr_t{0x10800}, uintptr_t{0x10040}}) {
    for (size_t n : {size_t{1}, size_t{64}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{8192},
                     size_t{8193}, size_t{12288}, size_t{65536 + 17}}) {
      SCOPED_TRACE("start=" + std::to_string(start) + " n=" + std::to_string(n));
      const std::vector<size_t> offs = Touches(start, n);
      std::set<uintptr_t> want, got;
      for (uintptr_t a = start & ~uintptr_t{4095}; a < start + n; a += 4096) want.insert(a);
      for (size_t i = 0; i < offs.size(); ++i) {
        ASSERT_LT(offs[i], n);
        if (i > 0) ASSERT_GE(offs[i], offs[i - 1]);
        got.insert((start + offs[i]) & ~uintptr_t{4095});
      }
      EXPECT_EQ(got, want);
      // The two ends always; one more load per page between them, no more.
      EXPECT_EQ(offs.front(), 0u);
      EXPECT_EQ(offs.back(), n - 1);
      EXPECT_EQ(offs.size(), want.size() <= 2 ? 2u : want.size());
    }
  }
}

TEST(PageTouches, BlocksOnTwoPagesGetOnlyTheirEnds) {
  // The 8-bit tiers' 4 KiB code blocks: the same two loads as before the
  // page walk covered middle pages (wave 17).
  EXPECT_EQ(Touches(0x20010, 4096), (std::vector<size_t>{0, 4095}));
  // An 8 KiB fp16 block starting 16 bytes into a page spans 3 pages.
  EXPECT_EQ(Touches(0x20010, 8192), (std::vector<size_t>{0, 4096 - 16, 8191}));
}

TEST(PageTouches, PrefetchBytesReadsOnlyInsideTheRange) {
  // Under ASan a touch outside [p, p + n) is a reported error.
  for (size_t n : {size_t{0}, size_t{1}, size_t{100}, size_t{4096}, size_t{9000}}) {
    std::vector<uint8_t> buf(n + 1);
    PrefetchBytes(buf.data() + 1, n);
  }
}

}  // namespace
}  // namespace hqekv::attn
