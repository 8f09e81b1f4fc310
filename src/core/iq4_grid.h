// The 16 values a 4-bit IQ4_NL / IQ4_XS index selects (ggml-common.h's
// kvalues_iq4nl): a non-uniform grid fitted to the bell-shaped distribution
// of weights, denser near 0 than at the ends. Part of the block formats, so
// one table serves the weight kernels (kernels/, GGUF IQ4_NL / IQ4_XS
// tensors) and the KV cache type iq4_nl of src/quant/. A value is
// d * kIq4Values[index] with the block's fp16 scale d; |value| <= 127, so the
// int8 kernels can shift every value by +128 into a byte.
#pragma once

#include <cstdint>

namespace hqekv {

inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace hqekv
