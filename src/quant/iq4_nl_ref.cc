// Scalar reference of the iq4_nl KV format (quant/iq4_nl.h): the oracle of
// quant/iq4_nl_simd.cc and the only quantizer (its refit sums run in index
// order, so they stay scalar).
#include "quant/no_contract.h"  // first: w*q*x and w*q*q must round as ggml's (no FMA)

#include <cmath>

#include "core/iq4_grid.h"
#include "quant/iq4_nl.h"

namespace hqekv::quant::ref {
namespace {

// Index written for a block whose scale is 0 (any index decodes to 0 there;
// 8 is the grid's +1, so the zeros come out positive).
constexpr uint8_t kIq4NlZeroIndex = 8;
// Blocks with max|x| below this store d = 0 (ggml's GROUP_MAX_EPS).
constexpr float kIq4NlMinAmax = 1e-15f;

// One block of 32 sanitized values (NaN -> 0, clamped to +-65504, as every
// kind but f32 stores its input): indices idx[32] and the fp16 scale.
f16_t Iq4NlQuantizeBlock(const float* x, uint8_t* idx) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlockValues; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kIq4NlMinAmax) {
    for (int j = 0; j < kBlockValues; ++j) idx[j] = kIq4NlZeroIndex;
    return F32ToF16(0.0f);
  }
  const float d0 = max / static_cast<float>(kIq4Values[0]);
  const float id = 1.0f / d0;
  float sumqx = 0.0f, sumq2 = 0.0f;
  for (int j = 0; j < kBlockValues; ++j) {
    const int l = Iq4NlIndex(id * x[j]);
    idx[j] = static_cast<uint8_t>(l);
    const float q = static_cast<float>(kIq4Values[l]);
    const float w = x[j] * x[j];
    sumqx += w * q * x[j];
    sumq2 += w * q * q;
  }
  // sumq2 > 0: the value of largest magnitude has w = amax^2 > 0 and |q| >= 1.
  return F32ToF16(sumqx / sumq2);
}

}  // namespace

int Iq4NlIndex(float v) {
  if (v <= static_cast<float>(kIq4Values[0])) return 0;
  if (v >= static_cast<float>(kIq4Values[15])) return 15;
  // Bisection to the neighbours lo < hi with grid[lo] <= v < grid[hi].
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < static_cast<float>(kIq4Values[mid])) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - static_cast<float>(kIq4Values[lo]) < static_cast<float>(kIq4Values[hi]) - v ? lo : hi;
}

void QuantizeIq4Nl(const Format&, const float* src, int T, int D, uint8_t* codes, uint8_t* meta) {
  const size_t nb = NumCodes(T, D) / kBlockValues;
  float x[kBlockValues];
  uint8_t idx[kBlockValues];
  for (size_t k = 0; k < nb; ++k) {
    for (int j = 0; j < kBlockValues; ++j) x[j] = Sanitize(src[k * kBlockValues + j]);
    StoreF16(Iq4NlQuantizeBlock(x, idx), meta + 2 * k);
    uint8_t* qs = codes + k * kIq4NlCodeBytes;
    for (int j = 0; j < kBlockValues / 2; ++j) {
      qs[j] = static_cast<uint8_t>(idx[j] | (idx[j + 16] << 4));
    }
  }
}

void DequantizeIq4Nl(const Format&, const uint8_t* codes, const uint8_t* meta, int T, int D,
                     float* dst) {
  const size_t nb = NumCodes(T, D) / kBlockValues;
  for (size_t k = 0; k < nb; ++k) {
    const float d = F16ToF32(LoadF16(meta + 2 * k));
    const uint8_t* qs = codes + k * kIq4NlCodeBytes;
    float* y = dst + k * kBlockValues;
    for (int j = 0; j < kBlockValues / 2; ++j) {
      y[j] = d * static_cast<float>(kIq4Values[qs[j] & 0xF]);
      y[j + 16] = d * static_cast<float>(kIq4Values[qs[j] >> 4]);
    }
  }
}

}  // namespace hqekv::quant::ref
