#include "policy/streaming_cache.h"

#include <algorithm>

namespace hqekv::policy {

Result<std::unique_ptr<KvCache>> StreamingCache::Create(const PolicySpec& spec, const KvGeometry& g,
                                                        const CacheContext&) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  std::unique_ptr<StreamingCache> c(new StreamingCache(g, spec));
  HQEKV_RETURN_IF_ERROR(c->init_status());
  c->sink_ = spec.Int("sink");
  if (spec.Has("window")) {
    c->window_ = spec.Int("window");
    c->budget_.kind = EvictionBudget::Kind::kFixed;
    c->budget_.fixed = c->sink_ + c->window_;
  }
  c->ResetPolicy();
  return std::unique_ptr<KvCache>(std::move(c));
}

Status StreamingCache::ChooseVictims(int layer, int head, const std::vector<int32_t>& pos,
                                     int64_t keep, std::vector<int32_t>* out_idx) {
  const int64_t n = static_cast<int64_t>(pos.size());
  if (n <= keep) return Status::Ok();
  // Keep walk indices [0, first) (the sink) and the newest keep - first.
  const int64_t first = std::min<int64_t>(sink_, keep);
  for (int64_t j = first; j < n - (keep - first); ++j) out_idx->push_back(static_cast<int32_t>(j));
  return Status::Ok();
}

int64_t StreamingCache::StructuralMinimum() const { return sink_ + std::max<int64_t>(1, window_); }

std::string StreamingCache::MinimumText() const {
  return "the " + std::to_string(sink_) + " sink tokens + the newest " +
         std::to_string(std::max<int64_t>(1, window_)) + " per KV head";
}

}  // namespace hqekv::policy
