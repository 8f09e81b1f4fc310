// Scalar side of the bf16-activation GEMM (gemm_panel.h): the activation
// packing (shared by the fast path, so that its rounding is the oracle's by
// construction) and the oracle GemmBf16Ref, which follows the kernel's
// summation order step by step in fp32.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "kernels/gemm_panel.h"

namespace hqekv::kernels {

namespace {
// Pair c of activation row xi (k values): bf16(xi[2c]) | bf16(xi[2c + 1]) << 16,
// a half past the row 0 (both packings round through here).
uint32_t Bf16Pair(const float* xi, int64_t c, int64_t k) {
  const uint32_t lo = 2 * c < k ? F32ToBF16(xi[2 * c]) : 0;
  const uint32_t hi = 2 * c + 1 < k ? F32ToBF16(xi[2 * c + 1]) : 0;
  return lo | hi << 16;
}
}  // namespace

void PackBf16Rows(const float* x, int64_t m, int64_t k, int64_t i0, int64_t i1, uint32_t* words) {
  const int64_t kp = (k + 1) / 2;
  for (int64_t g0 = i0; g0 < i1; g0 += kBf16TileRows) {
    const int64_t rows = std::min(kBf16TileRows, m - g0);
    uint32_t* dst = words + g0 * kp;
    for (int64_t i = 0; i < rows; ++i) {
      const float* xi = x + (g0 + i) * k;
      for (int64_t c = 0; c < kp; ++c) dst[c * rows + i] = Bf16Pair(xi, c, k);
    }
  }
}

void ResizeBf16Acts(int64_t m, int64_t k, Bf16Acts* out) {
  out->tile_major = false;
  out->ld = 0;
  out->m = m;
  out->k = k;
  out->kp = (k + 1) / 2;
  out->words.resize(static_cast<size_t>(m * out->kp));
}

void ResizeBf16TileMajor(int64_t m, int64_t k, Bf16Acts* out) {
  out->m = m;
  out->k = k;
  out->kp = (k + 1) / 2;
  out->tile_major = true;
  out->ld = (out->kp + 15) / 16 * 16;
  const int64_t rows = (m + kAmxRows - 1) / kAmxRows * kAmxRows;
  out->words.resize(static_cast<size_t>(rows * out->ld));
}

void PackBf16TileMajor(const float* x, int64_t i0, int64_t i1, Bf16Acts* out) {
  const int64_t k = out->k, ld = out->ld;
  // Row i's first 16 pairs (gemm_panel.h); pairs 16s .. 16s + 15 at + 512 s.
  auto row = [&](int64_t i) {
    return out->words.data() + (i / kAmxRows) * kAmxRows * ld + (i % kAmxRows) * 16;
  };
  for (int64_t i = i0; i < i1; ++i) {
    uint32_t* dst = row(i);
    for (int64_t c = 0; c < ld; ++c)
      dst[(c / 16) * kAmxRows * 16 + c % 16] = Bf16Pair(x + i * k, c, k);
  }
  if (i1 == out->m) {  // the pad rows of the last block
    for (int64_t i = out->m; i % kAmxRows != 0; ++i) {
      for (int64_t c = 0; c < ld; c += 16) std::fill_n(row(i) + c * kAmxRows, 16, 0u);
    }
  }
}

namespace {
bool amx_enabled = true;
}  // namespace
void SetBf16Amx(bool on) { amx_enabled = on; }
bool Bf16AmxEnabled() { return amx_enabled; }

void PackBf16Acts(const float* x, int64_t m, int64_t k, Bf16Acts* out) {
  ResizeBf16Acts(m, k, out);
  PackBf16Rows(x, m, k, 0, m, out->words.data());
}

void GemmBf16Ref(const WeightMatrix& w, const float* x, int64_t m, float* y) {
  const int64_t k = w.k;
  std::vector<float> xr(k + 1), wr(k + 1);
  for (int64_t r = 0; r < w.n; ++r) {
    uint16_t b = 0;
    for (int64_t c = 0; c < k; ++c) {
      std::memcpy(&b, w.row(r) + 2 * c, 2);
      wr[c] = BF16BitsToF32(b);
    }
    wr[k] = 0.f;  // the odd k's pad
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < k; ++c) xr[c] = BF16BitsToF32(F32ToBF16(x[i * k + c]));
      xr[k] = 0.f;
      float acc = 0.f;
      for (int64_t k0 = 0; k0 < k; k0 += kBf16Kc) {
        const int64_t k1 = std::min(k, k0 + kBf16Kc);
        float s = 0.f;
        for (int64_t c = k0; c < k1; c += 2) {
          // Products of two bf16 values are exact (in fp32 and double): only
          // the sums round, each to fp32 (the sum of two floats rounded
          // through double is the correctly rounded fp32 sum: 53 >= 2 x 24 + 2).
          // Written in double on purpose: GCC 12.2 at -O2 / -O3 miscompiles
          // the plain fp32 form `s = s + odd; s = s + even;` of this loop (its
          // SLP vectorizer adds the even product twice: 1x1 + 2x10 + 3x100 +
          // 4x1000 came out 4322 and 4622).
          s = static_cast<float>(double{s} + double{wr[c + 1]} * xr[c + 1]);
          s = static_cast<float>(double{s} + double{wr[c]} * xr[c]);
        }
        acc = k0 == 0 ? s : acc + s;
      }
      y[i * w.n + r] = acc;
    }
  }
}

}  // namespace hqekv::kernels
