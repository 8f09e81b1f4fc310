#include "cache/page_pool.h"

#include <algorithm>
#include <new>

namespace hqekv::cache {
namespace {

// How many partial pages Allocate looks at before taking a new page: bounds
// the cost of one allocation when frees left many pages with small holes.
constexpr int kMaxPartialScan = 64;

// Mask with bit i set for every i multiple of `align` (align a power of two).
uint64_t AlignedStarts(int align) {
  uint64_t m = 0;
  for (int i = 0; i < 64; i += align) m |= uint64_t{1} << i;
  return m;
}

}  // namespace

PagePool::PagePool(size_t page_bytes, int max_cached_pages, int64_t* counter)
    : page_bytes_(page_bytes < 256 ? 256 : (page_bytes + 63) / 64 * 64),
      max_cached_(max_cached_pages < 0 ? 0 : max_cached_pages),
      counter_(counter),
      pages_(CountedAllocator<Page>(counter)),
      partial_(CountedAllocator<uint32_t>(counter)),
      free_slots_(CountedAllocator<uint32_t>(counter)),
      cached_(CountedAllocator<uint32_t>(counter)) {
  unit_ = UnitFor(page_bytes_);
  page_bytes_ = page_bytes_ / unit_ * unit_;
  units_ = static_cast<int>(page_bytes_ / unit_);
  all_units_ = units_ == 64 ? ~uint64_t{0} : (uint64_t{1} << units_) - 1;
}

size_t PagePool::UnitFor(size_t page_bytes) {
  // 64 units of at least 16 bytes; a page of 256..1008 bytes has fewer units.
  const size_t p = page_bytes < 256 ? 256 : (page_bytes + 63) / 64 * 64;
  return std::max<size_t>(16, (p / 64 + 15) / 16 * 16);
}

PagePool::~PagePool() {
  for (Page& p : pages_) {
    if (p.data) SystemFree(p.data, p.bytes);
  }
}

int64_t PagePool::table_bytes() const {
  return CapacityBytes(pages_) + CapacityBytes(partial_) + CapacityBytes(free_slots_) +
         CapacityBytes(cached_);
}

uint8_t* PagePool::SystemAlloc(size_t bytes) {
  auto* p = static_cast<uint8_t*>(::operator new (bytes, std::align_val_t{64}, std::nothrow));
  if (p) {
    held_bytes_ += static_cast<int64_t>(bytes);
    if (counter_) *counter_ += static_cast<int64_t>(bytes);
  }
  return p;
}

void PagePool::SystemFree(uint8_t* p, size_t bytes) {
  ::operator delete (p, std::align_val_t{64});
  held_bytes_ -= static_cast<int64_t>(bytes);
  if (counter_) *counter_ -= static_cast<int64_t>(bytes);
}

uint32_t PagePool::NewPageSlot() {
  if (!free_slots_.empty()) {
    // The lowest free slot: live pages stay at the front of the table, so
    // ReleaseCached can trim its tail.
    auto it = std::min_element(free_slots_.begin(), free_slots_.end());
    const uint32_t s = *it;
    *it = free_slots_.back();
    free_slots_.pop_back();
    return s;
  }
  // The table grows by 1/8 (doubling would hold up to 24 spare bytes per page).
  if (pages_.size() == pages_.capacity()) pages_.reserve(pages_.size() + pages_.size() / 8 + 8);
  pages_.emplace_back();
  return static_cast<uint32_t>(pages_.size() - 1);
}

void PagePool::ReleaseSlot(uint32_t page) {
  pages_[page] = Page{};
  free_slots_.push_back(page);
}

void PagePool::AddPartial(uint32_t page) {
  if (partial_.size() == partial_.capacity())
    partial_.reserve(partial_.size() + partial_.size() / 8 + 8);
  pages_[page].partial = static_cast<int32_t>(partial_.size());
  partial_.push_back(page);
}

void PagePool::RemovePartial(uint32_t page) {
  const int32_t i = pages_[page].partial;
  if (i == kNil) return;
  const uint32_t last = partial_.back();
  partial_[i] = last;
  pages_[last].partial = i;
  partial_.pop_back();
  pages_[page].partial = kNil;
}

int PagePool::FindRun(uint64_t used, int k, int* run_len) const {
  // r bit i set = units i..i+k-1 are all free.
  const uint64_t free = ~used & all_units_;
  uint64_t r = free;
  for (int s = 1; s < k && r; ++s) r &= free >> s;
  // Aligned to the largest power of two dividing k: power-of-two blocks as
  // before; 3- or 6-unit blocks (u3 codes: 3/8 byte per value) pack without
  // gaps instead of each wasting a unit or two.
  r &= AlignedStarts(k & -k);
  // Tightest fit: the start whose maximal free run is shortest, so small
  // blocks fill holes instead of breaking the runs larger blocks need.
  int best = -1, best_len = 65;
  while (r) {
    const int u = __builtin_ctzll(r);
    r &= r - 1;
    int lo = u, hi = u + k;  // [lo, hi) free
    while (lo > 0 && ((free >> (lo - 1)) & 1u)) --lo;
    while (hi < units_ && ((free >> hi) & 1u)) ++hi;
    if (hi - lo < best_len) {
      best_len = hi - lo;
      best = u;
      if (best_len == k) break;
    }
  }
  *run_len = best_len;
  return best;
}

int32_t PagePool::NewDedicated(size_t size) {
  // Every slot must fit a BlockRef (free slots are below the table's size).
  if (pages_.size() >= BlockRef::kMaxPages && free_slots_.empty()) return kNil;
  uint8_t* data = SystemAlloc(size);
  if (!data) return kNil;
  const uint32_t s = NewPageSlot();
  pages_[s] = Page{};
  pages_[s].data = data;
  pages_[s].bytes = static_cast<uint32_t>(size);
  return static_cast<int32_t>(s);
}

int32_t PagePool::PickPage(int k, int* u) {
  // Best fit: the tightest free run among the partial pages, then the
  // fullest page, so holes are filled and long runs stay whole.
  int32_t page = kNil;
  int best_len = 65, best_used = -1;
  const int n = static_cast<int>(partial_.size());
  for (int i = n - 1; i >= 0 && i >= n - kMaxPartialScan; --i) {
    const Page& p = pages_[partial_[i]];
    int len = 0;
    const int a = FindRun(p.used, k, &len);
    if (a < 0) continue;
    const int used = __builtin_popcountll(p.used);
    if (len < best_len || (len == best_len && used > best_used)) {
      page = static_cast<int32_t>(partial_[i]);
      *u = a;
      best_len = len;
      best_used = used;
    }
  }
  if (page != kNil) return page;
  uint32_t s;
  if (!cached_.empty()) {
    s = cached_.back();
    cached_.pop_back();
  } else {
    const int32_t d = NewDedicated(page_bytes_);  // a shared page: same allocation
    if (d == kNil) return kNil;
    s = static_cast<uint32_t>(d);
  }
  ++pages_in_use_;
  AddPartial(s);
  *u = 0;
  return static_cast<int32_t>(s);
}

void PagePool::MarkUsed(uint32_t page, int unit, int k) {
  Page& p = pages_[page];
  p.used |= RunMask(unit, k);
  if (p.used == all_units_) RemovePartial(page);
}

BlockRef PagePool::Allocate(size_t bytes) {
  if (bytes == 0) bytes = 1;
  const int k = Units(bytes);
  int32_t page;
  int unit = 0;
  if (k > units_) {  // dedicated allocation, unit-rounded
    page = NewDedicated(static_cast<size_t>(k) * unit_);
  } else {
    page = PickPage(k, &unit);
    if (page != kNil) MarkUsed(static_cast<uint32_t>(page), unit, k);
  }
  if (page == kNil) return BlockRef{};
  requested_bytes_ += static_cast<int64_t>(bytes);
  ++live_blocks_;
  return BlockRef{static_cast<uint32_t>(page), static_cast<uint32_t>(unit)};
}

void PagePool::ReleaseUnits(uint32_t page, int unit, int k) {
  Page& p = pages_[page];
  const bool was_full = p.used == all_units_;
  p.used &= ~RunMask(unit, k);
  if (was_full) AddPartial(page);
  if (p.used != 0) return;
  // Empty page: cache it or give it back.
  RemovePartial(page);
  --pages_in_use_;
  if (static_cast<int>(cached_.size()) < max_cached_) {
    cached_.push_back(page);
  } else {
    SystemFree(p.data, p.bytes);
    ReleaseSlot(page);
  }
}

void PagePool::Free(BlockRef b, size_t bytes) {
  if (!b.valid()) return;
  if (bytes == 0) bytes = 1;
  requested_bytes_ -= static_cast<int64_t>(bytes);
  --live_blocks_;
  Page& p = pages_[b.page()];
  if (Dedicated(p)) {
    SystemFree(p.data, p.bytes);
    ReleaseSlot(b.page());
    return;
  }
  ReleaseUnits(b.page(), static_cast<int>(b.unit()), Units(bytes));
}

void PagePool::ReleaseCached() {
  for (uint32_t s : cached_) {
    SystemFree(pages_[s].data, pages_[s].bytes);
    ReleaseSlot(s);
  }
  cached_.clear();
  // Trailing free slots leave the page table; the tables shrink to their size.
  while (!pages_.empty() && pages_.back().bytes == 0) pages_.pop_back();
  const uint32_t n = static_cast<uint32_t>(pages_.size());
  free_slots_.erase(
      std::remove_if(free_slots_.begin(), free_slots_.end(), [n](uint32_t s) { return s >= n; }),
      free_slots_.end());
  pages_.shrink_to_fit();
  free_slots_.shrink_to_fit();
  partial_.shrink_to_fit();
  cached_.shrink_to_fit();
}

void PagePool::Swap(PagePool& o) {
  std::swap(page_bytes_, o.page_bytes_);
  std::swap(unit_, o.unit_);
  std::swap(units_, o.units_);
  std::swap(all_units_, o.all_units_);
  std::swap(max_cached_, o.max_cached_);
  std::swap(counter_, o.counter_);
  pages_.swap(o.pages_);
  partial_.swap(o.partial_);
  free_slots_.swap(o.free_slots_);
  cached_.swap(o.cached_);
  std::swap(held_bytes_, o.held_bytes_);
  std::swap(requested_bytes_, o.requested_bytes_);
  std::swap(live_blocks_, o.live_blocks_);
  std::swap(pages_in_use_, o.pages_in_use_);
}

bool PagePool::SparseTable() const {
  const size_t live = pages_.size() - free_slots_.size();
  return pages_.size() > live + live / 4 + 16;
}

void PagePool::CompactTable(std::vector<uint32_t>* remap) {
  remap->assign(pages_.size(), BlockRef::kNone);
  std::sort(free_slots_.begin(), free_slots_.end());
  size_t next_free = 0;
  for (uint32_t s = 0; s < pages_.size(); ++s) {
    if (pages_[s].bytes == 0) continue;
    (*remap)[s] = s;
    // A free slot below s takes the page.
    if (next_free < free_slots_.size() && free_slots_[next_free] < s) {
      const uint32_t to = free_slots_[next_free];
      free_slots_[next_free++] = s;  // s becomes free; still sorted above `to`
      pages_[to] = pages_[s];
      pages_[s] = Page{};
      if (pages_[to].partial != kNil) partial_[pages_[to].partial] = to;
      (*remap)[s] = to;
    }
  }
  for (uint32_t& c : cached_) c = (*remap)[c];
  std::sort(free_slots_.begin(), free_slots_.end());
  while (!pages_.empty() && pages_.back().bytes == 0) pages_.pop_back();
  const uint32_t n = static_cast<uint32_t>(pages_.size());
  free_slots_.erase(
      std::remove_if(free_slots_.begin(), free_slots_.end(), [n](uint32_t x) { return x >= n; }),
      free_slots_.end());
  pages_.shrink_to_fit();
  free_slots_.shrink_to_fit();
}

}  // namespace hqekv::cache
