// HqeKV tier arithmetic, as pure functions: tier ratios, the per-event chunk
// counts (largest remainder over the configured tiers), and the downgrade-only
// tier plan of one compression event.
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
// Llama-3.1-8B-Instruct (config/ratios.json of skywclouds/HqeKV; docs/policies.md
// "HqeKV", Ratios). Other values: an error listing these.
Result<TierRatios> DefaultRatios(double bits);

// Tiers from the highest precision to the lowest: fp16, the three quantized
// slots (their formats are the cache's: u4/u2/n1 under layout=paper, u4/u3/u2
// under layout=lean, from the tier menu above all-u4), evicted. The numeric
// order is the downgrade order: a transition is allowed only to a larger value.
enum class Tier : uint8_t { kF16 = 0, kHigh = 1, kMid = 2, kLow = 3, kEvicted = 4 };
inline constexpr int kNumTiers = 5;
// "fp16", "u4", "u2", "n1", "evicted": the slots named by the paper's formats
// (the ratios r4/r2/r1 name them the same way).
const char* TierName(Tier t);

// torch.round: halves go to the even neighbour.
double RoundHalfEven(double x);

// Chunk counts [fp16, u4, u2, n1, evicted] for nb chunks:
//   fp16 = min(P, nb) (P = pinned fp16 chunks, 2 in the paper), and the other
//   nb - fp16 chunks split by the ratios r4/r2/r1/r0 with the largest-remainder
//   method: floor(rest * r) per tier, then the missing units one each to the
//   largest fractional parts (ties: the more precise tier first).
// The counts sum to nb, and a tier whose ratio is 0 never gets a chunk (so
// ratios=0.5/0.5/0/0 never makes 1-bit chunks). The reference rounds half-even
// and then dumps the whole rounding shortfall on the 1-bit tier, which made
// 1-bit chunks at r1 = 0: fixed on purpose (docs/policies.md "HqeKV", Counts).
std::array<int64_t, kNumTiers> AllocateChunks(int64_t nb, const TierRatios& r, int pinned_chunks);

// The tiers a bits=B solve may use: bit t for Tier t (fp16 and evicted are
// always usable). A tier left out is skipped, so the two tiers mixed are the
// nearest usable ones (e.g. u4 and evicted on a small head_dim, where the
// lower tiers cost more KL per byte saved than evicting: docs/ablations/tiers.md).
using TierMask = uint8_t;
inline constexpr TierMask kAllTiers = 0x1F;
inline bool TierUsable(TierMask m, int t) {
  return t == static_cast<int>(Tier::kF16) || t == static_cast<int>(Tier::kEvicted) ||
         ((m >> t) & 1u) != 0;
}

// Moves one chunk of `counts` from the best non-empty quantized tier (u4, u2,
// n1) to the next worse usable one (n1 -> evicted): the smallest step down in
// bytes when a plan held more than its budget. False (counts unchanged) when
// every quantized chunk is already evicted.
bool ShiftOneChunkDown(std::array<int64_t, kNumTiers>* counts, TierMask usable = kAllTiers);

// One compression event's plan for one ranking unit (a layer, or a KV head
// with per_head=1). Inputs are per chunk, oldest first, over every chunk ever
// compressed (evicted chunks included, so the evict share applies to the
// whole history: our fix of the reference, whose decode events never evict).
//   cur_k, cur_v : current tiers (a chunk being compressed now is kF16, so
//                  it may go to any tier, fp16 included).
//   score_k      : chunk score for K (mean attention importance).
//   score_v      : chunk score for V (mean attention x Range(V)).
//   counts       : AllocateChunks(nb, ...).
// The store is downgrade-only, so a tier's slots go only to chunks that can
// hold that tier (docs/policies.md "HqeKV" fix 5: ranking all chunks together and taking
// max(plan, current) let already-2-bit chunks take 4-bit slots they could
// never use and the real 4-bit chunks were demoted; the 4-bit share drifted
// to a fraction of its budget over a decode):
//   1. eviction: the lowest-ranked live chunks by K, as many as bring the
//      evicted total to counts[evicted] (already evicted ones count; never
//      fewer); K and V of a chunk go together (our fix of the reference's B3);
//   2. the kept tiers are filled from the best (fp16) to the worst (n1): tier
//      t's slots go to the top-ranked chunks among the not yet placed ones
//      whose current tier is t or better; slots no such chunk can take pass to
//      the next tier; a chunk left over at the end keeps max(current, the
//      worst tier with a nonzero count).
// K is ranked by score_k, V by score_v (its own fill, over the chunks K keeps).
// Ranking ("compare within tiers"): a chunk in a better current tier ranks
// above one in a worse tier, scores decide within a tier. Scores measured
// over the compressed cache are inflated by a chunk's own quantization error
// (2-bit chunks scored 1.5-4x their exact attention on refmodel-4l, test
// HqekvDecode.*),
// so comparing a 2-bit chunk's score with a 4-bit chunk's would favour the
// noisier chunk; within a tier the inflation is shared. With
// compare_across_tiers = true raw scores are compared instead (ablation).
// Ties rank the older chunk first (deterministic).
struct TierPlan {
  std::vector<Tier> k, v;
};
struct PlanOptions {
  bool compare_across_tiers = false;
};
TierPlan PlanTiers(const std::vector<Tier>& cur_k, const std::vector<Tier>& cur_v,
                   const std::vector<double>& score_k, const std::vector<double>& score_v,
                   const std::array<int64_t, kNumTiers>& counts, PlanOptions options = {});

}  // namespace hqekv::policy
