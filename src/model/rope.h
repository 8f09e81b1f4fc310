// Rotary position embedding: per-pair inverse frequencies (with optional
// Llama 3 frequency scaling) and the rotation in both pair layouts.
#pragma once

#include <cstdint>
#include <vector>

#include "io/model_source.h"

namespace hqekv {

// The rotated dimensions: rope.dimension_count (Phi-4-mini: 96 of 128), else head_dim.
int RopeDims(const ModelConfig& c);

// inv_freq[i] = theta^(-2i/n), i < n/2 with n = RopeDims(c), then c.rope_scaling:
//   linear: / factor;
//   yarn:   * (ramp_i + (1 - ramp_i) / factor), ramp_i = YarnRampAt(i);
//   llama3: Meta's reference (wavelengths shorter than orig_ctx /
//           high_freq_factor keep their frequency, longer than orig_ctx /
//           low_freq_factor are divided by factor, in between interpolated).
std::vector<float> RopeInvFreq(const ModelConfig& c);

// YaRN's correction range in pair indices [low, high] (ggml's
// rope_yarn_corr_dims with beta_fast 32, beta_slow 1), and the ramp: 1 (keep
// the frequency) up to low, 0 (divide by factor) from high, linear between.
struct YarnRamp {
  float low = 0, high = 0;
};
YarnRamp YarnCorrectionDims(const ModelConfig& c);
float YarnRampAt(const YarnRamp& r, int i);

// What RoPE'd q and k are multiplied by: attn_factor * (1 + 0.1 ln factor)
// for yarn (ggml's mscale), attn_factor for LongRoPE, 1 otherwise.
float RopeAttentionScale(const ModelConfig& c);

// Rotates x ([n_heads][head_dim] for one token) in place for position pos.
// kNormal rotates pairs (2i, 2i+1); kNeoX rotates (i, i + n/2), n = 2 *
// inv_freq.size() (= head_dim unless partial: dimensions n.. stay as they
// are, as ggml's rope with n_dims < head_dim). The angle pos * inv_freq[i]
// is computed in fp32 like llama2.c and ggml.
void ApplyRope(RopeStyle style, const std::vector<float>& inv_freq, int32_t pos, int n_heads,
               int head_dim, float* x);

}  // namespace hqekv
