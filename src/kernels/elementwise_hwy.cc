// SIMD element-wise steps (elementwise.h); the scalar oracles are at the end.
#include <cmath>

#include "kernels/elementwise.h"

#include "kernels/dispatch.h"

namespace hqekv::kernels {
// 1 / sqrt(mean(x^2) + eps) with the squares summed in double: for rows whose
// fp32 sum of squares overflows (an element past ~1.8e19), where the fp32
// inverse would be 0 and the norm would silently output zeros.
float RmsInverseWide(const float* x, int d, float eps);
}  // namespace hqekv::kernels

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/elementwise_hwy.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

void RmsNormImpl(const float* x, const float* w, int d, float eps, float* out) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t n = static_cast<size_t>(d);
  auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto a = hn::LoadU(df, x + i), b = hn::LoadU(df, x + i + N);
    acc0 = hn::MulAdd(a, a, acc0);
    acc1 = hn::MulAdd(b, b, acc1);
  }
  float ss = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1)));
  for (; i < n; ++i) ss += x[i] * x[i];
  const float inv = std::isfinite(ss) ? 1.0f / std::sqrt(ss / static_cast<float>(d) + eps)
                                      : RmsInverseWide(x, d, eps);
  const auto vinv = hn::Set(df, inv);
  i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::Mul(hn::LoadU(df, w + i), hn::Mul(vinv, hn::LoadU(df, x + i))), df, out + i);
  }
  for (; i < n; ++i) out[i] = w[i] * (inv * x[i]);
}

void SwiGluImpl(float* g, const float* u, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const auto one = hn::Set(df, 1.0f);
  const auto hi = hn::Set(df, 88.0f);  // exp(88) < FLT_MAX: Highway's Exp range
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto a = hn::LoadU(df, g + i);
    const auto e = hn::Exp(df, hn::Min(hn::Neg(a), hi));
    hn::StoreU(hn::Mul(hn::Div(a, hn::Add(one, e)), hn::LoadU(df, u + i)), df, g + i);
  }
  for (; i < n; ++i) {
    const float a = g[i];
    g[i] = a / (1.0f + std::exp(std::min(-a, 88.0f))) * u[i];
  }
}

void AddIntoImpl(float* x, const float* y, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::Add(hn::LoadU(df, x + i), hn::LoadU(df, y + i)), df, x + i);
  for (; i < n; ++i) x[i] += y[i];
}

// This target's entry points (kernels/dispatch.h).
const ElementwiseKernels* ElementwiseKernelTable() {
  static constexpr ElementwiseKernels kTable = {&RmsNormImpl, &SwiGluImpl, &AddIntoImpl};
  return &kTable;
}

}  // namespace HWY_NAMESPACE
}  // namespace hqekv::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::kernels {

HWY_EXPORT(ElementwiseKernelTable);
const ElementwiseKernels& ElementwiseKernelsForCpu() {
  return *HWY_DYNAMIC_DISPATCH(ElementwiseKernelTable)();
}

void RmsNorm(const float* x, const float* w, int d, float eps, float* out) {
  ElementwiseKernelsForCpu().rms_norm(x, w, d, eps, out);
}
void SwiGlu(float* g, const float* u, size_t n) { ElementwiseKernelsForCpu().swiglu(g, u, n); }
void AddInto(float* x, const float* y, size_t n) { ElementwiseKernelsForCpu().add_into(x, y, n); }

float RmsInverseWide(const float* x, int d, float eps) {
  double ss = 0;
  for (int i = 0; i < d; ++i) ss += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(1.0 / std::sqrt(ss / d + eps));
}

// The forward pass's former scalar code, kept as the oracles.
void RmsNormRef(const float* x, const float* w, int d, float eps, float* out) {
  float ss = 0.f;
  for (int i = 0; i < d; ++i) ss += x[i] * x[i];
  const float inv = std::isfinite(ss) ? 1.0f / std::sqrt(ss / static_cast<float>(d) + eps)
                                      : RmsInverseWide(x, d, eps);
  for (int i = 0; i < d; ++i) out[i] = w[i] * (inv * x[i]);
}

void SwiGluRef(float* g, const float* u, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float a = g[i];
    g[i] = a / (1.0f + std::exp(-a)) * u[i];
  }
}

}  // namespace hqekv::kernels
#endif  // HWY_ONCE
