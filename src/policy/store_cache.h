// Base of every compressing policy: a KvCache over the mixed-precision
// KvStore (cache/kv_store.h) with attention read directly from the tiers
// (cache/store_attention.h). Policies override the hooks: which queries'
// attention rows they want (importance scores), what to do with each row, and
// the compression event at EndBatch. Prefill attention is exact: every prompt
// token is still in the fp16 residual when the prompt attends, and the
// compression event follows in EndBatch(n, is_prefill = true).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cache/kv_cache.h"
#include "cache/kv_store.h"
#include "cache/page_pool.h"
#include "cache/state_io.h"
#include "cache/store_attention.h"
#include "cache/store_prefill_attention.h"

namespace hqekv::policy {

// Store layout choices of a policy (see cache::KvStoreConfig).
struct StoreTuning {
  // Page size of the store's pools when head_dim < 64 (0 = the store's
  // automatic page, which is used for every larger head).
  size_t small_head_page_bytes = 512;
  // Spare fp16 residual room per head, tokens (-1 = the chunk, 32).
  int residual_reserve = -1;
  // Page size for every head size (0: small_head_page_bytes / automatic).
  size_t page_bytes = 0;
  // How residual tokens are held (cache::KvStoreConfig::residual_format).
  quant::Format residual_format = quant::F16();
};

class StoreBackedCache : public KvCache {
 public:
  const KvGeometry& geometry() const override { return g_; }
  std::string Describe() const override { return describe_; }
  // Forgets the sequence AND every piece of policy state (per-request state:
  // the reference leaks its eviction ratios across requests, bug B1).
  void Reset() override;
  Status Append(int layer, const float* k, const float* v, const int32_t* pos, int n) override;
  Status Attend(int layer, const float* q, const int32_t* q_pos, int n, float* out) override;
  // The store's exact bytes plus the policy's state (importance buffers,
  // scores) in bookkeeping; tier names shortened to fp16/fp32/fp8/int8/u4/u2/
  // n1 (plus "residual" and "evicted").
  KvStats Stats() const override;
  // The store's counted bytes (KvStore::LayerHeldBytes) plus the bytes the
  // policy's state containers allocated through StateAlloc(layer).
  int64_t LayerAllocatedBytes(int layer) const override;
  // The second part alone: bytes allocated by the policy state of `layer`.
  int64_t StateAllocatedBytes(int layer) const { return state_counters_[layer]; }

  const cache::KvStore& store() const { return *store_; }

  // The state (store_cache_state.cc): Describe(), the store as held
  // (cache::KvStore::SaveState), then the policy's own state (SavePolicy).
  // LoadState builds the store and the policy state aside and installs them
  // only when every check passed: on error the cache is unchanged.
  Status SaveState(std::string* out) const override;
  Status LoadState(std::string_view in) override;

 protected:
  // Installs a loaded policy state; LoadState calls it last, once.
  using Commit = std::function<void()>;
  // The policy's state beyond the store (scores, tiers, importance windows,
  // budget outcome): nothing by default (quantization-only policies).
  virtual void SavePolicy(cache::StateWriter& w) const {}
  // Reads what SavePolicy wrote, checked against the loaded store, without
  // changing the cache: returns the commit that installs it.
  virtual Result<Commit> LoadPolicy(cache::StateReader& r, const cache::KvStore& store) {
    return Commit([] {});
  }

  StoreBackedCache(const KvGeometry& g, std::string describe, int max_cached_pages,
                   bool small_pages, StoreTuning tuning = {});
  Status init_status() const { return init_; }

  virtual void ResetPolicy() {}
  virtual void OnAppend(int layer, int n) {}
  // First query index of this batch whose attention rows the policy wants
  // (n: none). Called after the batch's tokens are appended.
  virtual int FirstRecordedQuery(int layer, const int32_t* q_pos, int n) { return n; }
  // One attention row; called concurrently for different KV heads of a layer.
  virtual void OnRow(int layer, const cache::AttentionRow& row) {}
  // True when OnRow only adds the rows up per kept token: a prefill batch
  // big enough for the tiled path then stays on it and OnColumns gets the
  // recorded rows' sums, one call per KV head (cache/store_prefill_attention.h),
  // instead of OnRow per (query, query head).
  virtual bool RecordsSumsOnly() const { return false; }
  virtual void OnColumns(int layer, const cache::AttentionColumns& columns) {}
  // After the rows of a batch: which queries were recorded ([first, n)).
  virtual void OnAttended(int layer, const int32_t* q_pos, int n, int first) {}
  // Bytes of policy state held for one layer (bookkeeping), computed from
  // the state's containers (capacities); tests check it against
  // StateAllocatedBytes, so every container of policy state must allocate
  // through StateAlloc.
  virtual int64_t StateBytes(int layer) const { return 0; }
  // Allocator for the policy state of `layer`: counts into this layer's
  // counter, which outlives the derived class's containers (base members are
  // destroyed after the derived class's).
  template <class T>
  cache::CountedAllocator<T> StateAlloc(int layer) {
    return cache::CountedAllocator<T>(&state_counters_[layer]);
  }

  KvGeometry g_;
  std::string describe_;
  std::unique_ptr<int64_t[]> state_counters_;  // [layer] bytes of policy state allocated
  std::unique_ptr<cache::KvStore> store_;

 private:
  Status init_;
};

// Short tier name of a quant::FormatName ("u4:chan" -> "u4", "f16" -> "fp16").
std::string ShortTierName(const std::string& format_name);

}  // namespace hqekv::policy
