// The fast forward pass of Llama-family decoders (arch llama, qwen2, qwen3,
// gemma2, gemma3, phi3: io/arch.h)
// over a pluggable KvCache:
//   x = embed(token)
//   per layer: h = RMSNorm(x) * attn_norm
//              q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)       (qwen2 biases)
//              q, k = per-head RMSNorm(q) * q_norm, ... (qwen3), then RoPE
//              cache.Append(k, v); a = cache.Attend(q);  x += a Wo
//              h = RMSNorm(x) * ffn_norm;  x += (silu(h Wgate) * (h Wup)) Wdown
//   logits = RMSNorm(x) * output_norm  Wout (token_embd when tied)
// Gemma blocks (gemma3): x = embed * sqrt(d_model); the attention and FFN
// outputs pass through post_attention_norm / post_ffw_norm before their
// residual add; the gate is GELU (tanh form); window layers use their own
// RoPE base and the cache limits them to their window (KvGeometry::
// layer_window); logits may be soft-capped.
// A batch of n tokens runs as GEMMs over the batch (prefill); n == 1 as GEMVs
// (decode). Work is split over the core/parallel.h pool. Not thread-safe: one
// LlamaModel runs one Forward at a time (it owns the scratch buffers).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/kv_cache.h"
#include "core/status.h"
#include "kernels/kernels.h"
#include "io/model_source.h"

namespace hqekv {

enum class Logits { kNone, kLast, kAll };

// One sequence's part of a multi-sequence batch (LlamaModel::ForwardMany):
// n tokens at positions pos[n] appended to its own cache; logits[vocab]
// receives the logits of its last token (nullptr: none); embeddings[n][d_model]
// receives every token's final hidden state after the output norm, the input
// of the output head (llama.cpp's embeddings with pooling "none"; nullptr: none).
struct SeqBatch {
  const int32_t* tokens = nullptr;
  const int32_t* pos = nullptr;
  int n = 0;
  KvCache* cache = nullptr;
  float* logits = nullptr;
  bool is_prefill = false;
  float* embeddings = nullptr;
};

class LlamaModel {
 public:
  // Checks the architecture and every weight type; `src` must outlive the
  // model (weights are used in place, zero copy).
  static Result<std::unique_ptr<LlamaModel>> Create(const ModelSource& src);

  const ModelConfig& config() const { return src_.config; }
  const ModelSource& source() const { return src_; }
  int vocab_size() const { return src_.config.vocab_size; }

  // Geometry of a cache for this model holding up to max_ctx positions
  // (<= 0: the model's own context length).
  KvGeometry CacheGeometry(int max_ctx = 0) const;

  // Runs n tokens (tokens[n] at absolute positions pos[n], strictly
  // increasing, after every position already in `cache`). Logits::kLast
  // writes logits[vocab] of the last token, kAll logits[n][vocab], kNone
  // nothing. Ends with cache.EndBatch(n, is_prefill): pass true for a prompt
  // (the policy's compression event), false for a decoded or teacher-forced
  // token.
  // embeddings (optional): [n][d_model] final hidden states, as SeqBatch's.
  Status Forward(const int32_t* tokens, const int32_t* pos, int n, KvCache& cache, Logits which,
                 float* logits, bool is_prefill, float* embeddings = nullptr);

  // Several sequences in one pass (continuous batching): the rows of every
  // sequence go through each weight matmul together, so one step reads the
  // weights once for all of them; attention, Append and EndBatch run per
  // sequence on its own cache. Same checks as Forward, for every sequence,
  // before anything runs.
  Status ForwardMany(const SeqBatch* seqs, int count);

  // Bytes of every weight read by one decode step (all layers + output).
  int64_t WeightBytesPerToken() const;
  // Multiply-accumulates per token in the weight matmuls, times 2 (FLOPs).
  int64_t MatmulFlopsPerToken() const;

 private:
  explicit LlamaModel(const ModelSource& src) : src_(src) {}
  Status Init();

  struct Layer {
    const float* attn_norm = nullptr;
    const float* ffn_norm = nullptr;
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr;
    const float *q_norm = nullptr, *k_norm = nullptr;
    const float *post_attn_norm = nullptr, *post_ffn_norm = nullptr;  // gemma_block
    bool local_rope = false;  // Gemma window layer: its own RoPE table (inv_freq_swa_)
    kernels::WeightMatrix wq, wk, wv, wo, gate, up, down;
  };

  void Project(const kernels::WeightMatrix& w, const float* in, int n, float* out) const;
  Status CheckSeq(const SeqBatch& s) const;
  // The forward of Forward and ForwardMany; `which` == kAll needs count == 1.
  Status Run(const SeqBatch* seqs, int count, Logits which);

  const ModelSource& src_;
  std::vector<Layer> layers_;
  kernels::WeightMatrix embed_, output_;
  const float* output_norm_ = nullptr;
  std::vector<float> inv_freq_;
  std::vector<float> inv_freq_swa_;  // window layers: rope_theta_swa, no scaling
  // LongRoPE: inv_freq_ divided by rope_factors_long / _short (ModelConfig::longrope).
  std::vector<float> inv_freq_long_, inv_freq_short_;
  std::vector<const std::vector<float>*> tok_inv_;  // per token of a Run: its table
  float q_scale_ = 1.0f;      // on q after RoPE: attn_scale * sqrt(head_dim) (caches divide by it)
  float rope_mscale_ = 1.0f;  // RopeAttentionScale: YaRN's magnitude on q and k
  // Scratch, resized per batch: x, h [n][d]; q, att [n][q_dim]; k, v
  // [n][kv_dim]; g, u [n][d_ff].
  std::vector<float> x_, h_, q_, k_, v_, att_, g_, u_;
  std::vector<int32_t> tok_, pos_;  // every sequence's rows, concatenated
  std::vector<float> logit_rows_;   // [count][vocab] of ForwardMany
};

}  // namespace hqekv
