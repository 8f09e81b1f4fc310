#include "policy/budget.h"

#include <algorithm>
#include <cmath>

namespace hqekv::policy {

// A chunk record of the store is a few dozen bytes per 32 tokens; 2 bytes per
// token is a safe first estimate (the exact count is checked afterwards).
double Fp16TokenCost(int D, int64_t per_token_state) {
  return 4.0 * D + 4.0 + 2.0 + static_cast<double>(per_token_state);
}

double EvictionBudget::LayerBytes(int64_t n_seen, int n_kv_heads, int D) const {
  if (kind != Kind::kBits) return -1;
  return static_cast<double>(n_seen) * n_kv_heads * 2.0 * D * value / 8.0;
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

}  // namespace hqekv::policy
