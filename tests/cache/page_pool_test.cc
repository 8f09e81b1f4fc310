#include "cache/page_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace hqekv::cache {
namespace {

struct Live {
  BlockRef ref;
  size_t bytes;
  uint8_t tag;
};

void Fill(PagePool& p, const Live& b) { std::memset(p.Data(b.ref), b.tag, b.bytes); }

bool Intact(const PagePool& p, const Live& b) {
  const uint8_t* d = p.Data(b.ref);
  for (size_t i = 0; i < b.bytes; ++i) {
    if (d[i] != b.tag) return false;
  }
  return true;
}

TEST(PagePool, CounterSeesEveryByteAndBlocksDoNotOverlap) {
  int64_t counter = 0;
  {
    PagePool pool(4096, 2, &counter);
    std::mt19937 rng(7);
    const size_t sizes[] = {2, 40, 512, 1000, 2048, 4096, 5000};  // 5000 > page: dedicated
    std::vector<Live> live;
    for (int step = 0; step < 4000; ++step) {
      if (live.empty() || rng() % 3 != 0) {
        Live b{{}, sizes[rng() % 7], static_cast<uint8_t>(rng())};
        b.ref = pool.Allocate(b.bytes);
        ASSERT_TRUE(b.ref.valid());
        EXPECT_EQ(reinterpret_cast<uintptr_t>(pool.Data(b.ref)) % 16, 0u);
        Fill(pool, b);
        live.push_back(b);
      } else {
        const size_t i = rng() % live.size();
        ASSERT_TRUE(Intact(pool, live[i])) << "block overwritten by another";
        pool.Free(live[i].ref, live[i].bytes);
        live[i] = live.back();
        live.pop_back();
      }
      EXPECT_EQ(counter, pool.held_bytes() + pool.table_bytes());
      ASSERT_GE(pool.held_bytes(), pool.requested_bytes());
    }
    int64_t req = 0;
    for (const Live& b : live) {
      EXPECT_TRUE(Intact(pool, b));
      req += static_cast<int64_t>(b.bytes);
    }
    EXPECT_EQ(pool.requested_bytes(), req);
    EXPECT_EQ(pool.live_blocks(), static_cast<int64_t>(live.size()));
    for (const Live& b : live) pool.Free(b.ref, b.bytes);
    // Nothing leaked: only the cached empty pages stay.
    EXPECT_EQ(pool.live_blocks(), 0);
    EXPECT_EQ(pool.requested_bytes(), 0);
    EXPECT_EQ(pool.pages_in_use(), 0);
    EXPECT_LE(pool.cached_pages(), 2);
    EXPECT_EQ(pool.held_bytes(), static_cast<int64_t>(pool.cached_pages()) * 4096);
    pool.ReleaseCached();
    EXPECT_EQ(pool.held_bytes(), 0);
    EXPECT_EQ(counter, pool.table_bytes());
  }
  EXPECT_EQ(counter, 0);  // the destructor returned everything
}

TEST(PagePool, FreedSpaceIsReusedAcrossSizeClasses) {
  int64_t counter = 0;
  PagePool pool(4096, 1, &counter);
  // Fill 8 pages with 1 KiB blocks, free them all, then allocate 512-byte
  // blocks: the held bytes must not grow beyond the first peak.
  std::vector<BlockRef> a;
  for (int i = 0; i < 32; ++i) a.push_back(pool.Allocate(1024));
  EXPECT_EQ(pool.pages_in_use(), 8);
  const int64_t peak = pool.held_bytes();
  for (BlockRef r : a) pool.Free(r, 1024);
  EXPECT_EQ(pool.pages_in_use(), 0);
  EXPECT_EQ(pool.held_bytes(), 4096);  // one cached page
  std::vector<BlockRef> b;
  for (int i = 0; i < 64; ++i) b.push_back(pool.Allocate(512));
  EXPECT_EQ(pool.held_bytes(), peak);
  EXPECT_EQ(pool.pages_in_use(), 8);
  // Same class: a freed block is handed out again, no new page.
  pool.Free(b[5], 512);
  const BlockRef again = pool.Allocate(512);
  EXPECT_EQ(again.page(), b[5].page());
  EXPECT_EQ(again.unit(), b[5].unit());
  EXPECT_EQ(pool.held_bytes(), peak);
}

TEST(PagePool, BlockSizeRoundsTo16) {
  EXPECT_EQ(PagePool::BlockSize(1), 16u);
  EXPECT_EQ(PagePool::BlockSize(16), 16u);
  EXPECT_EQ(PagePool::BlockSize(17), 32u);
  int64_t counter = 0;
  PagePool pool(1000, 0, &counter);  // rounded up to a multiple of 64
  EXPECT_EQ(pool.page_bytes(), 1024u);
}

}  // namespace
}  // namespace hqekv::cache
