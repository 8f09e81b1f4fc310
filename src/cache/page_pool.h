// Storage for the mixed-precision KV store: a slab allocator over fixed-size
// pages, plus an allocator adaptor that counts every byte of the store's
// containers. Together they let the store report the bytes it really holds
// and let a test prove that the report is exact.
//
// Pages: every page is `page_bytes` long and belongs to one size class (one
// block size, a multiple of 16 bytes); a page holds floor(page_bytes / block)
// blocks, threaded on an intrusive free list stored inside the free blocks
// themselves (no side table). A page whose last block is freed leaves its
// class and goes to a small cache of empty pages (reused by any class) or back
// to the system when the cache is full, so space freed by eviction or by a
// downgrade to a smaller format is reused by whatever is allocated next.
// Blocks larger than a page get a dedicated allocation of their own size.
//
// Not thread-safe: one pool per layer, mutated by one thread at a time; reads
// through Data() may run concurrently with each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace hqekv::cache {

// Counts the bytes currently allocated through it (an int64 owned by the
// caller). Used for every std::vector of the store, so that the store's
// structural accounting can be checked against what was really allocated.
template <class T>
struct CountedAllocator {
  using value_type = T;
  int64_t* counter = nullptr;

  CountedAllocator() = default;
  explicit CountedAllocator(int64_t* c) : counter(c) {}
  template <class U>
  CountedAllocator(const CountedAllocator<U>& o) : counter(o.counter) {}  // NOLINT: rebind

  T* allocate(size_t n) {
    if (counter) *counter += static_cast<int64_t>(n * sizeof(T));
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) {
    if (counter) *counter -= static_cast<int64_t>(n * sizeof(T));
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const CountedAllocator<U>& o) const { return counter == o.counter; }
};

template <class T>
using CountedVector = std::vector<T, CountedAllocator<T>>;

// Bytes a CountedVector really holds (its capacity, not its size).
template <class T>
int64_t CapacityBytes(const CountedVector<T>& v) {
  return static_cast<int64_t>(v.capacity() * sizeof(T));
}

// Handle of one block: page slot + byte offset inside the page. 8 bytes, the
// store keeps these instead of pointers so that chunk records stay small.
struct BlockRef {
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  uint32_t page = kNone;
  uint32_t offset = 0;
  bool valid() const { return page != kNone; }
};

class PagePool {
 public:
  // page_bytes: a multiple of 64, >= 256. max_cached_pages: how many empty
  // pages are kept for reuse instead of being returned to the system.
  // counter: receives +/- every byte the pool allocates (pages and tables).
  PagePool(size_t page_bytes, int max_cached_pages, int64_t* counter);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // A block of at least `bytes` bytes (bytes > 0), 16-byte aligned. Returns
  // an invalid ref when the system is out of memory.
  BlockRef Allocate(size_t bytes);
  // `bytes` must be the value passed to Allocate for this block.
  void Free(BlockRef b, size_t bytes);

  uint8_t* Data(BlockRef b) { return pages_[b.page].data + b.offset; }
  const uint8_t* Data(BlockRef b) const { return pages_[b.page].data + b.offset; }

  size_t page_bytes() const { return page_bytes_; }
  // Page memory held: pages in use, cached empty pages and dedicated blocks.
  int64_t held_bytes() const { return held_bytes_; }
  // Sum of the sizes passed to Allocate for the live blocks.
  int64_t requested_bytes() const { return requested_bytes_; }
  // Capacity of the pool's own tables (page table, classes, free slots).
  int64_t table_bytes() const;
  int64_t live_blocks() const { return live_blocks_; }
  int pages_in_use() const { return pages_in_use_; }
  int cached_pages() const { return static_cast<int>(cached_.size()); }
  // Returns every cached empty page to the system.
  void ReleaseCached();

  // Rounded block size a request of `bytes` gets (16-byte multiple).
  static size_t BlockSize(size_t bytes) { return (bytes + 15) / 16 * 16; }

 private:
  static constexpr int32_t kNil = -1;
  struct Page {
    uint8_t* data = nullptr;
    size_t bytes = 0;         // allocation size (page_bytes_ or a dedicated block)
    int32_t size_class = kNil;// kNil: dedicated block or free slot
    int32_t used = 0;         // live blocks
    int32_t free_head = kNil; // offset of the first free block (intrusive list)
    uint32_t bump = 0;        // blocks below this offset have been handed out once
    int32_t prev = kNil, next = kNil;  // neighbours in the class's partial-page list
  };
  struct SizeClass {
    uint32_t block = 0;       // bytes
    int32_t partial = kNil;   // first page with a free block
  };

  uint32_t NewPageSlot();
  uint8_t* SystemAlloc(size_t bytes);
  void SystemFree(uint8_t* p, size_t bytes);
  int32_t ClassFor(uint32_t block);
  void Unlink(uint32_t page);
  void PushPartial(uint32_t page);

  size_t page_bytes_;
  int max_cached_;
  int64_t* counter_;
  CountedVector<Page> pages_;
  CountedVector<SizeClass> classes_;
  CountedVector<uint32_t> free_slots_;  // unused entries of pages_
  CountedVector<uint32_t> cached_;      // empty pages kept for reuse (slots in pages_)
  int64_t held_bytes_ = 0;
  int64_t requested_bytes_ = 0;
  int64_t live_blocks_ = 0;
  int pages_in_use_ = 0;
};

}  // namespace hqekv::cache
