// Scalar oracles of the multi-query kernels: the single-query scalar
// reference once per row, and a std::exp softmax.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/half.h"
#include "quant/internal.h"
#include "attn/multi_query.h"

namespace hqekv::attn::ref {
using namespace ::hqekv::quant;

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

bool DotChunkMultiInt16Query(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                             int D, const float* q, size_t q_stride, int m, float* scores,
                             size_t s_stride) {
  if (m <= 0 || !Int16QueryApplies(f, T, D)) return false;
  const size_t n = static_cast<size_t>(T) * D;
  std::vector<uint8_t> code(n);  // per-channel order: code[d·T + t]
  if (f.kind == Kind::kUniform3) {
    std::vector<uint8_t> high(n);
    UnpackCodes(codes, n, 2, code.data());
    UnpackCodes(codes + Split3LowBytes(n), n, 1, high.data());
    for (size_t i = 0; i < n; ++i) code[i] = static_cast<uint8_t>(code[i] + 4 * high[i]);
  } else {
    UnpackCodes(codes, n, f.bits, code.data());
  }
  std::vector<float> a(D), b(D), qa(D), sq(m), off(m);
  for (int d = 0; d < D; ++d) {
    a[d] = F16ToF32(LoadF16(meta + 2 * static_cast<size_t>(d)));
    b[d] = F16ToF32(LoadF16(meta + 2 * (static_cast<size_t>(D) + d)));
    if (f.kind == Kind::kNormal) {  // normal-1: level = code, as AffineFromPlanes (fused)
      const float c = kNormalCentres1[1];
      b[d] = std::fma(-c, a[d], b[d]);
      a[d] = 2.0f * c * a[d];
    }
  }
  std::vector<int16_t> qi(static_cast<size_t>(m) * D);
  for (int h = 0; h < m; ++h) {  // every row quantized before any score is written
    const float* qh = q + h * q_stride;
    float amax = 0.0f;
    double o = 0.0;
    for (int d = 0; d < D; ++d) {
      qa[d] = qh[d] * a[d];
      if (!std::isfinite(qa[d])) return false;
      amax = std::max(amax, std::abs(qa[d]));
      o += static_cast<double>(qh[d]) * b[d];
    }
    off[h] = static_cast<float>(o);
    sq[h] = amax > 0.0f ? amax / 32767.0f : 0.0f;
    const float inv = amax > 0.0f ? 32767.0f / amax : 0.0f;
    for (int d = 0; d < D; ++d) {
      qi[static_cast<size_t>(h) * D + d] = static_cast<int16_t>(std::nearbyint(qa[d] * inv));
    }
  }
  for (int h = 0; h < m; ++h) {
    for (int t = 0; t < T; ++t) {
      int32_t sum = 0;
      for (int d = 0; d < D; ++d)
        sum += qi[static_cast<size_t>(h) * D + d] * code[static_cast<size_t>(d) * T + t];
      scores[h * s_stride + t] = std::fma(static_cast<float>(sum), sq[h], off[h]);
    }
  }
  return true;
}

bool AxpyChunkMultiInt16Weights(const Format& f, const uint8_t* codes, const uint8_t* meta, int T,
                                int D, const float* w, size_t w_stride, int m, float* acc,
                                size_t a_stride) {
  if (m <= 0 || !Int16WeightsApply(f, T, D)) return false;
  const size_t n = static_cast<size_t>(T) * D;
  std::vector<uint8_t> code(n);  // per-token order: code[t·D + d]
  UnpackCodes(codes, n, f.bits, code.data());
  const int gpt = D / f.group;
  const size_t groups = static_cast<size_t>(T) * gpt;
  std::vector<float> a(groups), b(groups);  // [t·gpt + g]
  for (size_t i = 0; i < groups; ++i) {
    a[i] = F16ToF32(LoadF16(meta + 2 * i));
    b[i] = F16ToF32(LoadF16(meta + 2 * (groups + i)));
    if (f.kind == Kind::kNormal) {  // normal-1: level = code, as AffineFromPlanes (fused)
      const float c = kNormalCentres1[1];
      b[i] = std::fma(-c, a[i], b[i]);
      a[i] = 2.0f * c * a[i];
    }
  }
  // Every row and column quantized before any accumulator is written.
  std::vector<int16_t> wi(static_cast<size_t>(m) * gpt * T);
  std::vector<float> su(static_cast<size_t>(m) * gpt), off(su.size());
  for (int h = 0; h < m; ++h) {
    const float* wh = w + h * w_stride;
    for (int g = 0; g < gpt; ++g) {
      std::vector<float> u(T);
      float umax = 0.0f;
      double o = 0.0;
      for (int t = 0; t < T; ++t) {
        u[t] = wh[t] * a[static_cast<size_t>(t) * gpt + g];
        if (!std::isfinite(u[t])) return false;
        umax = std::max(umax, std::abs(u[t]));
        o += static_cast<double>(wh[t]) * b[static_cast<size_t>(t) * gpt + g];
      }
      const size_t gi = static_cast<size_t>(h) * gpt + g;
      off[gi] = static_cast<float>(o);
      su[gi] = umax > 0.0f ? umax / 32767.0f : 0.0f;
      const float inv = umax > 0.0f ? 32767.0f / umax : 0.0f;
      for (int t = 0; t < T; ++t) {
        wi[gi * T + t] = static_cast<int16_t>(std::nearbyint(u[t] * inv));
      }
    }
  }
  for (int h = 0; h < m; ++h) {
    for (int d = 0; d < D; ++d) {
      const size_t gi = static_cast<size_t>(h) * gpt + d / f.group;
      int32_t sum = 0;
      for (int t = 0; t < T; ++t) sum += wi[gi * T + t] * code[static_cast<size_t>(t) * D + d];
      acc[h * a_stride + d] += std::fma(static_cast<float>(sum), su[gi], off[gi]);
    }
  }
  return true;
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

void AccumulateF16(uint16_t* sums, const float* w, float scale, int n) {
  for (int j = 0; j < n; ++j) sums[j] = F32ToF16(F16ToF32(sums[j]) + scale * w[j]);
}

}  // namespace hqekv::attn::ref
