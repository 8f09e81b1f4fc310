#include "cache/page_pool.h"

#include <cstring>
#include <new>

namespace hqekv::cache {

PagePool::PagePool(size_t page_bytes, int max_cached_pages, int64_t* counter)
    : page_bytes_(page_bytes < 256 ? 256 : (page_bytes + 63) / 64 * 64),
      max_cached_(max_cached_pages < 0 ? 0 : max_cached_pages),
      counter_(counter),
      pages_(CountedAllocator<Page>(counter)),
      classes_(CountedAllocator<SizeClass>(counter)),
      free_slots_(CountedAllocator<uint32_t>(counter)),
      cached_(CountedAllocator<uint32_t>(counter)) {}

PagePool::~PagePool() {
  for (Page& p : pages_) {
    if (p.data) SystemFree(p.data, p.bytes);
  }
}

int64_t PagePool::table_bytes() const {
  return CapacityBytes(pages_) + CapacityBytes(classes_) + CapacityBytes(free_slots_) +
         CapacityBytes(cached_);
}

uint8_t* PagePool::SystemAlloc(size_t bytes) {
  auto* p = static_cast<uint8_t*>(::operator new(bytes, std::align_val_t{64}, std::nothrow));
  if (p) {
    held_bytes_ += static_cast<int64_t>(bytes);
    if (counter_) *counter_ += static_cast<int64_t>(bytes);
  }
  return p;
}

void PagePool::SystemFree(uint8_t* p, size_t bytes) {
  ::operator delete(p, std::align_val_t{64});
  held_bytes_ -= static_cast<int64_t>(bytes);
  if (counter_) *counter_ -= static_cast<int64_t>(bytes);
}

uint32_t PagePool::NewPageSlot() {
  if (!free_slots_.empty()) {
    const uint32_t s = free_slots_.back();
    free_slots_.pop_back();
    return s;
  }
  pages_.emplace_back();
  return static_cast<uint32_t>(pages_.size() - 1);
}

int32_t PagePool::ClassFor(uint32_t block) {
  for (size_t i = 0; i < classes_.size(); ++i) {
    if (classes_[i].block == block) return static_cast<int32_t>(i);
  }
  classes_.push_back(SizeClass{block, kNil});
  return static_cast<int32_t>(classes_.size() - 1);
}

void PagePool::Unlink(uint32_t page) {
  Page& p = pages_[page];
  SizeClass& c = classes_[p.size_class];
  if (p.prev != kNil) pages_[p.prev].next = p.next;
  else c.partial = p.next;
  if (p.next != kNil) pages_[p.next].prev = p.prev;
  p.prev = p.next = kNil;
}

void PagePool::PushPartial(uint32_t page) {
  Page& p = pages_[page];
  SizeClass& c = classes_[p.size_class];
  p.prev = kNil;
  p.next = c.partial;
  if (c.partial != kNil) pages_[c.partial].prev = static_cast<int32_t>(page);
  c.partial = static_cast<int32_t>(page);
}

BlockRef PagePool::Allocate(size_t bytes) {
  if (bytes == 0) bytes = 1;
  const size_t block = BlockSize(bytes);
  if (block > page_bytes_) {  // dedicated allocation, exactly the block
    uint8_t* data = SystemAlloc(block);
    if (!data) return BlockRef{};
    const uint32_t s = NewPageSlot();
    Page& p = pages_[s];
    p = Page{};
    p.data = data;
    p.bytes = block;
    p.used = 1;
    requested_bytes_ += static_cast<int64_t>(bytes);
    ++live_blocks_;
    return BlockRef{s, 0};
  }
  const int32_t cls = ClassFor(static_cast<uint32_t>(block));
  int32_t page = classes_[cls].partial;
  if (page == kNil) {
    uint32_t s;
    if (!cached_.empty()) {
      s = cached_.back();
      cached_.pop_back();
    } else {
      uint8_t* data = SystemAlloc(page_bytes_);
      if (!data) return BlockRef{};
      s = NewPageSlot();
      pages_[s] = Page{};
      pages_[s].data = data;
      pages_[s].bytes = page_bytes_;
    }
    Page& p = pages_[s];
    p.size_class = cls;
    p.used = 0;
    p.free_head = kNil;
    p.bump = 0;
    ++pages_in_use_;
    PushPartial(s);
    page = static_cast<int32_t>(s);
  }
  Page& p = pages_[page];
  uint32_t offset;
  if (p.free_head != kNil) {  // reuse a freed block: its first 4 bytes link the next one
    offset = static_cast<uint32_t>(p.free_head);
    int32_t next;
    std::memcpy(&next, p.data + offset, sizeof next);
    p.free_head = next;
  } else {
    offset = p.bump;
    p.bump += static_cast<uint32_t>(block);
  }
  ++p.used;
  const bool full = p.free_head == kNil && p.bump + block > page_bytes_;
  if (full) Unlink(static_cast<uint32_t>(page));
  requested_bytes_ += static_cast<int64_t>(bytes);
  ++live_blocks_;
  return BlockRef{static_cast<uint32_t>(page), offset};
}

void PagePool::Free(BlockRef b, size_t bytes) {
  if (!b.valid()) return;
  if (bytes == 0) bytes = 1;
  requested_bytes_ -= static_cast<int64_t>(bytes);
  --live_blocks_;
  Page& p = pages_[b.page];
  if (p.size_class == kNil) {  // dedicated block
    SystemFree(p.data, p.bytes);
    p = Page{};
    free_slots_.push_back(b.page);
    return;
  }
  const size_t block = classes_[p.size_class].block;
  const bool was_full = p.free_head == kNil && p.bump + block > page_bytes_;
  std::memcpy(p.data + b.offset, &p.free_head, sizeof p.free_head);
  p.free_head = static_cast<int32_t>(b.offset);
  --p.used;
  if (was_full) PushPartial(b.page);
  if (p.used > 0) return;
  // Empty page: leave the class, then cache it or give it back.
  Unlink(b.page);
  p.size_class = kNil;
  --pages_in_use_;
  if (static_cast<int>(cached_.size()) < max_cached_) {
    cached_.push_back(b.page);
  } else {
    SystemFree(p.data, p.bytes);
    p = Page{};
    free_slots_.push_back(b.page);
  }
}

void PagePool::ReleaseCached() {
  for (uint32_t s : cached_) {
    SystemFree(pages_[s].data, pages_[s].bytes);
    pages_[s] = Page{};
    free_slots_.push_back(s);
  }
  cached_.clear();
}

}  // namespace hqekv::cache
