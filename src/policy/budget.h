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

#include "policy/spec.h"

namespace hqekv::policy {

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

}  // namespace hqekv::policy
