// Scalar reference entry points: the oracle the SIMD kernels are tested
// against. Quantize / dequantize run the kind's reference row
// (quant/format_traits.cc) around the Hadamard rotation; Dot/Axpy are defined
// as "dequantize in the storage domain, then a plain float loop" (no rotation
// undone: see format.h), the same for every kind.
#include <vector>

#include "quant/format_traits.h"
#include "quant/internal.h"

namespace hqekv::quant::ref {

void QuantizeRaw(const Format& f, const float* x, int T, int D, uint8_t* codes, uint8_t*) {
  const size_t n = NumCodes(T, D);
  if (f.kind == Kind::kF32) {
    std::memcpy(codes, x, n * sizeof(float));  // oracle kind: stored bit-exact, not sanitized
    return;
  }
  for (size_t i = 0; i < n; ++i) StoreF16(F32ToF16(Sanitize(x[i])), codes + 2 * i);
}

void DequantizeRaw(const Format& f, const uint8_t* codes, const uint8_t*, int T, int D,
                   float* dst) {
  const size_t n = NumCodes(T, D);
  if (f.kind == Kind::kF32) {
    std::memcpy(dst, codes, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; ++i) dst[i] = F16ToF32(LoadF16(codes + 2 * i));
}

void QuantizeChunk(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta) {
  const FormatTraits& tr = Traits(f.kind);
  const float* x = src;
  std::vector<float> rotated;
  if (f.hadamard) {
    const size_t n = NumCodes(T, D);
    rotated.resize(n);
    for (size_t i = 0; i < n; ++i) rotated[i] = tr.sanitize ? Sanitize(src[i]) : src[i];
    for (int t = 0; t < T; ++t) HadamardRotate(rotated.data() + static_cast<size_t>(t) * D, D);
    x = rotated.data();
  }
  tr.ref_quantize(f, x, T, D, codes, meta);
}

void DequantizeStored(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      float* dst) {
  Traits(f.kind).ref_dequantize(f, codes, meta, T, D, dst);
}

void DequantizeChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     float* dst) {
  DequantizeStored(f, codes, meta, T, D, dst);
  if (f.hadamard) {
    for (int t = 0; t < T; ++t) HadamardRotate(dst + static_cast<size_t>(t) * D, D);
  }
}

void DotChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
              const float* q, float* scores) {
  std::vector<float> x(NumCodes(T, D));
  DequantizeStored(f, codes, meta, T, D, x.data());
  for (int t = 0; t < T; ++t) {
    float s = 0.0f;
    for (int d = 0; d < D; ++d) s += q[d] * x[static_cast<size_t>(t) * D + d];
    scores[t] = s;
  }
}

void AxpyChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
               const float* w, float* acc) {
  std::vector<float> x(NumCodes(T, D));
  DequantizeStored(f, codes, meta, T, D, x.data());
  for (int t = 0; t < T; ++t) {
    for (int d = 0; d < D; ++d) acc[d] += w[t] * x[static_cast<size_t>(t) * D + d];
  }
}

}  // namespace hqekv::quant::ref
