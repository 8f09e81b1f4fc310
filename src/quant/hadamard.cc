// Normalized Walsh-Hadamard transform along one head vector. H = H_D / sqrt(D)
// is orthonormal and symmetric, so applying it twice is the identity and
// <Hq, Hx> = <q, x>; that is why DotChunk takes a rotated query and AxpyChunk
// accumulates in the rotated domain.
#include <cmath>

#include "quant/format.h"

namespace hqekv::quant {

void HadamardRotate(float* x, int D) {
  // In-place butterflies, O(D log D); the Sylvester ordering (natural order).
  for (int h = 1; h < D; h <<= 1) {
    for (int i = 0; i < D; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        const float a = x[j];
        const float b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const float norm = 1.0f / std::sqrt(static_cast<float>(D));
  for (int i = 0; i < D; ++i) x[i] *= norm;
}

}  // namespace hqekv::quant
