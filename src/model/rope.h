// Rotary position embedding: per-pair inverse frequencies (with optional
// Llama 3 frequency scaling) and the rotation in both pair layouts.
#pragma once

#include <cstdint>
#include <vector>

#include "io/model_source.h"

namespace hqekv {

// inv_freq[i] = theta^(-2i/head_dim), i < head_dim/2, then Llama 3 scaling
// when c.rope_factor > 0 (Meta's reference: wavelengths shorter than
// orig_ctx/high_freq_factor keep their frequency, longer than
// orig_ctx/low_freq_factor are divided by factor, in between interpolated).
std::vector<float> RopeInvFreq(const ModelConfig& c);

// Rotates x ([n_heads][head_dim] for one token) in place for position pos.
// kNormal rotates pairs (2i, 2i+1); kNeoX rotates (i, i + head_dim/2).
// The angle pos * inv_freq[i] is computed in fp32 like llama2.c and ggml.
void ApplyRope(RopeStyle style, const std::vector<float>& inv_freq, int32_t pos, int n_heads,
               int head_dim, float* x);

}  // namespace hqekv
