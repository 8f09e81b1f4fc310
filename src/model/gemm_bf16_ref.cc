// Scalar side of the bf16-activation GEMM (gemm_panel.h): the activation
// packing (shared by the fast path, so that its rounding is the oracle's by
// construction) and the oracle GemmBf16Ref, which follows the kernel's
// summation order step by step in fp32.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "model/gemm_panel.h"

namespace hqekv::kernels {

void PackBf16Rows(const float* x, int64_t m, int64_t k, int64_t i0, int64_t i1, uint32_t* words) {
  const int64_t kp = (k + 1) / 2;
  for (int64_t g0 = i0; g0 < i1; g0 += kBf16TileRows) {
    const int64_t rows = std::min(kBf16TileRows, m - g0);
    uint32_t* dst = words + g0 * kp;
    for (int64_t i = 0; i < rows; ++i) {
      const float* xi = x + (g0 + i) * k;
      for (int64_t c = 0; c < k / 2; ++c) {
        dst[c * rows + i] = F32ToBF16(xi[2 * c]) | static_cast<uint32_t>(F32ToBF16(xi[2 * c + 1]))
                                                       << 16;
      }
      if (k % 2) dst[(kp - 1) * rows + i] = F32ToBF16(xi[k - 1]);
    }
  }
}

void ResizeBf16Acts(int64_t m, int64_t k, Bf16Acts* out) {
  out->row_major = false;
  out->ld = 0;
  out->m = m;
  out->k = k;
  out->kp = (k + 1) / 2;
  out->words.resize(static_cast<size_t>(m * out->kp));
}

void ResizeBf16RowMajor(int64_t m, int64_t k, Bf16Acts* out) {
  out->m = m;
  out->k = k;
  out->kp = (k + 1) / 2;
  out->row_major = true;
  out->ld = (out->kp + 15) / 16 * 16;
  const int64_t rows = (m + kAmxRows - 1) / kAmxRows * kAmxRows;
  out->words.resize(static_cast<size_t>(rows * out->ld));
}

void PackBf16RowMajor(const float* x, int64_t i0, int64_t i1, Bf16Acts* out) {
  const int64_t k = out->k, kp = out->kp, ld = out->ld;
  for (int64_t i = i0; i < i1; ++i) {
    const float* xi = x + i * k;
    uint32_t* block = out->words.data() + (i / kAmxRows) * kAmxRows * ld + (i % kAmxRows) * 16;
    for (int64_t c = 0; c < ld; ++c) {
      uint32_t word = 0;
      if (2 * c + 1 < k) {
        word = F32ToBF16(xi[2 * c]) | static_cast<uint32_t>(F32ToBF16(xi[2 * c + 1])) << 16;
      } else if (2 * c < k) {
        word = F32ToBF16(xi[2 * c]);
      }
      block[(c / 16) * kAmxRows * 16 + c % 16] = word;
    }
  }
  if (i1 == out->m) {  // the pad rows of the last block
    for (int64_t i = out->m; i % kAmxRows != 0; ++i) {
      uint32_t* block = out->words.data() + (i / kAmxRows) * kAmxRows * ld + (i % kAmxRows) * 16;
      for (int64_t c = 0; c < ld; c += 16) std::fill_n(block + c * kAmxRows, 16, 0u);
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
