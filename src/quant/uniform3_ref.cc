// Scalar reference of 3-bit uniform quantization (kUniform3, "u3"): the
// uniform quantizer of quant/uniform_ref.cc with 2^3 - 1 = 7 steps (same
// formulas, same metadata planes), codes stored as two planes so no code
// straddles a byte: the low 2 bits of every code as a dense 2-bit stream,
// then the high bit as a dense 1-bit stream, both in the code order of the
// grouping (per-token t*D + d, per-channel d*T + t). With T = 32 a channel's
// codes are two 32-bit words in the low plane and one in the high plane.
// See quant/README.md.
#include <vector>

#include "quant/internal.h"

namespace hqekv::quant::ref {

void QuantizeUniform3(const Format& f, const float* src, int T, int D, uint8_t* codes,
                      uint8_t* meta) {
  const size_t n = NumCodes(T, D);
  std::vector<uint8_t> c(n), lo(n), hi(n);
  UniformCodes(f, 3, src, T, D, c.data(), meta);
  for (size_t i = 0; i < n; ++i) {
    lo[i] = c[i] & 3u;
    hi[i] = static_cast<uint8_t>(c[i] >> 2);
  }
  PackCodes(lo.data(), n, 2, codes);
  PackCodes(hi.data(), n, 1, codes + Split3LowBytes(n));
}

void DequantizeUniform3(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                        float* dst) {
  const size_t n = NumCodes(T, D);
  std::vector<uint8_t> c(n), hi(n);
  UnpackCodes(codes, n, 2, c.data());
  UnpackCodes(codes + Split3LowBytes(n), n, 1, hi.data());
  for (size_t i = 0; i < n; ++i) c[i] = static_cast<uint8_t>(c[i] | (hi[i] << 2));
  UniformDecode(f, c.data(), meta, T, D, dst);
}

}  // namespace hqekv::quant::ref
