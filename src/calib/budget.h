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
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "policy/hqekv_alloc.h"
#include "policy/profile.h"

namespace hqekv::calib {

// The cache's tier ratios (policy/hqekv_alloc.h): what the search finds.
using Ratios = policy::TierRatios;

// "r4/r2/r1/r0" with 6 decimals (the spec value of hqekv:ratios=).
using policy::RatiosText;

// b_t: bits per original element of the whole cache with every compressible
// chunk in tier t (recorded in the profile, policy/profile.h).
using TierCosts = policy::TierCosts;

inline TierCosts NominalCosts() { return {4, 2, 1, 0}; }

// Costs must strictly decrease b4 > b2 > b1 >= b0; error otherwise.
Status ValidateCosts(const TierCosts& c);

// Error (naming the budget and the achievable range) unless b0 <= B <= b4.
// `what` describes the units, e.g. "true bits per element".
Status CheckBudget(const TierCosts& c, double budget, const std::string& what);

// r4, r2 from the budget equation given r1, r0; nullopt when infeasible
// (r4 < 0, r2 < 0, or r1 + r0 > 1). Tiny negative values from rounding
// (> -1e-12) are clamped to 0.
std::optional<Ratios> SolveRatios(const TierCosts& c, double budget, double r1, double r0);

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
double ModelBits(const TierCosts& c, const Ratios& r);

}  // namespace hqekv::calib
