// The supported model architectures, one row each: what distinguishes them
// for loading, the forward pass and the synthetic writer. Adding an
// architecture is one row here (plus tests, see docs/CONTRIBUTING.md); no
// other file switches on the architecture name.
#pragma once

#include <string>
#include <string_view>

#include "io/model_file.h"

namespace hqekv {

struct ArchTraits {
  const char* name;  // GGUF general.architecture (and the <name>.* metadata prefix)
  RopeStyle rope;    // pair layout of the rotary embedding
  bool qk_norm;      // per-head RMSNorm of q and k before RoPE (attn_{q,k}_norm.weight)
  bool qkv_bias;     // q/k/v projections carry biases; the loader also accepts them on any
                     // architecture when the file has them, the synthetic writer emits them
  bool gemma_block;  // sqrt(d) embedding scale, post-attention/post-FFN norms, GELU gate
                     // (ModelConfig::gemma_block)
  bool fused;        // phi3: blk.N.attn_qkv {d, q + 2 kv} (rows q, then k, then v) and
                     // blk.N.ffn_up {d, 2 d_ff} (rows gate, then up) instead of separate
                     // q/k/v and gate/up matrices (ModelConfig::fused_qkv / fused_gate_up)
  int swa_period;    // window layers when the file gives attention.sliding_window and no
                     // pattern: layer l is one when l % period < period - 1 (0: every layer)
  // llama.cpp's family defaults for keys a file may omit (gemma_block rows):
  int default_window = 0;                // attention.sliding_window (gemma2: 4096)
  float default_rope_theta_swa = 10000;  // rope.freq_base_swa; 0: the global base (gemma2)
  float default_attn_softcap = 0;        // attn_logit_softcapping (gemma2: 50)
  float default_final_softcap = 0;       // final_logit_softcapping (gemma2: 30)
  // llama: a file's attention.sliding_window (Mistral 7B v0.1's 4096) makes
  // its layers window layers (all of them unless attention.
  // sliding_window_pattern says), rotated like the global ones. llama.cpp
  // (de3ff81) does not read the key for this architecture and attends over
  // the whole context; hqekv follows the model's definition instead.
  bool plain_window = false;
};

// The row for `name`, or nullptr when the architecture is not supported.
const ArchTraits* FindArch(std::string_view name);

// "llama, qwen2, qwen3, gemma3, gemma2, phi3": the names of every row, for error messages and help.
std::string SupportedArchNames();

}  // namespace hqekv
