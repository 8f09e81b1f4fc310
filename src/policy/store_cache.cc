#include "policy/store_cache.h"

#include <algorithm>
#include <utility>

namespace hqekv::policy {

std::string ShortTierName(const std::string& f) {
  const std::string base = f.substr(0, f.find(':'));
  if (base == "f16") return "fp16";
  if (base == "f32") return "fp32";
  if (base == "fp8e4m3" || base == "fp8e5m2") return "fp8";
  return base;  // int8, u4, u2, u1, n1, n2, residual, evicted
}

StoreBackedCache::StoreBackedCache(const KvGeometry& g, std::string describe, int max_cached_pages,
                                   bool small_pages, StoreTuning tuning)
    : g_(g),
      describe_(std::move(describe)),
      state_counters_(std::make_unique<int64_t[]>(std::max(0, g.n_layers))) {
  init_ = CheckGeometry(g);
  if (!init_.ok()) return;
  cache::KvStoreConfig cfg;
  cfg.n_layers = g.n_layers;
  cfg.n_kv_heads = g.n_kv_heads;
  cfg.head_dim = g.head_dim;
  cfg.chunk = 32;
  cfg.max_cached_pages = max_cached_pages;
  // Small heads (the bundled model has D = 8) with many block sizes (HqeKV's
  // tiers) or with fp16 blocks of exactly 512 bytes (eviction policies): the
  // automatic page (>= 1 KiB) leaves much of each size class's last page
  // empty; 512-byte pages keep that slack small. Single-format caches keep
  // the automatic page, which packs their one block size better. Eviction
  // caches choose their own layout through StoreTuning.
  if (small_pages && g.head_dim < 64) cfg.page_bytes = tuning.small_head_page_bytes;
  if (tuning.page_bytes != 0) cfg.page_bytes = tuning.page_bytes;
  cfg.residual_reserve = tuning.residual_reserve;
  cfg.residual_format = tuning.residual_format;
  auto s = cache::KvStore::Create(cfg);
  if (!s.ok()) {
    init_ = s.error();
    return;
  }
  store_ = std::move(s).value();
}

void StoreBackedCache::Reset() {
  store_->Reset();
  ResetPolicy();
}

Status StoreBackedCache::Append(int layer, const float* k, const float* v, const int32_t* pos,
                                int n) {
  if (pos != nullptr) {
    for (int i = 0; i < n; ++i) {
      if (pos[i] < 0 || pos[i] >= g_.max_ctx) {
        return MakeError("KV cache Append: position " + std::to_string(pos[i]) +
                         " outside [0, max_ctx " + std::to_string(g_.max_ctx) + ")");
      }
    }
  }
  HQEKV_RETURN_IF_ERROR(store_->Append(layer, k, v, pos, n));
  OnAppend(layer, n);
  return Status::Ok();
}

Status StoreBackedCache::Attend(int layer, const float* q, const int32_t* q_pos, int n,
                                float* out) {
  if (layer < 0 || layer >= g_.n_layers) {
    return MakeError("KV cache Attend: layer " + std::to_string(layer) + " out of range [0, " +
                     std::to_string(g_.n_layers) + ")");
  }
  if (n <= 0) return n == 0 ? Status::Ok() : MakeError("KV cache Attend: negative query count");
  const int first = FirstRecordedQuery(layer, q_pos, n);
  cache::StoreAttentionOptions opt;
  opt.first_sink_query = first;
  opt.softcap = g_.attn_softcap;
  if (first >= n) {
    return cache::StoreAttention(*store_, layer, g_.n_q_heads, q, q_pos, n, out, nullptr, opt);
  }
  if (RecordsSumsOnly() && q && q_pos && out &&
      cache::StorePrefillQueries(*store_, g_.n_q_heads, n, nullptr, opt) == n) {
    // Tiled prefill with the recorded rows summed per kept token.
    const cache::AttentionColumnSink columns = [this, layer](const cache::AttentionColumns& c) {
      OnColumns(layer, c);
    };
    cache::StorePrefillAttention(*store_, layer, g_.n_q_heads, q, q_pos, n, out, &columns, first);
    OnAttended(layer, q_pos, n, first);
    return Status::Ok();
  }
  const cache::AttentionSink sink = [this, layer](const cache::AttentionRow& row) {
    OnRow(layer, row);
  };
  HQEKV_RETURN_IF_ERROR(
      cache::StoreAttention(*store_, layer, g_.n_q_heads, q, q_pos, n, out, &sink, opt));
  OnAttended(layer, q_pos, n, first);
  return Status::Ok();
}

int64_t StoreBackedCache::LayerAllocatedBytes(int layer) const {
  return store_->LayerHeldBytes(layer) + state_counters_[layer];
}

KvStats StoreBackedCache::Stats() const {
  KvStats s = store_->Stats();
  KvBytes total;
  for (int l = 0; l < static_cast<int>(s.layers.size()); ++l) {
    KvLayerStats& L = s.layers[l];
    L.bytes.bookkeeping += StateBytes(l);
    total += L.bytes;
    std::map<std::string, int64_t> k, v;
    for (const auto& [name, c] : L.k_tiers) k[ShortTierName(name)] += c;
    for (const auto& [name, c] : L.v_tiers) v[ShortTierName(name)] += c;
    L.k_tiers = std::move(k);
    L.v_tiers = std::move(v);
  }
  s.bytes = total;
  return s;
}

}  // namespace hqekv::policy
