// Memory budgets of the eviction policies.
//
// A budget is given either as a kept fraction (keep=f: keep floor(f * n)
// tokens of the n seen, per (layer, KV head)) or as bits=B: the TRUE bytes a
// B-bit cache of the n tokens would hold, i.e. per layer
//     n * n_kv_heads * 2 * D * B / 8 bytes   (K and V, every element B bits),
// and the policy keeps as many fp16 tokens as fit in that, counting everything
// it holds for them (fp16 K and V, positions, chunk records, pool slack, its
// own scores). The estimate below sizes the first cut; the caches then check
// the store's exact byte count and evict further until the layer fits, but
// never below the policy's structural minimum (EvictCache::MinKeep: the
// streaming sink + the newest token, H2O's newest token, the SnapKV window):
// a budget smaller than that keeps the minimum and reports it through
// KvCache::BudgetNote() instead of evicting every token.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "policy/hqekv_alloc.h"
#include "policy/profile.h"
#include "policy/spec.h"

namespace hqekv::policy {

// The bytes bits=B allows one layer after `tokens` appended tokens: B bits
// for each of the tokens x n_kv_heads x D x 2 (K and V) original elements.
inline double TrueBitsBytes(double bits, int64_t tokens, int n_kv_heads, int D) {
  return bits * static_cast<double>(tokens * n_kv_heads * D * 2) / 8.0;
}

struct EvictionBudget {
  enum class Kind { kFraction, kBits, kFixed };
  Kind kind = Kind::kFraction;
  double value = 0.5;  // fraction (kFraction) or bits (kBits)
  int64_t fixed = 0;   // tokens per (layer, KV head) (kFixed)

  // Bytes one layer may hold after n_seen tokens (kBits only; else -1).
  double LayerBytes(int64_t n_seen, int n_kv_heads, int D) const;
  // First estimate of the tokens one (layer, KV head) may keep after n_seen
  // tokens; for bits= an upper bound (fp16 K and V and the state only), which
  // the caches trim to the exact bytes. per_token_state: bytes of policy
  // state per kept (head, token).
  int64_t Tokens(int64_t n_seen, int D, int64_t per_token_state) const;
};

// keep / bits from a parsed spec (keep=0.5 when neither is given).
EvictionBudget BudgetFromSpec(const PolicySpec& spec);

// Estimated bytes per kept (head, token) of an fp16 eviction cache: K and V in
// fp16, one int32 explicit position, the per-token share of a 32-token chunk
// record, plus the policy's own state.
double Fp16TokenCost(int D, int64_t per_token_state);

// ---- HqeKV tier-ratio equations (the calibration search, calib/search.h) ----
// Budget equations of the HqeKV ratio search.
//
// The four tier ratios (r4, r2, r1, r0 = fractions of the compressible chunks
// kept at 4 bits, 2 bits, 1 bit, or evicted) sum to 1. The paper's budget is
// nominal: 4 r4 + 2 r2 + 1 r1 + 0 r0 = B. Here the budget is by default in
// TRUE bits per original element (every byte of the cache counted: codes,
// fp16 scales/minima, fp16 pinned chunks, fp16 residual, bookkeeping, divided
// by the K and V elements of every token ever appended, evicted ones
// included — so eviction saves bits as in the paper's definition).
//
// The cache's bytes are affine in the tier counts (each chunk costs its
// tier's code + metadata + bookkeeping; the fp16 chunks and the residual are
// a fixed overhead), so with ratios summing to 1
//     true_bits(r) = r4 b4 + r2 b2 + r1 b1 + r0 b0,
// where b_t = the measured true bits when EVERY compressible chunk is in tier t
// (fixed overhead included in each). Given the free variables r1, r0 (as the
// paper), r4 and r2 then follow from the two linear equations. Nominal mode
// is the special case b = (4, 2, 1, 0). The equation is exact up to the
// rounding of chunk counts; the achieved bits of every trial are measured and
// recorded.

// b_t: bits per original element of the whole cache with every compressible
// chunk in tier t (TierCosts, recorded in the profile, policy/profile.h).

inline TierCosts NominalCosts() { return {4, 2, 1, 0}; }

// Costs must strictly decrease b4 > b2 > b1 >= b0; error otherwise.
Status ValidateCosts(const TierCosts& c);

// Error (naming the budget and the achievable range) unless b0 <= B <= b4.
// `what` describes the units, e.g. "true bits per element".
Status CheckBudget(const TierCosts& c, double budget, const std::string& what);

// r4, r2 from the budget equation given r1, r0; nullopt when infeasible
// (r4 < 0, r2 < 0, or r1 + r0 > 1). Tiny negative values from rounding
// (> -1e-12) are clamped to 0.
std::optional<TierRatios> SolveRatios(const TierCosts& c, double budget, double r1, double r0);

// Bounding box of the feasible (r1, r0): r2 >= 0 bounds each from above
// (r1_max with r0 = 0, r0_max with r1 = 0), r4 >= 0 from below when the
// budget is under the all-2-bit cost (r0_min with r1 = r1_max, r1_min with
// r0 = r0_max). The search box loses no feasible point (unlike the paper's
// unit square, where only 2-17% of proposals are feasible).
struct SearchBox {
  double r1_min = 0, r1_max = 1, r0_min = 0, r0_max = 1;
};
SearchBox FeasibleBox(const TierCosts& c, double budget);

// Cost of a ratio mix under the linear model.
double ModelBits(const TierCosts& c, const TierRatios& r);

}  // namespace hqekv::policy
