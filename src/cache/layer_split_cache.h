// Different caches for different layer ranges (`--kv 0-3:fp16,4-:hqekv:bits=3`).
//
// LayerSplitKvCache routes each layer to one of several caches, each created
// for the layers it holds (renumbered 0..n-1 in model order): layer l goes to
// part part_of[l] as that part's layer local_of[l]. Appends and attention go
// straight through; EndBatch, Reset and the state visit every part. Stats()
// reports every layer under its model index, and the element counts are the
// parts' sums, so the true-bits headline covers all layers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/kv_cache.h"

namespace hqekv {

class LayerSplitKvCache final : public KvCache {
 public:
  struct Part {
    std::vector<int> layers;         // model layer indices, increasing, >= 1 of them
    std::unique_ptr<KvCache> cache;  // geometry: g with n_layers = layers.size()
  };

  // Every layer of g in exactly one part, each part's cache of layers.size()
  // layers with g's heads and head_dim; errors name the layer at fault.
  static Result<std::unique_ptr<LayerSplitKvCache>> Create(const KvGeometry& g,
                                                           std::vector<Part> parts);

  const KvGeometry& geometry() const override { return g_; }
  // "layers 0-3:fp16,4-7:hqekv:bits=3" from the parts' own descriptions.
  std::string Describe() const override;
  void Reset() override;
  Status Append(int layer, const float* k, const float* v, const int32_t* pos, int n) override;
  Status Attend(int layer, const float* q, const int32_t* q_pos, int n, float* out) override;
  Status EndBatch(int n, bool is_prefill) override;
  KvStats Stats() const override;
  int64_t LayerAllocatedBytes(int layer) const override;
  // The parts' notes, each prefixed with its layers.
  std::string BudgetNote() const override;
  // "HQSPLIT1" then, per part, its state length-prefixed. LoadState checks
  // the frame, then loads part by part; if a part refuses its bytes, the
  // parts loaded before it get their previous state back.
  Status SaveState(std::string* out) const override;
  Status LoadState(std::string_view in) override;

  const KvCache& part(int i) const { return *parts_[i].cache; }
  int num_parts() const { return static_cast<int>(parts_.size()); }

 private:
  explicit LayerSplitKvCache(const KvGeometry& g) : g_(g) {}
  std::string RangeText(const Part& p) const;

  KvGeometry g_;
  std::vector<Part> parts_;
  std::vector<int> part_of_, local_of_;  // per model layer
};

}  // namespace hqekv
