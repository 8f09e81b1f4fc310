// Quantization-only policies over the KvStore: fp8 (E4M3, one fp16 scale per
// (layer, KV head, 32-token chunk)), int8 (symmetric, one fp16 scale per token
// and KV head) and KIVI (K uniform per-channel over 32-token groups, V uniform
// per-token over groups of `group` channels).
//
// The newest tokens wait in the fp16 residual. When at least `residual_len`
// tokens wait after a batch, the oldest multiple of residual_len of them are
// sealed into 32-token chunks (KIVI: quantize when the residual reaches R, so
// between 0 and R - 1 tokens stay fp16; fp8/int8 use R = 32). Prefill is
// attended exactly, then the prompt is sealed the same way.
#pragma once

#include <memory>

#include "policy/cache_context.h"
#include "policy/spec.h"
#include "policy/store_cache.h"
#include "quant/format.h"

namespace hqekv::policy {

// KIVI's code width (4 or 2) for a true-bits budget bits=B: the widest whose
// layer, every byte counted (true_bits.h) at the worst point of the residual
// cycle, fits B at the cache's full context (g.max_ctx tokens); an error with
// both costs when even 2 bits do not fit.
Result<int> KiviBitsForBudget(const PolicySpec& spec, const KvGeometry& g, int group, int residual);

// Bytes of one layer of a QuantCache with K format kf and V format vf after n
// tokens (true_bits.h), at the worst point of the residual cycle (R - 1
// tokens waiting in fp16, the residual reserve of 32 counted).
// exact_residual: the store keeps no reserve (bits=B caches).
int64_t QuantLayerBytes(const KvGeometry& g, const quant::Format& kf, const quant::Format& vf,
                        int residual, int64_t n, bool exact_residual = false);

class QuantCache final : public StoreBackedCache {
 public:
  // A cache that seals the oldest multiple of `residual_len` waiting tokens
  // into 32-token chunks, K in kf and V in vf (checked against head_dim);
  // `describe` is its Describe() text. Used by policies that only choose the
  // formats (policy/llama_cache.h). budget_bits > 0: while a layer holds
  // more than that many true bits per element after a batch, its waiting
  // whole chunks are sealed at once (the fp16 residual is what rises above
  // a bits=B budget on short sequences).
  static Result<std::unique_ptr<KvCache>> Make(const KvGeometry& g, std::string describe,
                                               const quant::Format& kf, const quant::Format& vf,
                                               int residual_len, double budget_bits = 0);

  // spec: fp8, int8 or kivi (already parsed). Errors: bad geometry, kivi
  // group not dividing head_dim, residual not a positive multiple of 32.
  static Result<std::unique_ptr<KvCache>> Create(const PolicySpec& spec, const KvGeometry& g,
                                                 const CacheContext& ctx);

  Status EndBatch(int n, bool is_prefill) override;
  std::string BudgetNote() const override;
  void ResetPolicy() override { over_bits_ = 0, over_tokens_ = 0; }
  // True when a seal that took a layer's chunks per KV head from `before` to
  // `after` is due a RepackLayer (see quant_cache.cc); stagger in [0, 16):
  // the layer's offset, so that layers repack in different steps.
  static bool RepackDue(int before, int after, int stagger = 0);

 private:
  QuantCache(const KvGeometry& g, std::string describe, quant::Format kf, quant::Format vf,
             int residual_len, bool exact_residual);
  quant::Format kf_, vf_;
  int residual_len_;
  double budget_bits_ = 0;
  // bits=B: the most a layer held over B after a batch, and at what length.
  double over_bits_ = 0;
  int64_t over_tokens_ = 0;
};

}  // namespace hqekv::policy
