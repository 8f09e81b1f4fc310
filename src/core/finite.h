// The one check of computed or caller-given floats for NaN and infinity:
// forward activations, data handed to the C API, KV state files.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hqekv {

// Index of the first NaN or infinity of x[0..n), n when all are finite. An
// integer test of the exponent bits (all ones: inf or NaN) that the compiler
// vectorizes; about n / 8 cycles, nothing next to the matrix products.
inline size_t FirstNonFinite(const float* x, size_t n) {
  uint32_t any = 0;
  for (size_t j = 0; j < n; ++j) {
    uint32_t bits;
    std::memcpy(&bits, &x[j], sizeof bits);
    any |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  if (!any) return n;
  for (size_t j = 0; j < n; ++j) {
    if (!std::isfinite(x[j])) return j;
  }
  return n;
}

}  // namespace hqekv
