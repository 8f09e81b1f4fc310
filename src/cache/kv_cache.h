// The KV-cache interface between the inference engine (model/) and every
// cache implementation (plain fp16/fp32 here, compressed policies in policy/).
//
// The engine supplies only K/V rows to append and queries to attend with; the
// cache owns the representation, computes attention itself (so it sees the
// attention weights it needs for importance scores), decides when to compress,
// and accounts every byte it holds. Nothing here depends on the model.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hqekv {

// Shape of the cache of one sequence.
struct KvGeometry {
  int n_layers = 0;
  int n_q_heads = 0;  // query heads; n_q_heads % n_kv_heads == 0 (GQA/MQA)
  int n_kv_heads = 0;
  int head_dim = 0;  // D
  int max_ctx = 0;   // largest position + 1 the engine will ever use
  // Sliding-window layers (Gemma): layer_window[l] = W > 0 means a query at
  // position p of layer l sees only keys at p - W < pos <= p; 0 or an empty
  // vector: every key (a global layer). policy::CreateCache gives window
  // layers their own ring cache (cache/window_cache.h) and the policy only
  // the global ones; a cache created directly ignores this field.
  std::vector<int> layer_window = {};
  // Gemma 2's attention soft-cap: scores s -> cap * tanh(s / cap) before the
  // softmax; 0: none. The ring cache (cache/window_cache.h) and the
  // store-backed policies apply it; the plain fp16 / fp32 caches do not, so
  // policy::CreateCache makes every layer a ring for those.
  float attn_softcap = 0;
};

// Every size positive and n_q_heads a multiple of n_kv_heads; the error
// names the sizes. Every cache checks its geometry with this at creation.
Status CheckGeometry(const KvGeometry& g);

// Bytes held by a cache, split by purpose. Every byte the cache allocates for
// this sequence's K/V state is in exactly one bucket.
struct KvBytes {
  int64_t payload = 0;      // codes / fp16 / fp32 values of kept tokens outside the residual
  int64_t metadata = 0;     // scales, minima, means, stds, per-head fp8 scales
  int64_t bookkeeping = 0;  // positions, tier maps, page tables, importance state
  int64_t residual = 0;     // fp16 residual window (tokens not yet compressed)
  int64_t total() const { return payload + metadata + bookkeeping + residual; }
  KvBytes& operator+=(const KvBytes& o) {
    payload += o.payload;
    metadata += o.metadata;
    bookkeeping += o.bookkeeping;
    residual += o.residual;
    return *this;
  }
};

struct KvLayerStats {
  KvBytes bytes;
  int64_t kept_tokens = 0;  // summed over KV heads of this layer
  // Count of (KV head, token) cells per K representation and per V
  // representation, e.g. {"fp16": 64, "u4": 1024, "evicted": 32}.
  std::map<std::string, int64_t> k_tiers, v_tiers;
};

struct KvStats {
  KvBytes bytes;                  // summed over layers
  int64_t kept_elements = 0;      // kept (layer, kv head, token) cells × head_dim × 2 (K and V)
  int64_t original_elements = 0;  // same over every token ever appended
  std::vector<KvLayerStats> layers;
  // true bits per element: bytes.total() * 8 / kept_elements.
  double true_bits() const {
    return kept_elements ? 8.0 * static_cast<double>(bytes.total()) / kept_elements : 0.0;
  }
  // bits per original element: bytes.total() * 8 / original_elements.
  double bits_per_original() const {
    return original_elements ? 8.0 * static_cast<double>(bytes.total()) / original_elements : 0.0;
  }
};

class KvCache {
 public:
  virtual ~KvCache() = default;

  virtual const KvGeometry& geometry() const = 0;

  // Short name of the configuration, e.g. "fp16" or "hqekv:nominal_bits=2".
  virtual std::string Describe() const = 0;

  // Forget the sequence (a new request starts from an empty cache).
  virtual void Reset() = 0;

  // Append n new tokens to one layer. k, v: [n][n_kv_heads][head_dim] fp32,
  // K already RoPE-rotated; pos: [n] absolute positions, strictly increasing
  // and greater than every position appended before.
  virtual Status Append(int layer, const float* k, const float* v, const int32_t* pos, int n) = 0;

  // Attention of n queries of one layer over the kept tokens of that layer.
  // q: [n][n_q_heads][head_dim] fp32 (RoPE applied); q_pos: [n]. Query i sees
  // every kept token whose position <= q_pos[i] (causal; a window layer of a
  // cache::WindowedKvCache also p - W < position); scores are scaled by
  // 1/sqrt(head_dim) and normalized by one fp32 softmax per (query, head).
  // Query head h reads KV head h / (n_q_heads / n_kv_heads).
  // out: [n][n_q_heads][head_dim] fp32.
  virtual Status Attend(int layer, const float* q, const int32_t* q_pos, int n, float* out) = 0;

  // Called once after every layer has appended and attended a batch of n
  // tokens: the whole prompt (is_prefill = true) or one decoded / teacher-
  // forced token. Compression events happen here.
  virtual Status EndBatch(int n, bool is_prefill) = 0;

  virtual KvStats Stats() const = 0;

  // Bytes one layer holds as counted by allocators that instrument every
  // allocation (cache::CountedAllocator, the store's pages), independently of
  // Stats(), which computes them from the structures; -1 when the cache does
  // not count (tests assert Stats().layers[l].bytes.total() equals this for
  // every cache of the policy table).
  virtual int64_t LayerAllocatedBytes(int layer) const { return -1; }

  // Empty when the cache holds what its budget allows; otherwise one line
  // saying why not (e.g. an eviction policy that keeps its structural
  // minimum because its byte budget is smaller than that minimum). Library
  // code prints nothing: the CLI shows this note.
  virtual std::string BudgetNote() const { return ""; }

  // The cache's state as bytes, laid out as held in memory (cache/kv_state.h
  // wraps it in a checked file), and back: LoadState replaces the state of
  // a cache of the same kind and geometry, checking the bytes first (on
  // error nothing changed). Every cache of the policy table implements both
  // (plain_cache_state.cc, policy/store_cache_state.cc); other kinds say so.
  virtual Status SaveState(std::string* out) const {
    return MakeError("the KV cache '" + Describe() + "' cannot be saved (it has no state format)");
  }
  virtual Status LoadState(std::string_view in) {
    return MakeError("the KV cache '" + Describe() +
                     "' cannot be restored (it has no state format)");
  }
};

}  // namespace hqekv
