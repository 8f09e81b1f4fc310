// Scalar reference of symmetric int8 per token (kInt8): per token one fp16
// scale s = max|x| / 127; code = round_half_even(clamp(x / s, -127, 127)) as a
// two's-complement byte (-128 never used); x^ = code * s. Codes token-major
// (t*D + d), metadata = T fp16 scales.
#include <algorithm>
#include <cmath>

#include "quant/internal.h"

namespace hqekv::quant::ref {

void QuantizeInt8(const Format&, const float* src, int T, int D, uint8_t* codes, uint8_t* meta) {
  for (int t = 0; t < T; ++t) {
    const float* x = src + static_cast<size_t>(t) * D;
    float amax = 0.0f;
    for (int d = 0; d < D; ++d) amax = std::max(amax, std::fabs(Sanitize(x[d])));
    f16_t s16;
    float inv;
    MakeSymScale(amax, 127.0f, &s16, &inv);
    StoreF16(s16, meta + 2 * t);
    for (int d = 0; d < D; ++d) {
      const float v = std::min(std::max(Sanitize(x[d]) * inv, -127.0f), 127.0f);
      codes[static_cast<size_t>(t) * D + d] =
          static_cast<uint8_t>(static_cast<int8_t>(std::nearbyint(v)));
    }
  }
}

void DequantizeInt8(const Format&, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    float* dst) {
  for (int t = 0; t < T; ++t) {
    const float s = F16ToF32(LoadF16(meta + 2 * t));
    for (int d = 0; d < D; ++d) {
      const size_t i = static_cast<size_t>(t) * D + d;
      dst[i] = static_cast<float>(static_cast<int8_t>(codes[i])) * s;
    }
  }
}

}  // namespace hqekv::quant::ref
