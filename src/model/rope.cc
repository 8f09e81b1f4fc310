#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace hqekv {

YarnRamp YarnCorrectionDims(const ModelConfig& c) {
  // The pair index whose wavelength makes n_rot turns over the original
  // context: n_dims * ln(orig_ctx / (n_rot * 2 pi)) / (2 ln theta).
  const double kPi = 3.14159265358979323846;
  const int n_dims = RopeDims(c);
  auto corr_dim = [&](double n_rot) {
    return n_dims * std::log(c.rope_orig_ctx / (n_rot * 2 * kPi)) /
           (2 * std::log(static_cast<double>(c.rope_theta)));
  };
  YarnRamp r;
  r.low = static_cast<float>(std::max(0.0, std::floor(corr_dim(32))));          // beta_fast
  r.high = static_cast<float>(std::min(n_dims - 1.0, std::ceil(corr_dim(1))));  // beta_slow
  return r;
}

float YarnRampAt(const YarnRamp& r, int i) {
  const float y = (static_cast<float>(i) - r.low) / std::max(0.001f, r.high - r.low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

float RopeAttentionScale(const ModelConfig& c) {
  if (c.longrope) return c.rope_attn_factor;  // ggml's mscale with ext_factor 0
  if (c.rope_scaling != RopeScaling::kYarn) return 1.0f;
  return c.rope_attn_factor * (1.0f + 0.1f * std::log(c.rope_factor));
}

int RopeDims(const ModelConfig& c) { return c.rope_dim > 0 ? c.rope_dim : c.head_dim; }

std::vector<float> RopeInvFreq(const ModelConfig& c) {
  const int n_dims = RopeDims(c);
  const int half = n_dims / 2;
  std::vector<float> f(half);
  for (int i = 0; i < half; ++i) {
    f[i] = 1.0f / std::pow(c.rope_theta, static_cast<float>(2 * i) / static_cast<float>(n_dims));
  }
  if (c.rope_scaling == RopeScaling::kLinear) {
    for (float& freq : f) freq /= c.rope_factor;
  } else if (c.rope_scaling == RopeScaling::kYarn) {
    const YarnRamp r = YarnCorrectionDims(c);
    for (int i = 0; i < half; ++i) {
      const float ramp = YarnRampAt(r, i);
      f[i] *= (1.0f / c.rope_factor) * (1.0f - ramp) + ramp;
    }
  } else if (c.rope_scaling == RopeScaling::kLlama3) {
    const double kPi = 3.14159265358979323846;
    const double low_wavelen = c.rope_orig_ctx / c.rope_low_freq_factor;
    const double high_wavelen = c.rope_orig_ctx / c.rope_high_freq_factor;
    for (float& freq : f) {
      const double wavelen = 2 * kPi / freq;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        freq = static_cast<float>(freq / c.rope_factor);
      } else {
        const double smooth = (c.rope_orig_ctx / wavelen - c.rope_low_freq_factor) /
                              (c.rope_high_freq_factor - c.rope_low_freq_factor);
        freq = static_cast<float>((1 - smooth) * freq / c.rope_factor + smooth * freq);
      }
    }
  }
  return f;
}

void ApplyRope(RopeStyle style, const std::vector<float>& inv_freq, int32_t pos, int n_heads,
               int head_dim, float* x) {
  // Partial rotary: only the first 2 * inv_freq.size() dimensions turn.
  const int half = static_cast<int>(inv_freq.size());
  for (int i = 0; i < half; ++i) {
    const float a = static_cast<float>(pos) * inv_freq[i];
    const float c = std::cos(a), s = std::sin(a);
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + h * head_dim;
      const int i0 = style == RopeStyle::kNormal ? 2 * i : i;
      const int i1 = style == RopeStyle::kNormal ? 2 * i + 1 : i + half;
      const float x0 = v[i0], x1 = v[i1];
      v[i0] = x0 * c - x1 * s;
      v[i1] = x0 * s + x1 * c;
    }
  }
}

}  // namespace hqekv
