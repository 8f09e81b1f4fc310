// StreamingLLM (Xiao et al. 2024): the first `sink` tokens (attention sinks)
// plus the newest tokens of each (layer, KV head); evicts after every batch
// (EvictCache's default event). Budget: window=W (sink + W tokens), keep=f or
// bits=B (policy/budget.h). Records no attention.
#pragma once

#include <memory>

#include "policy/cache_context.h"
#include "policy/evict_cache.h"

namespace hqekv::policy {

class StreamingCache final : public EvictCache {
 public:
  static Result<std::unique_ptr<KvCache>> Create(const PolicySpec& spec, const KvGeometry& g,
                                                 const CacheContext& ctx);

 protected:
  Status ChooseVictims(int layer, int head, const std::vector<int32_t>& pos, int64_t keep,
                       std::vector<int32_t>* out_idx) override;
  // The sink plus the newest token (or the given window).
  int64_t StructuralMinimum() const override;
  std::string MinimumText() const override;

 private:
  StreamingCache(const KvGeometry& g, const PolicySpec& spec) : EvictCache(g, spec) {}

  int sink_ = 4;
  int64_t window_ = 0;  // fixed recent window (0: from the budget)
};

}  // namespace hqekv::policy
