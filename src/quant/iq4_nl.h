// llama.cpp's iq4_nl KV cache type (Kind::kIq4Nl, `-ctk iq4_nl` / `-ctv
// iq4_nl`), 4.5 bits per value.
//
// Layout (the ggml block types' of quant/internal.h): a chunk [T][D], D a
// multiple of 32, is nb = T*D/32 blocks of 32 consecutive values of one
// token. Codes plane: 16 bytes per block, byte j = index j | index j+16 << 4
// (ggml's block_iq4_nl.qs). Metadata plane: nb fp16 scales d (ggml's
// block_iq4_nl.d, moved out of the codes plane as for q4_0). Value j of a
// block: d * kIq4Values[index j] (core/iq4_grid.h).
//
// Quantizer: ggml's quantize_row_iq4_nl_ref (what llama.cpp's CPU backend
// runs when it writes an iq4_nl KV row), reproduced in float32 with the same
// operations in the same order (read, not copied): with max the signed value
// of largest magnitude (first on ties), d0 = max / -127, every value's index
// is the grid point nearest to x / d0 (ties to the larger value), and the
// stored scale is the weighted least-squares refit d = sum(w q x) / sum(w q^2)
// with w = x^2, summed in index order. Departures, only where ggml's output
// is undefined: the input is sanitized first as for every kind (NaN -> 0,
// clamped to +-65504; ggml would store a NaN scale), and a block with
// max|x| < 1e-15 stores d = 0 and every index 8 (ggml leaves the indices of
// the block before). Tests:
// tests/quant/iq4_nl_test.cc against ggml's golden blocks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/internal.h"

namespace hqekv::quant {

inline constexpr int kIq4NlCodeBytes = 16;  // codes plane bytes of one 32-value block

// Plane sizes of a T x D chunk (D a multiple of 32: format_traits.cc's d_block).
inline size_t Iq4NlCodeBytes(const Format&, int T, int D) {
  return kIq4NlCodeBytes * (NumCodes(T, D) / kBlockValues);
}
inline size_t Iq4NlMetaBytes(const Format&, int T, int D) {
  return 2 * (NumCodes(T, D) / kBlockValues);
}

namespace ref {
// The oracle (quant/iq4_nl_ref.cc); the quantizer sanitizes on load.
void QuantizeIq4Nl(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta);
void DequantizeIq4Nl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     float* dst);
// Index of the grid point nearest to v (ties to the larger point).
int Iq4NlIndex(float v);
}  // namespace ref

namespace simd {
// Highway kernels (quant/iq4_nl_simd.cc): dequantize bit-identical to the
// reference; dot / axpy in another summation order (quant/README.md's
// tolerances). False: no fast path here (the reference runs).
bool DequantizeIq4Nl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     float* dst);
bool DotIq4Nl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
              const float* q, float* scores);
bool AxpyIq4Nl(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
               const float* w, float* acc);
}  // namespace simd

}  // namespace hqekv::quant
