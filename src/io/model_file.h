// The file-format-neutral view of a loaded model: configuration, weight
// tensors (zero copy views into the memory-mapped file), tokenizer. Both
// readers (GGUF in model_source.cc, llama2.c in llama2c.cc) fill it; the
// forward pass consumes only this.
//
// Tensor names (GGUF convention), shapes in ggml order (ne[0] = row length =
// input features; a weight W with ne = {in, out} computes y[out] = W x[in]):
//   token_embd.weight      {d_model, vocab}
//   output_norm.weight     {d_model}
//   output.weight          {d_model, vocab}   absent when config.tied_output
//   blk.N.attn_norm.weight {d_model}
//   blk.N.attn_q.weight    {d_model, n_heads*head_dim}
//   blk.N.attn_k.weight    {d_model, n_kv_heads*head_dim}
//   blk.N.attn_v.weight    {d_model, n_kv_heads*head_dim}
//   blk.N.attn_output.weight {n_heads*head_dim, d_model}
//   blk.N.attn_q.bias / attn_k.bias / attn_v.bias  {out}  (qwen2: attn_bias)
//   blk.N.attn_q_norm.weight / attn_k_norm.weight  {head_dim} (qwen3: qk_norm)
//   blk.N.ffn_norm.weight  {d_model}
//   blk.N.ffn_gate.weight  {d_model, d_ff}
//   blk.N.ffn_up.weight    {d_model, d_ff}
//   blk.N.ffn_down.weight  {d_ff, d_model}
//   blk.N.post_attention_norm.weight / post_ffw_norm.weight {d_model}  (gemma: post_norms)
//   rope_freqs.weight      {head_dim/2}  optional (llama.cpp's Llama 3.1 GGUFs):
//                          frequency i is divided by rope_freqs[i] (F32)
// Norm weights and biases are always F32 after loading validation (GGUF
// files store them F32; other types are rejected with a clear error).
// Every tensor's shape is validated against the config by LoadModel.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/gguf_types.h"
#include "tokenizer/tokenizer.h"

namespace hqekv {

class MappedFile;
struct GgufFile;

struct Tensor {
  std::string name;
  TensorType type = TensorType::kF32;
  std::vector<int64_t> ne;        // ggml order: ne[0] = contiguous row length
  const uint8_t* data = nullptr;  // into the mapping; alignment >= 4 bytes for F32 (32 in GGUF)
  size_t nbytes = 0;

  int64_t rows() const;                                                      // product of ne[1..]
  int64_t elements() const;                                                  // product of ne
  size_t row_bytes() const;                                                  // nbytes / rows()
  const float* f32() const { return reinterpret_cast<const float*>(data); }  // only for kF32
};

enum class RopeStyle {
  kNormal,  // rotate adjacent pairs (2i, 2i+1): llama (GGUF weights are permuted for this)
  kNeoX,    // rotate halves (i, i + head_dim/2): qwen2, qwen3
};

// How positions are stretched past the trained context (ModelConfig).
//   kLinear: every frequency divided by the factor (position interpolation).
//   kYarn:   YaRN as ggml's rope_yarn with ext_factor 1, beta_fast 32,
//            beta_slow 1: pairs below the "fast" correction dimension keep
//            their frequency, those above the "slow" one are divided by the
//            factor, a linear ramp in between; q and k are multiplied by
//            attn_factor * (1 + 0.1 ln factor).
//   kLlama3: Meta's Llama 3.1 rescaling by wavelength (low/high_freq_factor).
enum class RopeScaling { kNone, kLinear, kYarn, kLlama3 };

// Sanity bound on every model config number (dimensions, heads, layers,
// vocabulary, context) that a model file gives; larger is an error.
inline constexpr int kMaxConfigDim = 1 << 20;

struct ModelConfig {
  std::string arch;  // "llama", "qwen2", "qwen3"
  std::string name;  // general.name (or the file stem)
  int n_layers = 0;
  int d_model = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // attention.key_length, else d_model / n_heads
  int d_ff = 0;
  int vocab_size = 0;
  int max_ctx = 0;   // <arch>.context_length (llama2.c: seq_len)
  int rope_dim = 0;  // rope.dimension_count: the rotated dimensions (<= head_dim; partial rotary)
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeStyle rope = RopeStyle::kNormal;
  // RoPE scaling, read as llama.cpp reads it: <arch>.rope.scaling.type
  // ("none", "linear" — also when the key is absent —, "yarn", and "llama3"
  // for Meta's rescaling with its low/high_freq_factor keys), the factor
  // from rope.scaling.factor or the older rope.scale_linear, and
  // rope.scaling.original_context_length (yarn, llama3). kNone when the
  // factor is absent, 0 or 1 (linear) or the type says none. A
  // rope_freqs.weight tensor (llama.cpp's Llama 3.1 files) holds per-frequency
  // divisors, applied on top (it replaces "llama3" keys: the loader then sets
  // kNone so that the two are never applied together).
  RopeScaling rope_scaling = RopeScaling::kNone;
  float rope_factor = 0;  // > 0 when rope_scaling != kNone
  float rope_low_freq_factor = 1;
  float rope_high_freq_factor = 4;
  int rope_orig_ctx = 8192;
  float rope_attn_factor = 1;  // yarn, longrope: rope.scaling.attn_factor
  // LongRoPE (Phi-3 128K, Phi-4-mini): rope_factors_long.weight and
  // rope_factors_short.weight hold RopeDims / 2 divisors of the frequencies;
  // as llama.cpp does, the long ones apply when the context (the KV cache's
  // max_ctx) exceeds rope_orig_ctx (rope.scaling.original_context_length,
  // else context_length), the short ones otherwise, and the rotated q and k
  // are multiplied by rope_attn_factor.
  bool longrope = false;
  bool qk_norm = false;      // qwen3: RMSNorm of each q/k head before RoPE
  bool attn_bias = false;    // qwen2: q/k/v biases
  bool tied_output = false;  // no output.weight: logits use token_embd.weight
  // Gemma-style blocks (ArchTraits::gemma_block): the embedding is multiplied
  // by sqrt(d_model), each attention and FFN output passes through its own
  // RMSNorm (post_attention_norm, post_ffw_norm) before the residual add, and
  // the FFN gate is GELU (tanh form) instead of SiLU. Norm weights are used as
  // stored: llama.cpp's converter already folded Gemma's (1 + w) into them.
  bool gemma_block = false;
  // phi3 (ArchTraits::fused): blk.N.attn_qkv.weight {d_model, q_dim + 2 kv_dim}
  // replaces attn_q/k/v, and blk.N.ffn_up.weight {d_model, 2 d_ff} (gate rows
  // first) replaces ffn_gate + ffn_up.
  bool fused_qkv = false;
  bool fused_gate_up = false;
  // Sliding-window attention, as llama.cpp reads it: <arch>.attention.
  // sliding_window = W tokens; layer_window[l] = W for a window layer (its
  // query at position p sees keys p - W < pos <= p), 0 for a global one.
  // Window layers are given by attention.sliding_window_pattern (a bool per
  // layer, or a period n: layer l is a window layer when l % n < n - 1),
  // else the architecture's default period. Empty when the file has no window.
  int sliding_window = 0;
  std::vector<int> layer_window;
  // RoPE base of window layers (<arch>.rope.freq_base_swa, else llama.cpp's
  // default for the family); window layers never use rope scaling.
  float rope_theta_swa = 10000.0f;
  // Whether window layers rotate with rope_theta_swa and no scaling (the
  // Gemma rows) or exactly as the global layers do (a Mistral-style llama
  // file, whose window layers are ordinary layers with a shorter mask).
  bool swa_own_rope = false;
  // Query scale before q·k (gemma: 1/sqrt(head_dim), 1/sqrt(d_model/heads)
  // for the 27B sizes as llama.cpp decides it); 0: 1/sqrt(head_dim).
  float attn_scale = 0;
  // Final logits -> cap * tanh(logits / cap) (<arch>.final_logit_softcapping); 0: none.
  float final_softcap = 0;
  // Attention scores -> cap * tanh(score / cap) before the softmax (Gemma 2,
  // <arch>.attn_logit_softcapping); 0: none. Carried to KvGeometry.
  float attn_softcap = 0;

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
};

struct ModelSource {
  ModelConfig config;
  std::map<std::string, Tensor> tensors;
  std::unique_ptr<Tokenizer> tokenizer;
  std::string path;            // weights file
  std::string tokenizer_path;  // llama2.c: the tokenizer.bin used; GGUF: == path
  std::string format;          // "gguf" or "llama2c"
  uint32_t gguf_version = 0;   // 0 for llama2.c
  uint64_t file_bytes = 0;     // size of the weights file
  // Stable hash (hex, 16 chars) of arch + config numbers + tensor names,
  // types and shapes: keys calibration profiles to a model.
  std::string identity;

  // Owners of the memory the tensors point into.
  std::shared_ptr<const MappedFile> mapping;
  std::shared_ptr<const GgufFile> gguf;  // parsed metadata (null for llama2.c)

  const Tensor* Find(const std::string& name) const;  // nullptr when absent
  // For names LoadModel guarantees (validated); aborts the program if absent,
  // so call it only for required tensors of the config.
  const Tensor& Get(const std::string& name) const;
  // output.weight, or token_embd.weight when tied.
  const Tensor& Output() const;
  int64_t ParameterCount() const;  // sum of elements() over all tensors
};

}  // namespace hqekv
