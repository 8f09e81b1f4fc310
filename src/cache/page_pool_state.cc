// PagePool::SaveState / LoadState / Holds: the pool as held in memory, so a
// restored KV store holds the same bytes and allocates its next blocks in the
// same places (bit-identical continuation, same byte counts).
#include <algorithm>
#include <cstring>

#include "cache/page_pool.h"
#include "cache/state_io.h"

namespace hqekv::cache {
namespace {

// Calls f(first_unit, n_units) for every maximal run of set bits of `used`.
template <class F>
void ForEachRun(uint64_t used, F&& f) {
  int u = 0;
  while (u < 64 && (used >> u) != 0) {
    if (!((used >> u) & 1u)) {
      ++u;
      continue;
    }
    int e = u;
    while (e < 64 && ((used >> e) & 1u)) ++e;
    f(u, e - u);
    u = e;
  }
}

}  // namespace

void PagePool::SaveState(StateWriter& w) const {
  w.Put<uint64_t>(page_bytes_);
  w.Put<uint64_t>(pages_.size());
  w.Put<uint64_t>(pages_.capacity());
  for (const Page& p : pages_) {
    w.Put(p.bytes);
    w.Put(p.partial);
    w.Put(p.used);
  }
  w.PutVector(partial_);
  w.PutVector(free_slots_);
  w.PutVector(cached_);
  w.Put(requested_bytes_);
  w.Put(live_blocks_);
  w.Put(pages_in_use_);
  for (const Page& p : pages_) {
    if (p.bytes == 0) continue;
    if (Dedicated(p)) {
      w.PutArray(p.data, p.bytes);
    } else {
      ForEachRun(p.used, [&](int u, int n) { w.PutArray(p.data + u * unit_, n * unit_); });
    }
  }
}

bool PagePool::LoadState(StateReader& r, std::string* why) {
  auto bad = [why](const char* what) {
    *why = std::string("page pool: ") + what;
    return false;
  };
  if (!pages_.empty() || held_bytes_ != 0) return bad("not empty");
  uint64_t page_bytes = 0, size = 0, cap = 0;
  if (!r.Get(&page_bytes) || !r.Get(&size) || !r.Get(&cap)) return bad("truncated");
  if (page_bytes != page_bytes_) return bad("another page size");
  // 16 bytes per entry in the input; the table grows by 1/8 + 8.
  if (size > r.remaining() / 16 || size > cap || cap > 2 * size + 64 || size > BlockRef::kMaxPages)
    return bad("bad page table");
  pages_.reserve(cap);
  pages_.resize(size);
  for (Page& p : pages_) {
    if (!r.Get(&p.bytes) || !r.Get(&p.partial) || !r.Get(&p.used)) return bad("truncated");
    const bool dedicated = p.bytes != 0 && p.bytes != page_bytes_;
    if ((p.bytes == 0 && (p.used || p.partial != kNil)) || (p.used & ~all_units_) ||
        (dedicated && (p.used || p.partial != kNil || p.bytes < page_bytes_ || p.bytes % unit_)))
      return bad("bad page entry");
  }
  const uint64_t max_list = 2 * size + 64;
  if (!r.GetVector(&partial_, max_list) || !r.GetVector(&free_slots_, max_list) ||
      !r.GetVector(&cached_, max_list))
    return bad("bad page lists");
  for (size_t i = 0; i < partial_.size(); ++i) {
    const uint32_t s = partial_[i];
    if (s >= size || pages_[s].partial != static_cast<int32_t>(i) || Dedicated(pages_[s]) ||
        pages_[s].used == 0 || pages_[s].used == all_units_)
      return bad("bad partial list");
  }
  for (uint32_t s : free_slots_) {
    if (s >= size || pages_[s].bytes != 0) return bad("bad free list");
  }
  for (uint32_t s : cached_) {
    if (s >= size || pages_[s].bytes != page_bytes_ || pages_[s].used != 0)
      return bad("bad cached list");
  }
  if (static_cast<int>(cached_.size()) > max_cached_) return bad("too many cached pages");
  int in_use = 0;
  for (size_t s = 0; s < size; ++s) {
    const Page& p = pages_[s];
    in_use += p.bytes == page_bytes_ && p.used != 0;
    if (p.bytes == page_bytes_ && p.used != 0 && p.used != all_units_ && p.partial == kNil)
      return bad("a page with room is not in the partial list");
  }
  if (!r.Get(&requested_bytes_) || !r.Get(&live_blocks_) || !r.Get(&pages_in_use_))
    return bad("truncated");
  if (pages_in_use_ != in_use || requested_bytes_ < 0 || live_blocks_ < 0) return bad("bad counts");
  for (Page& p : pages_) {
    if (p.bytes == 0) continue;
    if (Dedicated(p) && p.bytes > r.remaining()) return bad("truncated");
    // (The destructor frees only the pages that got their data.)
    uint8_t* data = SystemAlloc(p.bytes);
    if (!data) return bad("out of memory");
    p.data = data;
    std::memset(data, 0, p.bytes);
    bool ok = true;
    if (Dedicated(p)) {
      ok = r.GetArray(data, p.bytes);
    } else {
      ForEachRun(p.used, [&](int u, int n) { ok = ok && r.GetArray(data + u * unit_, n * unit_); });
    }
    if (!ok) return bad("truncated page data");
  }
  if (requested_bytes_ > held_bytes_) return bad("bad counts");
  return true;
}

bool PagePool::Holds(BlockRef b, size_t bytes) const {
  if (!b.valid() || b.page() >= pages_.size()) return false;
  const Page& p = pages_[b.page()];
  const size_t offset = b.unit() * unit_;
  if (p.bytes == 0 || !p.data || offset > p.bytes || bytes > p.bytes - offset) return false;
  if (Dedicated(p)) return b.unit() == 0;
  const size_t u0 = b.unit(), u1 = u0 + Units(std::max<size_t>(bytes, 1));
  for (size_t u = u0; u < u1; ++u) {
    if (!((p.used >> u) & 1u)) return false;
  }
  return true;
}

bool PagePool::MarkUnits(BlockRef b, size_t bytes, std::vector<uint64_t>* seen) const {
  // Callers check Holds first: b lies in a live page.
  const Page& p = pages_[b.page()];
  uint64_t& s = (*seen)[b.page()];
  const uint64_t run = Dedicated(p)
                           ? ~uint64_t{0}
                           : RunMask(static_cast<int>(b.unit()), Units(std::max<size_t>(bytes, 1)));
  if (s & run) return false;
  s |= run;
  return true;
}

bool PagePool::OccupancyMatches(const std::vector<uint64_t>& seen) const {
  if (seen.size() != pages_.size()) return false;
  for (size_t i = 0; i < pages_.size(); ++i) {
    const Page& p = pages_[i];
    if (p.bytes == 0) {
      if (seen[i]) return false;
    } else if (Dedicated(p)) {
      if (seen[i] != ~uint64_t{0}) return false;  // every dedicated block referenced once
    } else if (seen[i] != p.used) {
      return false;
    }
  }
  return true;
}

}  // namespace hqekv::cache
