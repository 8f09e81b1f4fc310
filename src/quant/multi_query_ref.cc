// Scalar oracles of the multi-query kernels: the single-query scalar
// reference once per row, and a std::exp softmax.
#include <cmath>
#include <limits>

#include "quant/internal.h"
#include "quant/multi_query.h"

namespace hqekv::quant::ref {

void DotChunkMulti(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   const float* q, size_t q_stride, int m, float* scores, size_t s_stride) {
  for (int h = 0; h < m; ++h) {
    ref::DotChunk(f, codes, meta, T, D, q + h * q_stride, scores + h * s_stride);
  }
}

void AxpyChunkMulti(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    const float* w, size_t w_stride, int m, float* acc, size_t a_stride) {
  for (int h = 0; h < m; ++h) {
    ref::AxpyChunk(f, codes, meta, T, D, w + h * w_stride, acc + h * a_stride);
  }
}

bool SoftmaxRow(float* x, int n) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  float mx = neg_inf;
  for (int i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  if (mx == neg_inf) {
    for (int i = 0; i < n; ++i) x[i] = 0.0f;
    return false;
  }
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = x[i] == neg_inf ? 0.0f : std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.0f / sum;  // sum >= 1: the maximum contributes exp(0)
  for (int i = 0; i < n; ++i) x[i] *= inv;
  return true;
}

}  // namespace hqekv::quant::ref
