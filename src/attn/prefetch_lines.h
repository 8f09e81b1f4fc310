// Bytes a decode-attention caller will read soon (the chunk some steps ahead),
// handed to a row kernel that requests them a few 64-byte lines per loop
// iteration while it computes, instead of one burst of 64+ line prefetches
// per chunk before the call. Spread this way the requests overlap the
// kernel's arithmetic; as a burst they stalled the step until the core's miss
// buffers drained (int8 decode attention at 16K-32K: 10-23% per step, q8_0
// 0-4%; docs/performance.md "Wave 15: lead").
#pragma once

#include <cstddef>
#include <cstdint>

namespace hqekv::quant {

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

}  // namespace hqekv::quant
