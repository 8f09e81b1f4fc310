// Storage for the mixed-precision KV store: one shared arena of fixed-size
// pages for every block size, plus an allocator adaptor that counts every byte
// of the store's containers. Together they let the store report the bytes it
// really holds and let a test prove that the report is exact.
//
// Pages: every page is `page_bytes` long and split into 64 units (at least 16
// bytes each); one 64-bit mask per page says which units are in use. A block
// takes k = ceil(bytes / unit) contiguous units, aligned to the largest power
// of two dividing k, in ANY page with room: blocks of every size share pages
// (an earlier pool kept one size class per page, so every format mixed in
// left its own partly filled page: up to 1 bit per element of slack for
// HqeKV's five tiers at 2048 tokens). A page whose last block is freed goes
// to a small cache of empty pages or back to the system. Blocks larger than a
// page get a dedicated allocation of their own (unit-rounded) size.
//
// Not thread-safe: one pool per layer, mutated by one thread at a time; reads
// through Data() may run concurrently with each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace hqekv::cache {

class StateReader;
class StateWriter;

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
  bool operator==(const CountedAllocator<U>& o) const {
    return counter == o.counter;
  }
};

template <class T>
using CountedVector = std::vector<T, CountedAllocator<T>>;

// Bytes a CountedVector really holds (its capacity, not its size).
template <class T>
int64_t CapacityBytes(const CountedVector<T>& v) {
  return static_cast<int64_t>(v.capacity() * sizeof(T));
}

// Handle of one block: page slot and unit inside the page in one 27-bit
// value, so that the store's chunk record packs four of them, with its
// header bits, into 16 bytes (an earlier ref was a page + byte offset pair of
// 8 bytes). A dedicated block is unit 0 of its own slot.
struct BlockRef {
  static constexpr int kUnitBits = 6;  // 64 units per page
  static constexpr int kBits = 27;
  static constexpr uint32_t kNone = (uint32_t{1} << kBits) - 1;
  // Page slots are < kMaxPages: 2M pages per pool (2 GiB of 1 KiB pages,
  // 16 GiB of 8 KiB pages); past it Allocate reports out of memory.
  static constexpr uint32_t kMaxPages = kNone >> kUnitBits;
  uint32_t id = kNone;

  BlockRef() = default;
  BlockRef(uint32_t page, uint32_t unit) : id(page << kUnitBits | unit) {}
  static BlockRef FromId(uint32_t id) {
    BlockRef b;
    b.id = id;
    return b;
  }
  bool valid() const { return id != kNone; }
  uint32_t page() const { return id >> kUnitBits; }
  uint32_t unit() const { return id & ((1u << kUnitBits) - 1); }
  bool operator==(const BlockRef& o) const { return id == o.id; }
};

// The bits of units [unit, unit + k) of a page's 64-unit occupancy mask (k <= 64).
inline uint64_t RunMask(int unit, int k) {
  return (k >= 64 ? ~uint64_t{0} : (uint64_t{1} << k) - 1) << unit;
}

class PagePool {
 public:
  // page_bytes: a multiple of 64, >= 256 (rounded up otherwise). max_cached_pages:
  // how many empty pages are kept for reuse instead of being returned to the
  // system. counter: receives +/- every byte the pool allocates (pages and tables).
  PagePool(size_t page_bytes, int max_cached_pages, int64_t* counter);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // A block of at least `bytes` bytes (bytes > 0), 16-byte aligned. Returns
  // an invalid ref when the system is out of memory.
  BlockRef Allocate(size_t bytes);
  // `bytes` must be the value passed to Allocate for this block.
  void Free(BlockRef b, size_t bytes);

  uint8_t* Data(BlockRef b) { return pages_[b.page()].data + b.unit() * unit_; }
  const uint8_t* Data(BlockRef b) const { return pages_[b.page()].data + b.unit() * unit_; }

  size_t page_bytes() const { return page_bytes_; }
  size_t unit_bytes() const { return unit_; }
  // Page memory held: pages in use, cached empty pages and dedicated blocks.
  int64_t held_bytes() const { return held_bytes_; }
  // Sum of the sizes passed to Allocate for the live blocks.
  int64_t requested_bytes() const { return requested_bytes_; }
  // Capacity of the pool's own tables (page table, partial list, free slots).
  int64_t table_bytes() const;
  int64_t live_blocks() const { return live_blocks_; }
  int pages_in_use() const { return pages_in_use_; }
  int cached_pages() const { return static_cast<int>(cached_.size()); }
  // Returns every cached empty page to the system and trims the tables to
  // the slots in use (call between bursts of allocation, e.g. after a
  // compression event).
  void ReleaseCached();
  // True when the page table holds many more slots than pages (a burst of
  // allocation, e.g. fp16 chunks re-quantized to 2 bits, left it sparse).
  bool SparseTable() const;
  // Moves the pages of high table slots into free low slots (no data moves:
  // only the table entries) and trims the table. remap[old slot] = new slot
  // for every slot that was in use; the caller must rewrite every BlockRef.
  void CompactTable(std::vector<uint32_t>* remap);
  // Exchanges the contents of two pools with the same counter.
  void Swap(PagePool& o);

  // The pool as held (page_pool_state.cc): the page table with its masks,
  // the partial / free / cached lists (capacities too) and the bytes of every
  // used unit (a dedicated block whole; cached empty pages hold no data).
  void SaveState(StateWriter& w) const;
  // Into an empty pool of the same page size; afterwards the pool holds the
  // same bytes and places later blocks where the saved one would. False,
  // with the reason in *why, on a short or inconsistent input.
  bool LoadState(StateReader& r, std::string* why);
  // True when b is a block of at least `bytes` inside a live page.
  bool Holds(BlockRef b, size_t bytes) const;
  // Marks the units of block b in `seen`, one
  // mask per page slot (sized by the caller to the slot count, all 0); false
  // when a unit is marked twice. With OccupancyMatches afterwards, a loaded
  // store proves that its references cover the pool exactly (no block shared
  // by two chunks, none lost), so later frees cannot corrupt the pool.
  bool MarkUnits(BlockRef b, size_t bytes, std::vector<uint64_t>* seen) const;
  bool OccupancyMatches(const std::vector<uint64_t>& seen) const;
  size_t page_slots() const { return pages_.size(); }

  // The unit of a pool of `page_bytes` pages (as the constructor rounds it).
  static size_t UnitFor(size_t page_bytes);
  // Rounded block size a request of `bytes` gets in a pool whose unit is 16
  // bytes (the smallest unit; 16-byte multiples).
  static size_t BlockSize(size_t bytes) { return (bytes + 15) / 16 * 16; }

 private:
  static constexpr int32_t kNil = -1;
  struct Page {  // 24 bytes
    uint8_t* data = nullptr;
    uint64_t used = 0;       // bit u set = unit u in use (shared pages)
    uint32_t bytes = 0;      // allocation size; 0 = free slot
    int32_t partial = kNil;  // index in partial_ (a page with a free unit), or kNil
  };

  uint32_t NewPageSlot();
  uint8_t* SystemAlloc(size_t bytes);
  void SystemFree(uint8_t* p, size_t bytes);
  bool Dedicated(const Page& p) const { return p.bytes != page_bytes_; }
  void AddPartial(uint32_t page);
  void RemovePartial(uint32_t page);
  void ReleaseSlot(uint32_t page);
  // First unit of a free aligned run of k units in a page whose used units
  // are `used`, or -1; the one inside the shortest maximal free run (its
  // length in *run_len).
  int FindRun(uint64_t used, int k, int* run_len) const;
  int Units(size_t bytes) const { return static_cast<int>((bytes + unit_ - 1) / unit_); }
  // A page with a free run of `k` units (its first unit in *u): the tightest
  // fit among the partial pages, then the fullest, else a cached or new
  // page. kNil when out of memory.
  int32_t PickPage(int k, int* u);
  void MarkUsed(uint32_t page, int unit, int k);
  // Clears k units from `unit` of shared page `page`; an emptied page is
  // cached or given back.
  void ReleaseUnits(uint32_t page, int unit, int k);
  // A dedicated page of `size` bytes; kNil when out of memory.
  int32_t NewDedicated(size_t size);

  size_t page_bytes_;
  size_t unit_;
  int units_;           // units per page (<= 64)
  uint64_t all_units_;  // mask of the page's units
  int max_cached_;
  int64_t* counter_;
  CountedVector<Page> pages_;
  CountedVector<uint32_t> partial_;     // pages with a free unit (not dedicated)
  CountedVector<uint32_t> free_slots_;  // unused entries of pages_
  CountedVector<uint32_t> cached_;      // empty pages kept for reuse (slots in pages_)
  int64_t held_bytes_ = 0;
  int64_t requested_bytes_ = 0;
  int64_t live_blocks_ = 0;
  int pages_in_use_ = 0;
};

}  // namespace hqekv::cache
