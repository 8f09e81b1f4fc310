// Analytic byte model of one layer of a store-backed cache (cache/kv_store.h),
// used to turn a TRUE-bits budget (bits=B: every byte held, divided by the K
// and V elements of every token ever appended) into a configuration: HqeKV's
// tier ratios at each compression event, KIVI's code width.
//
// The model counts what the store and the policy hold, as upper bounds where
// the layout varies: chunk planes rounded to the pool's units, chunk records
// (24 bytes, capacity growing by 1/8), the fp16 residual with its reserve,
// one partly filled page, the page table, per-layer headers, and the policy's
// own state. tests/policy/true_bits_test.cc checks it against the bytes the
// caches really hold (within 1%).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "policy/hqekv_alloc.h"
#include "quant/format.h"

namespace hqekv::policy {

struct LayerLayout {
  int n_kv_heads = 0;
  int head_dim = 0;
  int chunk = 32;
  int residual_reserve = 32;  // spare residual tokens kept after a seal
  // The residual is held at its exact size (no reserve): it peaks at
  // chunk - 1 tokens just before a seal, whatever the length.
  bool residual_exact = false;
  // Bytes of one residual row (one token of one head, K or V): 2 * head_dim
  // for fp16, less with a quantized residual (cache::ResidualRowBytes); 0 =
  // fp16.
  int64_t residual_row_bytes = 0;
  size_t unit_bytes = 16;  // pool unit (block rounding)
  size_t page_bytes = 4096;
};

// K and V planes of one chunk of `chunk` tokens, every KV head, rounded to units.
int64_t ChunkPlaneBytes(const LayerLayout& l, const quant::Format& kf, const quant::Format& vf);
// One stream's part of it (K or V): codes and metadata of one chunk, every KV head.
int64_t StreamPlaneBytes(const LayerLayout& l, const quant::Format& f);

// Everything but the planes and the policy state: chunk records of
// live_chunks (per head), a residual of residual_capacity tokens (K and V
// rows and int32 positions), one partly filled page, the page table for
// plane_bytes, headers.
int64_t StoreOverheadBytes(const LayerLayout& l, int64_t live_chunks, int64_t residual_capacity,
                           int64_t plane_bytes);

// Store bytes one live chunk holds outside its planes: its chunk records
// (one per KV head, the record arrays growing by 1/8). Evicting the chunk
// frees them at the next Compact.
int64_t LiveChunkRecordBytes(const LayerLayout& l);

// Bits per original element of `bytes` held by one layer after n tokens.
double LayerBits(const LayerLayout& l, int64_t bytes, int64_t n);

// HqeKV's layer cost at one compression event.
struct HqekvCostModel {
  LayerLayout layout;
  int units = 1;                                // ranking units per layer (per_head=1: n_kv_heads)
  int pinned = 2;                               // fp16 chunks
  std::array<int64_t, kNumTiers> tier_bytes{};  // planes of one chunk per tier (evicted: 0)

  // Bytes of one layer after n tokens, nb chunks ever compressed, counts per
  // tier (AllocateChunks), with an open importance window.
  int64_t LayerBytes(int64_t n, int64_t nb, const std::array<int64_t, kNumTiers>& counts) const;
  // b_t: bits per original element with every compressible chunk in tier t
  // (index 0 = u4, 1 = u2, 2 = n1, 3 = evicted), the pinned chunks fp16, at
  // n tokens with every whole chunk compressed.
  std::array<double, 4> TierBits(int64_t n) const;
};

// Tier ratios for a true-bits budget B at n tokens: between the all-u2 and
// all-u4 costs only u4 and u2 are mixed; below all-u2 u2 and n1; below all-n1
// n1 and eviction. One chunk's cost step is kept as a margin for the
// rounding of chunk counts. `below` / `above` tell when B is outside
// [all evicted, all u4] (then the ratios are the nearest end).
struct BudgetRatios {
  TierRatios ratios;
  bool below = false, above = false;
};
BudgetRatios SolveBudgetRatios(const HqekvCostModel& m, double budget, int64_t n);

// Chunk counts [fp16, u4, u2, n1, evicted] of one compression event whose
// planes fit `room` bytes: nb chunks ever compressed, min(pinned, nb) of them
// fp16, the rest mixed between two adjacent tiers of u4, u2, n1, evicted
// (the segment that holds the room, as SolveBudgetRatios), with as many
// chunks in the better tier as fit: floor of the fractional count, no other
// margin. chunk_bytes: planes of one chunk per tier (K + V, every head of the
// ranking unit; evicted: 0). room is what the measured layer leaves for the
// planes (HqekvCache::Compress). `above`: every chunk u4 and at least one more
// u4-over-u2 step of room left; `below`: even every chunk evicted does not fit.
struct BudgetCounts {
  std::array<int64_t, kNumTiers> counts{};
  bool below = false, above = false;
};
// usable: the tiers that may take chunks (TierMask); the segment then lies
// between the two nearest usable tiers.
BudgetCounts SolveBudgetCounts(int64_t nb, int pinned,
                               const std::array<int64_t, kNumTiers>& chunk_bytes, int64_t room,
                               TierMask usable = kAllTiers);

// "[lo, hi] true bits per element at N tokens" for error messages.
std::string AchievableRange(double lo, double hi, int64_t n);

}  // namespace hqekv::policy
