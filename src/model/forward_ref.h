// The scalar reference forward pass: the oracle of LlamaModel. Plain loops in
// double precision over weights dequantized by the scalar reference kernels,
// its own naive causal attention over every past token (K/V kept in double),
// no threads, no KvCache. Slow; for tests on small models only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "io/model_source.h"

namespace hqekv {

class ReferenceForward {
 public:
  static Result<std::unique_ptr<ReferenceForward>> Create(const ModelSource& src);

  void Reset();  // forget every past token
  // The context LongRoPE chooses its factors by (the engine: its KV cache's
  // max_ctx); 0, the default: the file's context_length.
  void SetContext(int max_ctx) { context_ = max_ctx; }

  // Runs n tokens at positions pos (after every earlier one) and returns the
  // logits of all of them, [n][vocab].
  Result<std::vector<float>> Forward(const int32_t* tokens, const int32_t* pos, int n);

 private:
  explicit ReferenceForward(const ModelSource& src) : src_(src) {}
  int context_ = 0;
  std::vector<double> Matrix(const std::string& name, int64_t* in, int64_t* out) const;
  std::vector<double> Vec(const std::string& name) const;
  // y[out] = W x[in] with W dequantized, rows of `in` values.
  static void MatVec(const std::vector<double>& w, int64_t in, int64_t out, const double* x,
                     double* y);

  struct Layer {
    std::vector<double> attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm;
    std::vector<double> post_attn_norm, post_ffn_norm;  // gemma blocks
    std::vector<double> wq, wk, wv, wo, gate, up, down;
    std::vector<std::vector<double>> keys, values;  // per past token: [kv_dim]
  };

  const ModelSource& src_;
  std::vector<Layer> layers_;
  std::vector<double> embed_, output_, output_norm_;
  std::vector<int32_t> past_pos_;
};

}  // namespace hqekv
