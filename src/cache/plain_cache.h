// Uncompressed KV caches: every appended K/V value is kept, in fp16 (the
// baseline every policy is compared against) or fp32 (the reference / oracle).
// Attention is exact over the stored values (fp16 values are widened to fp32
// before the dot products; scores and softmax in fp32).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "cache/page_pool.h"
#include "core/half.h"

namespace hqekv {

enum class PlainPrecision { kF16, kF32 };

class PlainKvCache final : public KvCache {
 public:
  // Checks the geometry (positive sizes, n_q_heads % n_kv_heads == 0).
  static Result<std::unique_ptr<PlainKvCache>> Create(const KvGeometry& g, PlainPrecision p);

  const KvGeometry& geometry() const override { return g_; }
  std::string Describe() const override { return prec_ == PlainPrecision::kF16 ? "fp16" : "fp32"; }
  void Reset() override;
  Status Append(int layer, const float* k, const float* v, const int32_t* pos, int n) override;
  // Decode (and small batches): AttendPerQuery. Prefill batches
  // (cache::UsePrefillAttention): tiled over blocks of query rows × pages
  // (cache/prefill_attention.h), within attn::AttendRows' tolerance of it.
  Status Attend(int layer, const float* q, const int32_t* q_pos, int n, float* out) override;
  Status EndBatch(int n, bool is_prefill) override { return Status::Ok(); }
  // One query at a time (the GQA heads of a query share each page read):
  // the decode path and the oracle of the tiled prefill path.
  Status AttendPerQuery(int layer, const float* q, const int32_t* q_pos, int n, float* out) const;
  // Bytes, as allocated (every allocation of a layer goes through a counting
  // allocator; LayerHeldBytes() is that count and tests assert equality):
  // payload = the K and V pages of the layer (a page holds kPageTokens tokens
  // of every KV head, head_dim values of 2 or 4 bytes each; the last page
  // may be partly empty: at most kPageTokens - 1 tokens of slack per layer);
  // bookkeeping = the position array (one int32 per token, capacity grown
  // with the pages), the page tables and the layer object itself.
  KvStats Stats() const override;
  int64_t LayerHeldBytes(int layer) const;
  int64_t LayerAllocatedBytes(int layer) const override { return LayerHeldBytes(layer); }
  // Per layer: int64 tokens, int32 positions[tokens], then every page's K
  // and V values ([n_kv_heads][kPageTokens][head_dim], 2 or 4 bytes each).
  Status SaveState(std::string* out) const override;
  Status LoadState(std::string_view in) override;

  int64_t tokens(int layer) const { return static_cast<int64_t>(layers_[layer]->pos.size()); }

  // Tokens per page; also the block of the attention kernels' calls.
  static constexpr int64_t kPageTokens = 32;

 private:
  PlainKvCache(const KvGeometry& g, PlainPrecision p);

  // One layer: K and V in pages of kPageTokens tokens, laid out
  // [n_kv_heads][kPageTokens][head_dim] (a head's rows contiguous within the
  // page for the attention kernels), allocated at their full size when the
  // page's first token arrives, so growth never copies values. Every
  // container allocates through `counter` (declared first: the allocators
  // point at it, so a Layer never moves).
  template <class T>
  using Pages = cache::CountedVector<cache::CountedVector<T>>;
  struct Layer {
    Layer() : pos(Alloc()), k16(Alloc()), v16(Alloc()), k32(Alloc()), v32(Alloc()) {}
    Layer(const Layer&) = delete;
    Layer& operator=(const Layer&) = delete;
    cache::CountedAllocator<char> Alloc() { return cache::CountedAllocator<char>(&counter); }
    int64_t counter = 0;
    cache::CountedVector<int32_t> pos;
    Pages<f16_t> k16, v16;  // fp16 cache only
    Pages<float> k32, v32;  // fp32 cache only
  };

  // Dot products of q with the first t keys of (layer, kv head), into scores.
  void Scores(const Layer& L, int kvh, const float* q, int64_t t, float* scores) const;
  // out[D] = sum_j w[j] * V[j] over the first t tokens of (layer, kv head).
  void Mix(const Layer& L, int kvh, const float* w, int64_t t, float* out) const;

  KvGeometry g_;
  PlainPrecision prec_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace hqekv
