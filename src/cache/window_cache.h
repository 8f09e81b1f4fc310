// Sliding-window layers (Gemma's local attention) beside a cache for the
// global layers.
//
// A window layer of W tokens needs only its last W keys: a query at position
// p sees keys at p - W < pos <= p (llama.cpp's LLAMA_SWA_TYPE_STANDARD mask).
// WindowedKvCache keeps each window layer in a ring of at most W tokens, K
// and V in fp16 (llama.cpp's default cache type), never compressed or
// evicted by a policy (fp32 when the global layers' cache is the fp32
// oracle, so that reference comparisons stay exact); the global layers go to an inner cache (any
// policy) created for GlobalGeometry(g), so a policy's budget and bits apply to the global layers
// only while Stats() reports every layer.
//
// Within a batch of n tokens the ring may not yet be able to drop the keys
// that earlier queries of the same batch still see, so Append stages the
// batch (fp16) and EndBatch folds it into the ring, keeping the newest W.
// The staging is transient (freed at EndBatch) and counted in Stats() while
// it exists; after EndBatch a window layer holds min(tokens, W) tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/kv_cache.h"

namespace hqekv {

class WindowedKvCache final : public KvCache {
 public:
  // The inner cache's geometry: g without its window layers (n_layers = the
  // number of global layers, no layer_window). n_layers may be 0 (every layer
  // a window layer): then no inner cache is needed.
  static KvGeometry GlobalGeometry(const KvGeometry& g);

  // g has layer_window with one entry per layer and at least one W > 0;
  // inner is a cache of GlobalGeometry(g) (nullptr when that has no layer).
  // `inner_spec` names the inner cache in Describe().
  // fp32: rings hold fp32 values instead of fp16. With g.attn_softcap > 0
  // the rings apply the cap and the inner cache must too (its geometry has
  // the same attn_softcap: a store-backed policy, policy::CreateCache).
  static Result<std::unique_ptr<WindowedKvCache>> Create(const KvGeometry& g,
                                                         std::unique_ptr<KvCache> inner,
                                                         bool fp32 = false);

  const KvGeometry& geometry() const override { return g_; }
  // "<inner>+window<W>:fp16" (e.g. "hqekv+window512:fp16"); "window<W>:fp16"
  // without an inner cache.
  std::string Describe() const override;
  void Reset() override;
  Status Append(int layer, const float* k, const float* v, const int32_t* pos, int n) override;
  Status Attend(int layer, const float* q, const int32_t* q_pos, int n, float* out) override;
  Status EndBatch(int n, bool is_prefill) override;
  // Window layers: payload = the ring's K and V (slots allocated × n_kv_heads
  // × head_dim × 2 (fp16) or 4 bytes × 2) plus staged batch tokens; bookkeeping = the
  // ring's positions (int32 a slot). Global layers: the inner cache's stats.
  KvStats Stats() const override;
  int64_t LayerAllocatedBytes(int layer) const override;
  std::string BudgetNote() const override { return inner_ ? inner_->BudgetNote() : ""; }
  // "HQWINDOW" v1: per window layer int64 count, int32 last position, int64
  // slots, positions[slots], K and V bytes of the slots; then the inner
  // cache's own state (length-prefixed). Only between batches (nothing
  // staged); LoadState checks everything before changing anything.
  Status SaveState(std::string* out) const override;
  Status LoadState(std::string_view in) override;

  const KvCache* inner() const { return inner_.get(); }
  // Tokens a window layer holds after the last EndBatch (min(appended, W)).
  int64_t WindowTokens(int layer) const;

 private:
  explicit WindowedKvCache(const KvGeometry& g) : g_(g) {}

  struct Ring {
    int window = 0;               // W
    std::vector<uint8_t> k, v;    // [slots][n_kv_heads][head_dim] fp16 or fp32, slots <= W
    std::vector<int32_t> pos;     // [slots]
    int64_t count = 0;            // tokens folded in so far; slot of token t = t % W
    std::vector<uint8_t> sk, sv;  // this batch's tokens (staged), same layout
    std::vector<int32_t> spos;
    int32_t last_pos = -1;
  };
  void Fold(Ring& r) const;
  KvLayerStats RingStats(const Ring& r) const;

  KvGeometry g_;
  bool fp32_ = false;
  size_t row_bytes_ = 0;  // one token of one layer: n_kv_heads × head_dim × 2 or 4
  std::unique_ptr<KvCache> inner_;
  std::vector<int> inner_layer_;  // model layer -> inner layer, -1 for a window layer
  std::vector<Ring> rings_;       // per model layer (empty for global layers)
};

}  // namespace hqekv
