// Human-readable per-layer report of a KvCache's memory: tier histograms of
// K and V cells and the bytes by purpose (`hqekv run --kv-report`).
#pragma once

#include <string>

#include "cache/kv_cache.h"

namespace hqekv {

// One line per layer and a total line. Tier counts are (KV head, token)
// cells; bytes are exact as the cache accounts them.
std::string FormatKvReport(const KvStats& stats);

// "payload P + metadata M + bookkeeping K + residual R = T", each in bits per
// original element (bytes x 8 / every K and V element ever appended).
std::string BitsBreakdown(const KvStats& stats);

// One line for summaries: "KV 3.1 MiB, 4.9x smaller than fp16, 3.27
// bits/element" (bits per original element: every byte held x 8 / the K and
// V elements of every token appended; fp16 = 16 bits for each of them).
// "larger than fp16" when the cache holds more.
std::string MemorySummary(const KvStats& stats);

}  // namespace hqekv
