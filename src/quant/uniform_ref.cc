// Scalar reference of uniform asymmetric min-max quantization (kUniform).
// Code order: per-token grouping stores codes token-major (index t*D + d);
// per-channel grouping stores them channel-major (index d*T + t). Metadata:
// plane 0 = fp16 scales, plane 1 = fp16 minima, one entry per group in group
// order (per-token: t*(D/g) + d/g; per-channel: d). See quant/README.md.
#include <algorithm>
#include <vector>

#include "quant/internal.h"

namespace hqekv::quant::ref {
namespace {

// Quantizes n values read with `stride` into codes[0..n) (code order of the group).
void QuantizeUniformGroup(const float* x, int n, size_t stride, int bits, uint8_t* codes,
                          f16_t* s16, f16_t* m16) {
  float mn = Sanitize(x[0]);
  float mx = mn;
  for (int i = 1; i < n; ++i) {
    const float v = Sanitize(x[i * stride]);
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  const UniformParams p = MakeUniformParams(mn, mx, bits);
  const float top = static_cast<float>((1 << bits) - 1);
  for (int i = 0; i < n; ++i) {
    const float v = (Sanitize(x[i * stride]) - p.min) * p.inv;
    codes[i] = static_cast<uint8_t>(std::nearbyint(std::min(std::max(v, 0.0f), top)));
  }
  *s16 = p.scale16;
  *m16 = p.min16;
}

}  // namespace

void UniformCodes(const Format& f, int bits, const float* src, int T, int D, uint8_t* c,
                  uint8_t* meta) {
  const int groups = NumGroups(f, T, D);
  std::vector<f16_t> scales(groups), mins(groups);
  if (f.grouping == Grouping::kPerChannel) {
    for (int d = 0; d < D; ++d) {
      QuantizeUniformGroup(src + d, T, static_cast<size_t>(D), bits, &c[static_cast<size_t>(d) * T],
                           &scales[d], &mins[d]);
    }
  } else {
    const int gpt = D / f.group;
    for (int t = 0; t < T; ++t) {
      for (int k = 0; k < gpt; ++k) {
        const size_t off = static_cast<size_t>(t) * D + static_cast<size_t>(k) * f.group;
        QuantizeUniformGroup(src + off, f.group, 1, bits, &c[off], &scales[t * gpt + k],
                             &mins[t * gpt + k]);
      }
    }
  }
  for (int g = 0; g < groups; ++g) {
    StoreF16(scales[g], meta + 2 * g);
    StoreF16(mins[g], meta + 2 * (groups + g));
  }
}

void QuantizeUniform(const Format& f, const float* src, int T, int D, uint8_t* codes,
                     uint8_t* meta) {
  std::vector<uint8_t> c(NumCodes(T, D));
  UniformCodes(f, f.bits, src, T, D, c.data(), meta);
  PackCodes(c.data(), c.size(), f.bits, codes);
}

void UniformDecode(const Format& f, const uint8_t* c, const uint8_t* meta, int T, int D,
                   float* dst) {
  const int groups = NumGroups(f, T, D);
  const int gpt = f.grouping == Grouping::kPerChannel ? 0 : D / f.group;
  for (int t = 0; t < T; ++t) {
    for (int d = 0; d < D; ++d) {
      const bool chan = f.grouping == Grouping::kPerChannel;
      const int g = chan ? d : t * gpt + d / f.group;
      const size_t i = chan ? static_cast<size_t>(d) * T + t : static_cast<size_t>(t) * D + d;
      const float s = F16ToF32(LoadF16(meta + 2 * g));
      const float m = F16ToF32(LoadF16(meta + 2 * (groups + g)));
      dst[static_cast<size_t>(t) * D + d] = static_cast<float>(c[i]) * s + m;
    }
  }
}

void DequantizeUniform(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       float* dst) {
  std::vector<uint8_t> c(NumCodes(T, D));
  UnpackCodes(codes, c.size(), f.bits, c.data());
  UniformDecode(f, c.data(), meta, T, D, dst);
}

}  // namespace hqekv::quant::ref
