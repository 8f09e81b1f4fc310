// Random Llama-family GGUF models for tests and benchmarks: the shapes and
// weight type are chosen freely, the weights are pseudo-random (a stateless
// counter hash, so a ~1 GB file is produced in pieces without holding it in
// memory) with scales that keep activations O(1). Never a real model: the
// tokenizer is a synthetic SentencePiece vocabulary (<unk>, <s>, </s>, 256
// byte tokens, then "▁t<i>" pieces).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "io/gguf_types.h"

namespace hqekv {

struct SyntheticSpec {
  // llama (normal RoPE), qwen2 (biases, NeoX), qwen3 (QK-norm, NeoX), gemma3
  // (QK-norm, NeoX, post norms: ArchTraits::gemma_block)
  std::string arch = "llama";
  int n_layers = 2;
  int d_model = 256;
  int n_heads = 4;
  int n_kv_heads = 2;
  int head_dim = 0;  // 0: d_model / n_heads
  int rope_dim = 0;  // rope.dimension_count; 0: head_dim (less: partial rotary)
  // LongRoPE as llama.cpp's Phi-3 converter writes it: rope_factors_long /
  // _short tensors (rope_dim / 2 random divisors, long ones in [1, 16], short
  // ones near 1), rope.scaling.original_context_length = rope_orig_ctx and
  // rope.scaling.attn_factor = sqrt(1 + ln(max_ctx / orig) / ln(orig)).
  bool longrope = false;
  int d_ff = 512;
  int vocab = 300;  // >= 259 (3 control + 256 byte tokens)
  int max_ctx = 256;
  float rope_theta = 10000.0f;
  float rope_factor = 0;  // > 0: rope scaling keys of rope_scaling_type are written
  int rope_orig_ctx = 64;
  std::string rope_scaling_type = "llama3";  // llama3 (+ its freq factors), linear, yarn
  std::string name;                          // general.name; empty: "synthetic-<arch>"
  int sliding_window = 0;    // > 0: <arch>.attention.sliding_window (window layers by the
                             // architecture's period, ArchTraits::swa_period)
  float rope_theta_swa = 0;  // > 0: <arch>.rope.freq_base_swa
  float final_softcap = 0;   // > 0: <arch>.final_logit_softcapping
  float attn_softcap = 0;    // > 0: <arch>.attn_logit_softcapping
  bool tied_output = true;
  TensorType type = TensorType::kQ8_0;  // matrices (embedding and output included)
  // Mixed-type files as llama.cpp's quantizer writes them (e.g. Q4_K_M): per
  // matrix overrides by name without "blk.N." and ".weight" ("ffn_down",
  // "attn_v", "token_embd", "output"), and, for a matrix whose row length is
  // not a multiple of its type's block, llama.cpp's fallback type (Q4_K ->
  // Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K / Q3_K / IQ4_XS -> IQ4_NL).
  std::vector<std::pair<std::string, TensorType>> type_overrides;
  uint64_t seed = 1;
};

// The type WriteSyntheticGguf gives matrix `name` (e.g. "blk.0.ffn_down.weight")
// with rows of `row_length` values; an error when even the fallback cannot
// hold such rows.
Result<TensorType> SyntheticMatrixType(const SyntheticSpec& s, const std::string& name,
                                       int64_t row_length);

// Bytes of the tensors the spec describes (what WriteSyntheticGguf stores).
uint64_t SyntheticWeightBytes(const SyntheticSpec& s);

// Writes the model to `path`; refuses an existing file unless overwrite.
Status WriteSyntheticGguf(const SyntheticSpec& s, const std::string& path, bool overwrite = false);

}  // namespace hqekv
