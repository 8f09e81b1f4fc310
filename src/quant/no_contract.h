// Included first by every quant translation unit whose float results must be
// bit-identical between the scalar reference and the SIMD kernels: forbids
// fusing a*b+c into one FMA (GCC fuses by default in C++ when FMA is enabled,
// which would change the rounding of sums of squares on AVX2 targets only).
#pragma once

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
