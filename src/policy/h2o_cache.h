// H2O (Zhang et al. 2023): cumulative attention of every query so far
// (prefill included), summed over the query heads of each KV head, one float
// score per kept token. After every batch (EvictCache's default event) the
// newest `recent` tokens of each (layer, KV head) stay, plus the `heavy`
// highest scores among the rest; the rest is evicted (selection.h H2oEvict).
// Budget: heavy=,recent= (fixed counts, given together), or keep=f / bits=B
// with recent_share of it for the recent window. The scores are policy state:
// counted in the bytes (bookkeeping) and in a bits=B budget.
#pragma once

#include <memory>

#include "policy/cache_context.h"
#include "policy/evict_cache.h"

namespace hqekv::policy {

class H2oCache final : public EvictCache {
 public:
  static Result<std::unique_ptr<KvCache>> Create(const PolicySpec& spec, const KvGeometry& g,
                                                 const CacheContext& ctx);

 protected:
  void OnAppend(int layer, int n) override { GrowScores(layer, n); }
  int FirstRecordedQuery(int layer, const int32_t* q_pos, int n) override { return 0; }
  Status ChooseVictims(int layer, int head, const std::vector<int32_t>& pos, int64_t keep,
                       std::vector<int32_t>* out_idx) override;
  // Drops the evicted tokens' scores.
  void OnEvicted(int layer, int head, const std::vector<int32_t>& out_idx) override;
  // The newest token (or heavy + recent when fixed).
  int64_t StructuralMinimum() const override { return fixed_ ? heavy_ + recent_ : 1; }
  std::string MinimumText() const override { return "the newest token per KV head"; }
  int64_t PerTokenStateBytes() const override { return sizeof(float); }
  int64_t PersistentStateBytes(int layer) const override { return StateBytes(layer); }

 private:
  H2oCache(const KvGeometry& g, const PolicySpec& spec) : EvictCache(g, spec) {}

  bool fixed_ = false;  // heavy= and recent= given
  int64_t heavy_ = 0, recent_ = 0;
  double recent_share_ = 0.5;
};

}  // namespace hqekv::policy
