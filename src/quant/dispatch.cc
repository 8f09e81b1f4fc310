// Public chunk entry points: the Highway kernels (quant/simd.cc) where one
// exists for the format and shape, else the scalar reference. The Hadamard
// rotation is applied here, around either implementation.
#include <vector>

#include "quant/internal.h"

namespace hqekv::quant {
namespace {

void RotateRows(float* x, int T, int D) {
  if (simd::HadamardRows(x, T, D)) return;
  for (int t = 0; t < T; ++t) HadamardRotate(x + static_cast<size_t>(t) * D, D);
}

// Sanitized (except kF32, stored exactly) and rotated copy of a chunk.
const float* Rotated(const Format& f, const float* src, int T, int D) {
  thread_local std::vector<float> buf;
  const size_t n = NumCodes(T, D);
  if (buf.size() < n) buf.resize(n);
  for (size_t i = 0; i < n; ++i) buf[i] = f.kind == Kind::kF32 ? src[i] : Sanitize(src[i]);
  RotateRows(buf.data(), T, D);
  return buf.data();
}

}  // namespace

void QuantizeChunk(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta) {
  Format g = f;
  if (f.hadamard) {
    src = Rotated(f, src, T, D);
    g.hadamard = false;
  }
  if (!simd::Quantize(g, src, T, D, codes, meta)) ref::QuantizeChunk(g, src, T, D, codes, meta);
}

void DequantizeChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     float* dst) {
  if (!simd::DequantizeStored(f, codes, meta, T, D, dst)) {
    ref::DequantizeStored(f, codes, meta, T, D, dst);
  }
  if (f.hadamard) RotateRows(dst, T, D);
}

void DotChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
              const float* q, float* scores) {
  if (!simd::Dot(f, codes, meta, T, D, q, scores)) ref::DotChunk(f, codes, meta, T, D, q, scores);
}

void AxpyChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
               const float* w, float* acc) {
  if (!simd::Axpy(f, codes, meta, T, D, w, acc)) ref::AxpyChunk(f, codes, meta, T, D, w, acc);
}

}  // namespace hqekv::quant
