// HqeKV tier arithmetic, as pure functions: tier ratios, the per-event chunk
// counts of the digest §3 (round half-even, then the sum fixed from the 1-bit
// entry upward), and the downgrade-only tier plan of one compression event.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace hqekv::policy {

// Fractions of the compressed (non-pinned) chunks per tier: 4-bit uniform,
// 2-bit uniform, 1-bit normal, evicted. Sum 1.
struct TierRatios {
  double r4 = 0, r2 = 0, r1 = 0, r0 = 0;
  double avg_bits() const { return 4 * r4 + 2 * r2 + r1; }  // B_avg of the paper (eq. 6)
};

// "r4/r2/r1/r0": four numbers in [0, 1] summing to 1 within 1e-3; the result
// is rescaled to sum exactly 1.
Result<TierRatios> ParseRatios(const std::string& text);
Status CheckRatios(const TierRatios& r, const std::string& where);
// "r4/r2/r1/r0" with 6 decimals (the value of hqekv:ratios=).
std::string RatiosText(const TierRatios& r);
// r divided by r4 + r2 + r1 + r0 (so that it sums to 1 exactly).
TierRatios Rescaled(const TierRatios& r);

// Built-in ratios for bits = 2, 2.8, 3.2, 3.25: the authors' TPE results for
// Llama-3.1-8B-Instruct (config/ratios.json of skywclouds/HqeKV, quoted in the
// reference digest §3). Other values: an error listing these.
Result<TierRatios> DefaultRatios(double bits);

// Tiers from the highest precision to the lowest. The numeric order is the
// downgrade order: a transition is allowed only to a larger value.
enum class Tier : uint8_t { kF16 = 0, kU4 = 1, kU2 = 2, kN1 = 3, kEvicted = 4 };
inline constexpr int kNumTiers = 5;
const char* TierName(Tier t);  // "fp16", "u4", "u2", "n1", "evicted"

// torch.round: halves go to the even neighbour.
double RoundHalfEven(double x);

// Chunk counts [fp16, u4, u2, n1, evicted] for nb chunks (digest §3):
//   rho = [min(1, P/nb), (1-rho16) r4, (1-rho16) r2, (1-rho16) r1, (1-rho16) r0],
//   counts = round_half_even(nb * rho), then the excess e = sum - nb is taken
//   from the 1-bit entry, then 2-bit, 4-bit, fp16 (never below 0; the evict
//   entry is never adjusted); a deficit is added to the 1-bit entry.
// P = pinned fp16 chunks (2 in the paper). min(1, .) is our guard for short
// inputs (the reference goes negative when nb < P, its bug B8).
std::array<int64_t, kNumTiers> AllocateChunks(int64_t nb, const TierRatios& r, int pinned_chunks);

// One compression event's plan for one ranking unit (a layer, or a KV head
// with per_head=1). Inputs are per chunk, oldest first, over every chunk ever
// compressed (evicted chunks included, so the evict share applies to the
// whole history: our fix of the reference, whose decode events never evict).
//   cur_k, cur_v : current tiers (a chunk being compressed now is kF16, so
//                  it may go to any tier, fp16 included).
//   score_k      : chunk score for K (mean attention importance).
//   score_v      : chunk score for V (mean attention x Range(V)).
//   counts       : AllocateChunks(nb, ...).
// The chunks to evict are the lowest by score_k among the live ones, as many
// as bring the evicted total to counts[evicted] (already evicted chunks
// count; never fewer); K and V of a chunk are evicted together (one eviction
// set: our fix of the reference's bug B3). The live chunks are then ranked by
// score_k for the K tiers and by score_v for the V tiers, and the i-th ranked
// chunk gets the tier whose cumulative count covers i (the lowest kept tier
// absorbs any excess).
// Downgrade only: the result is max(current, target) per chunk; a target of
// fp16 keeps only chunks that are fp16 already (new, or pinned earlier).
// Ties rank the older chunk first (deterministic).
struct TierPlan {
  std::vector<Tier> k, v;
};
TierPlan PlanTiers(const std::vector<Tier>& cur_k, const std::vector<Tier>& cur_v,
                   const std::vector<double>& score_k,
                   const std::vector<double>& score_v,
                   const std::array<int64_t, kNumTiers>& counts);

}  // namespace hqekv::policy
