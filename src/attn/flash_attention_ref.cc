// Scalar oracle of attn/flash_attention.h: per row, every visible score,
// then a std::exp softmax (max subtracted), then the weighted sum of V rows.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/half.h"
#include "attn/flash_attention.h"

namespace hqekv::attn::ref {
namespace {

// Value d of token t's K (or V) row.
float At(const KvTiles& kv, const void* const* tiles, int64_t t, int d) {
  const void* tile = tiles[t / kv.tile_tokens];
  const size_t i = static_cast<size_t>(t % kv.tile_tokens) * kv.D + d;
  return kv.type == KvRowType::kF16 ? F16ToF32(static_cast<const f16_t*>(tile)[i])
                                    : static_cast<const float*>(tile)[i];
}

}  // namespace

void AttendRows(const KvTiles& kv, const float* q, size_t q_stride, int R, const int64_t* visible,
                float* out, size_t out_stride, const ColumnSums& cols) {
  const int D = kv.D;
  std::vector<float> w;
  for (int r = 0; r < R; ++r) {
    const float* qr = q + r * q_stride;
    float* o = out + r * out_stride;
    std::fill(o, o + D, 0.0f);
    const int64_t n = visible[r];
    if (n == 0) continue;
    w.assign(static_cast<size_t>(n), 0.0f);
    float mx = -INFINITY;
    for (int64_t t = 0; t < n; ++t) {
      float s = 0.0f;
      for (int d = 0; d < D; ++d) s += qr[d] * At(kv, kv.k, t, d);
      w[t] = s;
      mx = std::max(mx, s);
    }
    float sum = 0.0f;
    for (int64_t t = 0; t < n; ++t) sum += (w[t] = std::exp(w[t] - mx));
    for (int64_t t = 0; t < n; ++t) {
      const float wt = w[t] / sum;
      if (cols.sums && r >= cols.first_row) cols.sums[t] += wt;
      for (int d = 0; d < D; ++d) o[d] += wt * At(kv, kv.v, t, d);
    }
  }
}

}  // namespace hqekv::attn::ref
