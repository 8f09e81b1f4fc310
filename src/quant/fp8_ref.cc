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
  // Integer formulation (no libm), shared with the SIMD kernel bit for bit:
  // round the float's exponent+mantissa bits to m mantissa bits (nearest
  // even; a carry rolls into the exponent) and rebias the exponent.
  const Fp8Params p = Fp8Constants(e4m3);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t abits = bits & 0x7FFFFFFFu;
  float a;
  std::memcpy(&a, &abits, 4);
  uint32_t code;
  if (!(a < p.max_val)) {
    code = p.max_code;  // saturate (and NaN, which callers never pass)
  } else if (a < p.min_normal) {
    // Subnormal range: multiples of 2^(1-bias-m), rounded to nearest even by
    // the 2^23 trick (exact: a * sub_scale < 2^m); 2^m is the smallest normal,
    // whose code is exactly 2^m as well.
    code = static_cast<uint32_t>((a * p.sub_scale + 0x1p23f) - 0x1p23f);
  } else {
    const uint32_t shift = 23 - p.m;
    const uint32_t rounded =
        (abits + ((1u << (shift - 1)) - 1u) + ((abits >> shift) & 1u)) >> shift;
    code = rounded - ((127u - p.bias) << p.m);
    if (code > p.max_code) code = p.max_code;
  }
  return static_cast<uint8_t>(sign | code);
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
  const float v =
      e == 0 ? std::ldexp(static_cast<float>(man), 1 - bias - m)
             : std::ldexp(1.0f + static_cast<float>(man) / static_cast<float>(1 << m), e - bias);
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

void QuantizeFp8(const Format& f, const float* src, int T, int D, uint8_t* codes, uint8_t* meta) {
  const bool e4m3 = f.kind == Kind::kFp8E4M3;
  const size_t n = NumCodes(T, D);
  float amax = 0.0f;
  for (size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(Sanitize(src[i])));
  f16_t s16;
  float inv;
  MakeSymScale(amax, e4m3 ? kFp8E4M3Max : kFp8E5M2Max, &s16, &inv);
  StoreF16(s16, meta);
  for (size_t i = 0; i < n; ++i) codes[i] = EncodeFp8(Sanitize(src[i]) * inv, e4m3);
}

void DequantizeFp8(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   float* dst) {
  const bool e4m3 = f.kind == Kind::kFp8E4M3;
  const float s = F16ToF32(LoadF16(meta));
  const float* table = Fp8DecodeTable(e4m3);
  const size_t n = NumCodes(T, D);
  for (size_t i = 0; i < n; ++i) dst[i] = table[codes[i]] * s;
}

}  // namespace ref
}  // namespace hqekv::quant
