// Dense LSB-first packing of b-bit codes (b in {1, 2, 4, 8}): the scalar
// reference of the bit layout documented in quant/README.md.
#include <cstring>

#include "quant/internal.h"

namespace hqekv::quant {

void PackCodes(const uint8_t* codes, size_t n, int bits, uint8_t* out) {
  const size_t nbytes = (n * static_cast<size_t>(bits) + 7) / 8;
  if (bits == 8) {
    std::memcpy(out, codes, n);
    return;
  }
  std::memset(out, 0, nbytes);
  const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1u);
  for (size_t i = 0; i < n; ++i) {
    const size_t bit = i * static_cast<size_t>(bits);  // b divides 8: a code never straddles bytes
    out[bit >> 3] |= static_cast<uint8_t>((codes[i] & mask) << (bit & 7));
  }
}

void UnpackCodes(const uint8_t* packed, size_t n, int bits, uint8_t* codes) {
  if (bits == 8) {
    std::memcpy(codes, packed, n);
    return;
  }
  const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1u);
  for (size_t i = 0; i < n; ++i) {
    const size_t bit = i * static_cast<size_t>(bits);
    codes[i] = static_cast<uint8_t>((packed[bit >> 3] >> (bit & 7)) & mask);
  }
}

}  // namespace hqekv::quant
