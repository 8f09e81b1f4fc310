// FP8 E4M3 / E5M2 with one fp16 scale per chunk (kFp8E4M3 / kFp8E5M2).
// The chunk is one (layer, KV head) x T tokens, so this is a per-head scale at
// chunk granularity: s = max|x| / FP8_MAX (448 for E4M3, 57344 for E5M2),
// code = fp8(x / s) rounded to nearest even and saturated (no inf, no NaN),
// x^ = fp8value(code) * s. Codes token-major (t*D + d); metadata = 1 fp16.
#include <algorithm>
#include <array>
#include <cmath>

#include "quant/internal.h"

namespace hqekv::quant {

uint8_t EncodeFp8(float v, bool e4m3) {
  const int m = e4m3 ? 3 : 2;
  const int bias = e4m3 ? 7 : 15;
  const uint8_t max_code = e4m3 ? 0x7E : 0x7B;  // 448 = 1.75*2^8, 57344 = 1.75*2^15
  const float max_val = e4m3 ? kFp8E4M3Max : kFp8E5M2Max;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const float a = std::fabs(v);
  if (!(a < max_val)) return sign | max_code;  // saturate (and NaN, which callers never pass)
  if (a < std::ldexp(1.0f, 1 - bias)) {
    // Subnormal range: multiples of 2^(1-bias-m); q == 2^m is the smallest
    // normal, whose code is exactly 2^m as well.
    const float q = std::nearbyint(std::ldexp(a, bias - 1 + m));
    return sign | static_cast<uint8_t>(q);
  }
  uint32_t bits;
  std::memcpy(&bits, &a, 4);
  const int e = static_cast<int>(bits >> 23) - 127;
  const uint32_t mant = bits & 0x7FFFFFu;
  const int shift = 23 - m;
  uint32_t r = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) ++r;  // a carry rolls into the exponent
  const uint32_t code = (static_cast<uint32_t>(e + bias) << m) + r;
  return sign | static_cast<uint8_t>(std::min<uint32_t>(code, max_code));
}

float DecodeFp8(uint8_t code, bool e4m3) {
  const int m = e4m3 ? 3 : 2;
  const int bias = e4m3 ? 7 : 15;
  const uint8_t mag = code & 0x7F;
  // Codes we never emit (E4M3 NaN 0x7F, E5M2 inf/NaN >= 0x7C) decode to the
  // largest finite value, so corrupted input can never produce NaN.
  const uint8_t max_code = e4m3 ? 0x7E : 0x7B;
  const int c = std::min<int>(mag, max_code);
  const int e = c >> m;
  const int man = c & ((1 << m) - 1);
  const float v = e == 0 ? std::ldexp(static_cast<float>(man), 1 - bias - m)
                         : std::ldexp(1.0f + static_cast<float>(man) / static_cast<float>(1 << m),
                                      e - bias);
  return (code & 0x80) ? -v : v;
}

const float* Fp8DecodeTable(bool e4m3) {
  static const auto tables = [] {
    std::array<std::array<float, 256>, 2> t{};
    for (int c = 0; c < 256; ++c) {
      t[0][c] = DecodeFp8(static_cast<uint8_t>(c), false);
      t[1][c] = DecodeFp8(static_cast<uint8_t>(c), true);
    }
    return t;
  }();
  return tables[e4m3 ? 1 : 0].data();
}

namespace ref {

void QuantizeFp8(bool e4m3, const float* src, int T, int D, uint8_t* codes, uint8_t* meta) {
  const size_t n = NumCodes(T, D);
  float amax = 0.0f;
  for (size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(Sanitize(src[i])));
  f16_t s16;
  float inv;
  MakeSymScale(amax, e4m3 ? kFp8E4M3Max : kFp8E5M2Max, &s16, &inv);
  StoreF16(s16, meta);
  for (size_t i = 0; i < n; ++i) codes[i] = EncodeFp8(Sanitize(src[i]) * inv, e4m3);
}

void DequantizeFp8(bool e4m3, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   float* dst) {
  const float s = F16ToF32(LoadF16(meta));
  const float* table = Fp8DecodeTable(e4m3);
  const size_t n = NumCodes(T, D);
  for (size_t i = 0; i < n; ++i) dst[i] = table[codes[i]] * s;
}

}  // namespace ref
}  // namespace hqekv::quant
