// Uncompressed KV caches: every appended K/V value is kept, in fp16 (the
// baseline every policy is compared against) or fp32 (the reference / oracle).
// Attention is exact over the stored values (fp16 values are widened to fp32
// before the dot products; scores and softmax in fp32).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
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
  Status Attend(int layer, const float* q, const int32_t* q_pos, int n, float* out) override;
  Status EndBatch(int n, bool is_prefill) override { return Status::Ok(); }
  // Bytes: payload = K and V values of every kept token (2 or 4 bytes each);
  // bookkeeping = one int32 position per (layer, token). Counted exactly for
  // the elements held; growth slack of the underlying vectors is not counted.
  KvStats Stats() const override;

  int64_t tokens(int layer) const { return static_cast<int64_t>(layers_[layer].pos.size()); }

 private:
  PlainKvCache(const KvGeometry& g, PlainPrecision p);

  // One layer: K and V as [n_kv_heads][tokens][head_dim], grown per head so
  // that a head's rows are contiguous for the attention loops.
  struct Layer {
    std::vector<int32_t> pos;
    std::vector<std::vector<f16_t>> k16, v16;  // [head] -> [tokens * D]
    std::vector<std::vector<float>> k32, v32;
  };

  // Dot products of q with the first t keys of (layer, kv head), into scores.
  void Scores(const Layer& L, int kvh, const float* q, int64_t t, float* scores) const;
  // out[D] = sum_j w[j] * V[j] over the first t tokens of (layer, kv head).
  void Mix(const Layer& L, int kvh, const float* w, int64_t t, float* out) const;

  KvGeometry g_;
  PlainPrecision prec_;
  std::vector<Layer> layers_;
};

}  // namespace hqekv
