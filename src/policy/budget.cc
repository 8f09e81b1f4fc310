#include "policy/budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hqekv::policy {

// A chunk record of the store is a few dozen bytes per 32 tokens; 2 bytes per
// token is a safe first estimate (the exact count is checked afterwards).
double Fp16TokenCost(int D, int64_t per_token_state) {
  return 4.0 * D + 4.0 + 2.0 + static_cast<double>(per_token_state);
}

double EvictionBudget::LayerBytes(int64_t n_seen, int n_kv_heads, int D) const {
  if (kind != Kind::kBits) return -1;
  return TrueBitsBytes(value, n_seen, n_kv_heads, D);
}

int64_t EvictionBudget::Tokens(int64_t n_seen, int D, int64_t per_token_state) const {
  switch (kind) {
    case Kind::kFixed:
      return fixed;
    case Kind::kFraction:
      return static_cast<int64_t>(std::floor(value * n_seen + 1e-9));
    case Kind::kBits: {
      // An upper bound (payload and state only, no positions, records or
      // pages): the caches trim from it to the exact byte count (FitBytes),
      // which can only evict, so an estimate below what fits would leave
      // bytes unused (at D = 8 the full per-token estimate is ~4% too high).
      const double per_head = static_cast<double>(n_seen) * 2.0 * D * value / 8.0;
      return static_cast<int64_t>(
          std::floor(per_head / (4.0 * D + static_cast<double>(per_token_state))));
    }
  }
  return 0;
}

EvictionBudget BudgetFromSpec(const PolicySpec& spec) {
  EvictionBudget b;
  if (spec.Has("bits")) {
    b.kind = EvictionBudget::Kind::kBits;
    b.value = spec.Num("bits");
  } else if (spec.Has("keep")) {
    b.kind = EvictionBudget::Kind::kFraction;
    b.value = spec.Num("keep");
  }
  return b;
}

Status ValidateCosts(const TierCosts& c) {
  const bool finite =
      std::isfinite(c.b4) && std::isfinite(c.b2) && std::isfinite(c.b1) && std::isfinite(c.b0);
  if (!finite || !(c.b4 > c.b2 && c.b2 > c.b1 && c.b1 >= c.b0)) {
    char buf[256];
    std::snprintf(
        buf, sizeof buf,
        "tier costs must decrease (4-bit > 2-bit > 1-bit >= evict), measured %.4f / %.4f / "
        "%.4f / %.4f bits per element",
        c.b4, c.b2, c.b1, c.b0);
    return MakeError(buf);
  }
  return Status::Ok();
}

Status CheckBudget(const TierCosts& c, double budget, const std::string& what) {
  HQEKV_RETURN_IF_ERROR(ValidateCosts(c));
  if (!std::isfinite(budget) || budget < c.b0 || budget > c.b4) {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "budget %g %s is impossible for this model and cache: achievable range is "
                  "[%.4f (all chunks evicted), %.4f (all chunks 4-bit)]",
                  budget, what.c_str(), c.b0, c.b4);
    return MakeError(buf);
  }
  return Status::Ok();
}

std::optional<TierRatios> SolveRatios(const TierCosts& c, double budget, double r1, double r0) {
  if (r1 < 0 || r0 < 0) return std::nullopt;
  const double s = 1.0 - r1 - r0;                      // r4 + r2
  const double rest = budget - r1 * c.b1 - r0 * c.b0;  // r4 b4 + r2 b2
  if (s < -1e-12) return std::nullopt;
  TierRatios r;
  r.r1 = r1;
  r.r0 = r0;
  r.r4 = (rest - std::max(s, 0.0) * c.b2) / (c.b4 - c.b2);
  r.r2 = std::max(s, 0.0) - r.r4;
  if (r.r4 < -1e-12 || r.r2 < -1e-12) return std::nullopt;
  r.r4 = std::max(r.r4, 0.0);
  r.r2 = std::max(r.r2, 0.0);
  return r;
}

SearchBox FeasibleBox(const TierCosts& c, double budget) {
  // r2 >= 0  <=>  r1 (b4 - b1) + r0 (b4 - b0) <= b4 - B: the binding side.
  SearchBox box;
  box.r1_max = std::clamp((c.b4 - budget) / (c.b4 - c.b1), 0.0, 1.0);
  box.r0_max = std::clamp((c.b4 - budget) / (c.b4 - c.b0), 0.0, 1.0);
  // r4 >= 0  <=>  r1 (b2 - b1) + r0 (b2 - b0) >= b2 - B.
  const double need = c.b2 - budget;
  box.r0_min = std::clamp((need - box.r1_max * (c.b2 - c.b1)) / (c.b2 - c.b0), 0.0, box.r0_max);
  box.r1_min =
      c.b2 > c.b1 ? std::clamp((need - box.r0_max * (c.b2 - c.b0)) / (c.b2 - c.b1), 0.0, box.r1_max)
                  : 0.0;
  return box;
}

double ModelBits(const TierCosts& c, const TierRatios& r) {
  return r.r4 * c.b4 + r.r2 * c.b2 + r.r1 * c.b1 + r.r0 * c.b0;
}

}  // namespace hqekv::policy
