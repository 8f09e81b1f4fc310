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
  int swa_period;    // window layers when the file gives attention.sliding_window and no
                     // pattern: layer l is one when l % period < period - 1 (0: every layer)
};

// The row for `name`, or nullptr when the architecture is not supported.
const ArchTraits* FindArch(std::string_view name);

// "llama, qwen2, qwen3": the names of every row, for error messages and help.
std::string SupportedArchNames();

}  // namespace hqekv
