// Scalar oracles of attn/multi_query_rows_q16.h (int16-query scores and
// int16-weight value sums over int8 and q8_0 chunks): the kernels' integer math
// written out per element.
#include <algorithm>
#include <cmath>
#include <vector>

#include "quant/internal.h"
#include "attn/multi_query_rows_q16.h"

namespace hqekv::attn::ref {
using namespace ::hqekv::quant;
namespace {
// x[0, n) rounded to int16 as the kernels do: xi[i] = round(x[i] / step),
// step = max|x| / 32767 (0 for an all-zero row). One query row, or one row
// of softmax weights (times the scales) for the V sums.
void RoundRowToInt16(const float* x, size_t n, int16_t* xi, float* step) {
  float amax = 0.0f;
  for (size_t i = 0; i < n; ++i) amax = std::max(amax, std::abs(x[i]));
  *step = amax > 0.0f ? amax / 32767.0f : 0.0f;
  const float inv = amax > 0.0f ? 32767.0f / amax : 0.0f;
  for (size_t i = 0; i < n; ++i) xi[i] = static_cast<int16_t>(std::nearbyint(x[i] * inv));
}

// p[0, n) summed as adjacent pairs, then pairs of those (n a power of two).
float TreeSum(const float* p, int n) {
  if (n == 1) return p[0];
  return TreeSum(p, n / 2) + TreeSum(p + n / 2, n / 2);
}
}  // namespace

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
    float sq = 0.0f;
    RoundRowToInt16(q + h * q_stride, D, qi.data(), &sq);
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

bool AxpyRowsInt16Weights(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                          const float* w, size_t w_stride, int m, float* acc, size_t a_stride) {
  if (m <= 0 || m > 16 || !Int16WeightsRowsApply(f, T, D)) return false;
  std::vector<float> s(T), u(static_cast<size_t>(m) * T);
  for (int t = 0; t < T; ++t) s[t] = F16ToF32(LoadF16(meta + 2 * static_cast<size_t>(t)));
  for (int h = 0; h < m; ++h) {  // every row checked before any output is written
    for (int t = 0; t < T; ++t) {
      u[h * T + t] = w[h * w_stride + t] * s[t];
      if (!std::isfinite(u[h * T + t])) return false;
    }
  }
  std::vector<int16_t> ui(T);
  for (int h = 0; h < m; ++h) {
    float su = 0.0f;
    RoundRowToInt16(u.data() + static_cast<size_t>(h) * T, T, ui.data(), &su);
    for (int d = 0; d < D; ++d) {
      int32_t sum = 0;
      for (int t = 0; t < T; ++t) {
        sum += ui[t] * reinterpret_cast<const int8_t*>(codes)[static_cast<size_t>(t) * D + d];
      }
      float& a = acc[h * a_stride + d];
      a = std::fma(static_cast<float>(sum), su, a);
    }
  }
  return true;
}

bool DotRowsQ8_0Int16Query(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                           const float* q, size_t q_stride, int m, float* scores, size_t s_stride) {
  if (m <= 0 || !Q8_0QueryRowsApply(f, T, D)) return false;
  for (int h = 0; h < m; ++h) {  // every row checked before any score is written
    for (int d = 0; d < D; ++d) {
      if (!std::isfinite(q[h * q_stride + d])) return false;
    }
  }
  const int per_row = D / kBlockValues;
  std::vector<int16_t> qi(D);
  std::vector<float> p(per_row);
  const int8_t* c = reinterpret_cast<const int8_t*>(codes);
  for (int h = 0; h < m; ++h) {
    float sq = 0.0f;
    RoundRowToInt16(q + h * q_stride, D, qi.data(), &sq);
    for (int t = 0; t < T; ++t) {
      for (int b = 0; b < per_row; ++b) {
        const size_t k = static_cast<size_t>(t) * per_row + b;
        int32_t sum = 0;
        for (int j = 0; j < kBlockValues; ++j) sum += qi[kBlockValues * b + j] * c[32 * k + j];
        p[b] = static_cast<float>(sum) * F16ToF32(LoadF16(meta + 2 * k));
      }
      scores[h * s_stride + t] = TreeSum(p.data(), per_row) * sq;
    }
  }
  return true;
}

bool AxpyRowsQ8_0Int16Weights(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                              int D, const float* w, size_t w_stride, int m, float* acc,
                              size_t a_stride) {
  if (m <= 0 || m > 16 || !Q8_0WeightsRowsApply(f, T, D)) return false;
  const int per_row = D / kBlockValues;
  const size_t nb = static_cast<size_t>(T) * per_row;
  std::vector<float> s(nb), u(static_cast<size_t>(m) * nb);
  for (size_t k = 0; k < nb; ++k) s[k] = F16ToF32(LoadF16(meta + 2 * k));
  for (int h = 0; h < m; ++h) {  // every row checked before any output is written
    for (size_t k = 0; k < nb; ++k) {
      u[h * nb + k] = w[h * w_stride + k / per_row] * s[k];
      if (!std::isfinite(u[h * nb + k])) return false;
    }
  }
  std::vector<int16_t> ui(nb);
  const int8_t* c = reinterpret_cast<const int8_t*>(codes);
  for (int h = 0; h < m; ++h) {
    float su = 0.0f;
    RoundRowToInt16(u.data() + h * nb, nb, ui.data(), &su);
    for (int d = 0; d < D; ++d) {
      int32_t sum = 0;
      for (int t = 0; t < T; ++t) {
        sum += ui[static_cast<size_t>(t) * per_row + d / kBlockValues] *
               c[static_cast<size_t>(t) * D + d];
      }
      float& a = acc[h * a_stride + d];
      a = std::fma(static_cast<float>(sum), su, a);
    }
  }
  return true;
}

}  // namespace hqekv::attn::ref
