// Element-wise steps of the forward pass between the matrix products: RMS
// norm, SwiGLU and the residual add. They run once per token and layer over
// d_model or d_ff floats, so on small models and in prefill they are a
// visible share of the time; the SIMD versions (Highway, runtime dispatch)
// keep them off baseline-only scalar code. Each has a scalar oracle (*Ref).
#pragma once

#include <cstddef>

namespace hqekv::kernels {

// out[i] = w[i] * (x[i] / sqrt(mean(x^2) + eps)), i < d (fp32; the sum of
// squares in lanes, so the order differs from RmsNormRef). out may be x.
// A row whose fp32 sum of squares overflows is summed again in double
// (else the norm of a finite row would be all zeros).
void RmsNorm(const float* x, const float* w, int d, float eps, float* out);
void RmsNormRef(const float* x, const float* w, int d, float eps, float* out);

// g[i] = silu(g[i]) * u[i] = g[i] / (1 + exp(-g[i])) * u[i], i < n. The SIMD
// exp is Highway's (a few ulp); exp(-g) is clamped at exp(88) so g < -88
// gives a tiny negative instead of -0. NaN in g or u stays NaN.
void SwiGlu(float* g, const float* u, size_t n);
void SwiGluRef(float* g, const float* u, size_t n);

// x[i] += y[i], i < n (the residual connection).
void AddInto(float* x, const float* y, size_t n);

}  // namespace hqekv::kernels
