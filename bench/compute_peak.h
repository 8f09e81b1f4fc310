// One core's fp32 FMA peak, measured in the same run as the kernels it bounds
// (bench_kernels' GEMM / GEMV table, bench_attention's ComputePeak case): 12
// independent chains of 512-bit FMAs, so that the FMA latency is hidden and
// only the issue rate counts. x86-64 only; callers check AVX-512 at run time.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

namespace hqekv::bench {

// Written by every call: a side effect, so that the compiler can neither drop
// nor hoist a call whose arguments do not change (a pure function could be).
inline volatile float g_fma_sink = 0.0f;

// iters x 12 FMAs of 16 lanes: 192 * iters multiply-adds. Returns the value
// it also stores in g_fma_sink.
__attribute__((target("avx512f,fma"), noinline)) inline float FmaChains512(int64_t iters) {
  __m512 a[12];
  for (int j = 0; j < 12; ++j) a[j] = _mm512_set1_ps(1.0f + j * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < 12; ++j) a[j] = _mm512_fmadd_ps(a[j], m, c);
  __m512 t = a[0];
  for (int j = 1; j < 12; ++j) t = _mm512_add_ps(t, a[j]);
  float lanes[16];  // not _mm512_reduce_add_ps: GCC 12 warns inside its own header
  _mm512_storeu_ps(lanes, t);
  g_fma_sink = lanes[0];
  return lanes[0];
}

}  // namespace hqekv::bench
#endif  // __x86_64__
