// IEEE 754 binary16 <-> binary32 conversion (round to nearest even),
// bit-exact and independent of compiler support for _Float16. Used for every
// fp16 value the cache stores (payload, scales, minima, means, stds).
#pragma once

#include <cstdint>
#include <cstring>

namespace hqekv {

using f16_t = uint16_t;  // raw binary16 bits

inline float F16ToF32(f16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      uint32_t m = man;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((m & 0x3FFu) << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline f16_t F32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or NaN
    return static_cast<f16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477FF000u) return static_cast<f16_t>(sign | 0x7C00u);  // overflow -> inf
  if (abs < 0x38800000u) {                                            // result is subnormal or zero
    if (abs < 0x33000000u) return static_cast<f16_t>(sign);  // < half the smallest subnormal
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return static_cast<f16_t>(sign | r);
  }
  uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  const uint32_t rem = r & 0x1FFFu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<f16_t>(sign | r);
}

// The fp16 value stored at p (unaligned, as the scales inside GGUF blocks).
inline float LoadHalf(const uint8_t* p) {
  f16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// Round a float through fp16 and back (what storing it in fp16 does).
inline float RoundF16(float f) { return F16ToF32(F32ToF16(f)); }

// bfloat16 (the high 16 bits of a binary32) <-> binary32. F32ToBF16 rounds to
// nearest even (subnormals kept, not flushed; NaN stays a quiet NaN).
inline float BF16BitsToF32(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t F32ToBF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace hqekv
