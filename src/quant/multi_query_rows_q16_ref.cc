// Scalar oracle of quant/multi_query_rows_q16.h (int16-query scores over int8
// chunks): the kernel's integer math written out per element.
#include <algorithm>
#include <cmath>
#include <vector>

#include "quant/internal.h"
#include "quant/multi_query_rows_q16.h"

namespace hqekv::quant::ref {

bool DotRowsInt16Query(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                       const float* q, size_t q_stride, int m, float* scores, size_t s_stride) {
  if (m <= 0 || !Int16QueryRowsApply(f, T, D)) return false;
  for (int h = 0; h < m; ++h) {  // every row checked before any score is written
    for (int d = 0; d < D; ++d) {
      if (!std::isfinite(q[h * q_stride + d])) return false;
    }
  }
  std::vector<int16_t> qi(D);
  for (int h = 0; h < m; ++h) {
    const float* qh = q + h * q_stride;
    float amax = 0.0f;
    for (int d = 0; d < D; ++d) amax = std::max(amax, std::abs(qh[d]));
    const float sq = amax > 0.0f ? amax / 32767.0f : 0.0f;
    const float inv = amax > 0.0f ? 32767.0f / amax : 0.0f;
    for (int d = 0; d < D; ++d) qi[d] = static_cast<int16_t>(std::nearbyint(qh[d] * inv));
    for (int t = 0; t < T; ++t) {
      const int8_t* c = reinterpret_cast<const int8_t*>(codes) + static_cast<size_t>(t) * D;
      int32_t sum = 0;
      for (int d = 0; d < D; ++d) sum += qi[d] * c[d];
      const float s = F16ToF32(LoadF16(meta + 2 * static_cast<size_t>(t)));
      scores[h * s_stride + t] = static_cast<float>(sum) * (sq * s);
    }
  }
  return true;
}

}  // namespace hqekv::quant::ref
