// The eviction policies' own state in a KV state file (StoreBackedCache::
// SavePolicy / LoadPolicy): each layer's budget outcome (for BudgetNote),
// the attention scores per kept token (H2O's cumulative scores; SnapKV's
// votes before its selection) and SnapKV's "selection done" flag, per-layer
// byte shares and last prompt positions.
#include <memory>

#include "policy/evict_cache.h"
#include "policy/snapkv_cache.h"

namespace hqekv::policy {

void EvictCache::SavePolicy(cache::StateWriter& w) const {
  for (const LayerBudget& b : status_) {
    w.Put<uint8_t>(b.met ? 1 : 0);
    w.Put<uint8_t>(b.at_minimum ? 1 : 0);
    w.Put(b.held);
    w.Put(b.target);
  }
  for (const auto& layer : scores_) {
    for (const auto& s : layer) w.PutVector(s);
  }
}

Result<StoreBackedCache::Commit> EvictCache::LoadPolicy(cache::StateReader& r,
                                                        const cache::KvStore& store) {
  struct Staged {
    std::vector<LayerBudget> status;
    std::vector<std::vector<cache::CountedVector<float>>> scores;
  };
  auto st = std::make_shared<Staged>();
  for (int l = 0; l < g_.n_layers; ++l) {
    LayerBudget b;
    uint8_t met = 0, at_min = 0;
    if (!r.Get(&met) || !r.Get(&at_min) || !r.Get(&b.held) || !r.Get(&b.target) || met > 1 ||
        at_min > 1)
      return MakeError("eviction state: truncated budget status");
    b.met = met != 0;
    b.at_minimum = at_min != 0;
    st->status.push_back(b);
  }
  for (int l = 0; l < g_.n_layers; ++l) {
    st->scores.emplace_back();
    for (int h = 0; h < g_.n_kv_heads; ++h) {
      cache::CountedVector<float> s(StateAlloc<float>(l));
      const int64_t kept = store.KeptTokens(l, h);
      if (!r.GetVector(&s, 2 * static_cast<uint64_t>(store.AppendedTokens(l)) + 64) ||
          (!s.empty() && static_cast<int64_t>(s.size()) != kept))
        return MakeError("eviction state: layer " + std::to_string(l) + ", head " +
                         std::to_string(h) + ": scores do not match the kept tokens");
      st->scores.back().push_back(std::move(s));
    }
  }
  return Commit([this, st] {
    status_ = std::move(st->status);
    scores_ = std::move(st->scores);
  });
}

void SnapKvCache::SavePolicy(cache::StateWriter& w) const {
  EvictCache::SavePolicy(w);
  w.Put<uint8_t>(selected_ ? 1 : 0);
  for (int l = 0; l < g_.n_layers; ++l) {
    w.Put(layer_share_[l]);
    w.Put(prompt_end_[l]);
  }
}

Result<StoreBackedCache::Commit> SnapKvCache::LoadPolicy(cache::StateReader& r,
                                                         const cache::KvStore& store) {
  HQEKV_ASSIGN_OR_RETURN(Commit base, EvictCache::LoadPolicy(r, store));
  uint8_t selected = 0;
  if (!r.Get(&selected) || selected > 1) return MakeError("SnapKV state: bad selection flag");
  auto share = std::make_shared<std::vector<double>>(g_.n_layers);
  auto end = std::make_shared<std::vector<int32_t>>(g_.n_layers);
  for (int l = 0; l < g_.n_layers; ++l) {
    if (!r.Get(&(*share)[l]) || !r.Get(&(*end)[l]) || !((*share)[l] >= 0) || (*end)[l] < -1)
      return MakeError("SnapKV state: layer " + std::to_string(l) + ": bad budget share");
  }
  return Commit([this, base, selected, share, end] {
    base();
    selected_ = selected != 0;
    layer_share_ = std::move(*share);
    prompt_end_ = std::move(*end);
  });
}

}  // namespace hqekv::policy
