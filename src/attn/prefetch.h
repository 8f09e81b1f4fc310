// Requests for cache bytes a decode step will read soon (a later chunk or
// page of the KV head being walked), shared by the plain cache
// (cache/plain_cache.cc), the compressed store (cache/store_attention.cc) and
// the row kernels that spread a later block's line requests over their loops
// (PrefetchLines).
//
// Why the touches: a KV head's blocks lie on pages the hardware prefetchers
// do not follow, and on this class of machine (Zen 5) a software prefetch
// whose address misses the TLB did not hide the miss. One real load per 4 KiB
// page of the block walks the page table ahead of time, so that the line
// prefetches after it can be served (plain fp16 cache, 32K tokens: 15.7 ->
// 8.4-9.1 ms per step with every page touched, 10.1-10.5 with only the
// first and last byte of an 8 KiB block that spans 3 pages;
// docs/performance.md "Prefetching").
#pragma once

#include <cstddef>
#include <cstdint>

namespace hqekv::attn {

// Blocks of this size or more get their pages touched (smaller ones: the
// touches cost more than the walks they hide: bench_attention DecodeAttention,
// 2/4-bit tiers).
inline constexpr size_t kTouchBytes = 4096;

// fp16 rows per kernel call in a decode walk that spreads a later block's
// line requests over its calls (each call preceded by its share): 8 and 16
// alike, 6-7% faster per step at 16K-32K than one burst per 32-token page of
// the plain cache, 4 slower at 16K (bench_store_attention PlainFp16Decode); the
// store's fp16 chunks the same way (bench_store_attention StoreDecode).
inline constexpr int kF16PieceTokens = 8;

// Calls fn(offset) for one byte in every 4 KiB page that [start, start + n)
// overlaps (n > 0): offset 0, the first byte of each page strictly between
// the first and the last page, and n - 1 (so a block on at most 2 pages gets
// only its ends). Offsets ascend and are < n.
template <class Fn>
inline void ForEachPageTouch(uintptr_t start, size_t n, const Fn& fn) {
  const uintptr_t last_page = (start + n - 1) & ~uintptr_t{4095};
  fn(size_t{0});
  for (size_t o = 4096 - (start & 4095); ((start + o) & ~uintptr_t{4095}) < last_page; o += 4096)
    fn(o);
  fn(n - 1);
}

// One real load per page of [p, p + n) (ForEachPageTouch), results discarded.
inline void TouchPages(const uint8_t* p, size_t n) {
  const auto* v = reinterpret_cast<const volatile uint8_t*>(p);
  uint8_t sink = 0;
  ForEachPageTouch(reinterpret_cast<uintptr_t>(p), n, [&](size_t o) { sink ^= v[o]; });
  asm volatile("" : : "r"(sink));
}

// One prefetch per page of [p, p + n) (the bytes TouchPages loads), not
// waiting for them: a touch that misses stalls the walk until its line
// arrives.
inline void PrefetchPages(const uint8_t* p, size_t n) {
  if (n == 0) return;
  ForEachPageTouch(reinterpret_cast<uintptr_t>(p), n, [&](size_t o) { __builtin_prefetch(p + o); });
}

// Every 64-byte line of [p, p + n) prefetched (no touch).
inline void PrefetchRange(const uint8_t* p, size_t n) {
  for (size_t o = 0; o < n; o += 64) __builtin_prefetch(p + o);
}

// [p, p + n): pages touched (n >= kTouchBytes), then every line prefetched.
inline void PrefetchBytes(const uint8_t* p, size_t n) {
  if (n == 0) return;
  if (n >= kTouchBytes) TouchPages(p, n);
  PrefetchRange(p, n);
}

// Bytes a decode-attention caller will read soon (the chunk some steps ahead),
// handed to a row kernel that requests them a few 64-byte lines per loop
// iteration while it computes, instead of one burst of 64+ line prefetches
// per chunk before the call. Spread this way the requests overlap the
// kernel's arithmetic; as a burst they stalled the step until the core's miss
// buffers drained (int8 decode attention at 16K-32K: 10-23% per step, q8_0
// 0-4%; bench_attention DecodeAttention/int8, DecodeAttention/q8_0).
struct PrefetchLines {
  const uint8_t* next = nullptr;  // first line not requested yet
  const uint8_t* end = nullptr;   // one past the range

  // Requests what is left at once and forgets the range.
  void Flush() {
    for (; next < end; next += 64) __builtin_prefetch(next);
    next = end = nullptr;
  }
  // The range [p, p + n) replaces this one (whose rest is requested first).
  void Set(const uint8_t* p, size_t n) {
    Flush();
    next = p;
    end = p + n;
  }
};

// Requests up to `lines` more lines of [next, end); the new `next`. Kernels
// keep next / end in registers and write `next` back once per call.
inline const uint8_t* RequestLines(const uint8_t* next, const uint8_t* end, int lines) {
  for (int l = 0; l < lines && next < end; ++l, next += 64) __builtin_prefetch(next);
  return next;
}

}  // namespace hqekv::attn
