// Public chunk entry points: the kind's fast kernel (quant/format_traits.h)
// where one exists for the format and shape, else its scalar reference. The
// Hadamard rotation is applied here, around either implementation.
#include <vector>

#include "quant/format_traits.h"
#include "quant/internal.h"

namespace hqekv::quant {
namespace {

void RotateRows(float* x, int T, int D) {
  if (simd::HadamardRows(x, T, D)) return;
  for (int t = 0; t < T; ++t) HadamardRotate(x + static_cast<size_t>(t) * D, D);
}

// Sanitized (unless the kind stores its input exactly) and rotated copy of a chunk.
const float* Rotated(const FormatTraits& tr, const float* src, int T, int D) {
  thread_local std::vector<float> buf;
  const size_t n = NumCodes(T, D);
  if (buf.size() < n) buf.resize(n);
  for (size_t i = 0; i < n; ++i) buf[i] = tr.sanitize ? Sanitize(src[i]) : src[i];
  RotateRows(buf.data(), T, D);
  return buf.data();
}

}  // namespace

void QuantizeChunk(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta) {
  const FormatTraits& tr = Traits(f.kind);
  Format g = f;
  if (f.hadamard) {
    src = Rotated(tr, src, T, D);
    g.hadamard = false;
  }
  if (tr.fast_quantize == nullptr || !tr.fast_quantize(g, src, T, D, codes, meta)) {
    tr.ref_quantize(g, src, T, D, codes, meta);
  }
}

void DequantizeChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     float* dst) {
  const FormatTraits& tr = Traits(f.kind);
  if (tr.fast_dequantize == nullptr || !tr.fast_dequantize(f, codes, meta, T, D, dst)) {
    tr.ref_dequantize(f, codes, meta, T, D, dst);
  }
  if (f.hadamard) RotateRows(dst, T, D);
}

void DotChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
              const float* q, float* scores) {
  const FastDotFn fast = Traits(f.kind).fast_dot;
  if (fast == nullptr || !fast(f, codes, meta, T, D, q, scores)) {
    ref::DotChunk(f, codes, meta, T, D, q, scores);
  }
}

void AxpyChunk(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
               const float* w, float* acc) {
  const FastAxpyFn fast = Traits(f.kind).fast_axpy;
  if (fast == nullptr || !fast(f, codes, meta, T, D, w, acc)) {
    ref::AxpyChunk(f, codes, meta, T, D, w, acc);
  }
}

}  // namespace hqekv::quant
