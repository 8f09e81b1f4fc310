// Public chunk entry points. They route to the Highway kernels (quant/simd.cc)
// where one exists for the format and shape, else to the scalar reference.
#include "quant/internal.h"

namespace hqekv::quant {

void QuantizeChunk(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta) {
  ref::QuantizeChunk(f, src, T, D, codes, meta);
}

void DequantizeChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     float* dst) {
  ref::DequantizeChunk(f, codes, meta, T, D, dst);
}

void DotChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
              const float* q, float* scores) {
  ref::DotChunk(f, codes, meta, T, D, q, scores);
}

void AxpyChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
               const float* w, float* acc) {
  ref::AxpyChunk(f, codes, meta, T, D, w, acc);
}

}  // namespace hqekv::quant
