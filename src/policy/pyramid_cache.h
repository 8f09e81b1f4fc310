// PyramidKV (Cai et al. 2024): SnapKV's selection (snapkv_cache.h) with
// per-layer budgets shrinking linearly with depth, same total: beyond the
// window, the first layer keeps 2a - a/beta tokens, the last a/beta, a = the
// mean (selection.h PyramidBudgets).
#pragma once

#include <memory>

#include "policy/snapkv_cache.h"

namespace hqekv::policy {

class PyramidCache final : public SnapKvCache {
 public:
  static Result<std::unique_ptr<KvCache>> Create(const PolicySpec& spec, const KvGeometry& g,
                                                 const CacheContext& ctx);

 protected:
  std::vector<int64_t> LayerKeeps(int64_t k) const override;

 private:
  PyramidCache(const KvGeometry& g, const PolicySpec& spec) : SnapKvCache(g, spec) {}

  double beta_ = 20;  // ratio of the mean to the smallest layer budget
};

}  // namespace hqekv::policy
