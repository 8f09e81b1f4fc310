#include "policy/h2o_cache.h"

#include <algorithm>
#include <cmath>

#include "policy/selection.h"

namespace hqekv::policy {

Result<std::unique_ptr<KvCache>> H2oCache::Create(const PolicySpec& spec, const KvGeometry& g,
                                                  const CacheContext&) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  std::unique_ptr<H2oCache> c(new H2oCache(g, spec));
  HQEKV_RETURN_IF_ERROR(c->init_status());
  const std::string where = "KV policy '" + spec.Canonical() + "'";
  if (spec.Has("heavy") != spec.Has("recent")) {
    return MakeError(where + ": give heavy and recent together (or keep / bits)");
  }
  if (spec.Has("heavy")) {
    c->fixed_ = true;
    c->heavy_ = spec.Int("heavy");
    c->recent_ = spec.Int("recent");
    if (c->heavy_ + c->recent_ <= 0) return MakeError(where + ": heavy + recent must be > 0");
    c->budget_.kind = EvictionBudget::Kind::kFixed;
    c->budget_.fixed = c->heavy_ + c->recent_;
  }
  c->recent_share_ = spec.Num("recent_share");
  c->ResetPolicy();
  return std::unique_ptr<KvCache>(std::move(c));
}

Status H2oCache::ChooseVictims(int layer, int head, const std::vector<int32_t>& pos, int64_t keep,
                               std::vector<int32_t>* out_idx) {
  const int64_t n = static_cast<int64_t>(pos.size());
  if (n <= keep) return Status::Ok();
  const int64_t recent =
      fixed_ ? std::min(recent_, keep)
             : static_cast<int64_t>(std::llround(recent_share_ * static_cast<double>(keep)));
  const cache::CountedVector<float>& s = scores_[layer][head];
  if (s.size() != pos.size()) {  // a score per kept token (a loaded state is checked for it)
    return MakeError(describe_ + ": layer " + std::to_string(layer) + ", head " +
                     std::to_string(head) + ": " + std::to_string(s.size()) + " scores for " +
                     std::to_string(pos.size()) + " kept tokens");
  }
  *out_idx = H2oEvict(std::vector<double>(s.begin(), s.end()), keep, recent);
  return Status::Ok();
}

void H2oCache::OnEvicted(int layer, int head, const std::vector<int32_t>& out_idx) {
  cache::CountedVector<float>& s = scores_[layer][head];
  cache::CountedVector<float> kept(s.get_allocator());
  kept.reserve(s.size() - out_idx.size());
  size_t e = 0;
  for (size_t j = 0; j < s.size(); ++j) {
    if (e < out_idx.size() && static_cast<size_t>(out_idx[e]) == j) {
      ++e;
    } else {
      kept.push_back(s[j]);
    }
  }
  s.swap(kept);  // exact capacity: the state bytes are what is kept
}

}  // namespace hqekv::policy
