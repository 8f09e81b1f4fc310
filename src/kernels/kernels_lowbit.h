// Fused dequantize-and-dot kernels (Highway, runtime dispatch) for the
// low-bit GGUF types Q2_K, Q3_K, IQ4_NL and IQ4_XS (block layouts in
// kernels_ref.cc). Oracle: DotRef (kernels.h). Kept apart from
// kernels_hwy.cc, whose DotAny calls DotLowBit for these types.
#pragma once

#include <cstdint>

#include "io/gguf_types.h"

namespace hqekv::kernels {

// True for the four types DotLowBit handles.
bool IsLowBitType(TensorType t);

// Dot of a row of k values (k a multiple of the type's block) with x[k];
// fp32 accumulation. t must satisfy IsLowBitType.
float DotLowBit(TensorType t, const void* row, const float* x, int64_t k);

}  // namespace hqekv::kernels
