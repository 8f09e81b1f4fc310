#include "policy/pyramid_cache.h"

#include "policy/selection.h"

namespace hqekv::policy {

Result<std::unique_ptr<KvCache>> PyramidCache::Create(const PolicySpec& spec, const KvGeometry& g,
                                                      const CacheContext&) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  std::unique_ptr<PyramidCache> c(new PyramidCache(g, spec));
  HQEKV_RETURN_IF_ERROR(c->init_status());
  c->beta_ = spec.Num("beta");
  HQEKV_RETURN_IF_ERROR(c->Configure(spec));
  c->ResetPolicy();
  return std::unique_ptr<KvCache>(std::move(c));
}

std::vector<int64_t> PyramidCache::LayerKeeps(int64_t k) const {
  const std::vector<int64_t> extra = PyramidBudgets(k - window_, g_.n_layers, beta_);
  std::vector<int64_t> keep(g_.n_layers);
  for (int l = 0; l < g_.n_layers; ++l) keep[l] = extra[l] + window_;
  return keep;
}

}  // namespace hqekv::policy
