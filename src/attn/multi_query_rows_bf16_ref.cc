// Scalar oracles of attn/multi_query_rows_bf16.h (bf16 scores and value
// sums over fp8 chunks), and the tables and roundings the kernels share.
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "quant/internal.h"
#include "attn/multi_query_rows_bf16.h"

namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace {
// The largest |x| whose bf16 rounding stays finite with room to spare.
constexpr float kBf16Limit = 0x1p126f;

bool Roundable(float x) { return std::isfinite(x) && std::abs(x) < kBf16Limit; }

// x as the kernels read it: rounded to bf16, 0 when that has exponent field 0.
double AsBf16(float x) { return Bf16Value(RoundBf16(x)); }
}  // namespace

uint16_t RoundBf16(float x) { return F32ToBF16(x); }

float Bf16Value(uint16_t b) { return (b & 0x7F80u) == 0 ? 0.0f : BF16BitsToF32(b); }

const uint16_t* Fp8Bf16Table(bool e4m3) {
  static const auto tables = [] {
    std::array<std::array<uint16_t, 256>, 2> t{};
    for (int k = 0; k < 2; ++k) {
      const float* v = Fp8DecodeTable(k == 1);
      for (int c = 0; c < 256; ++c) t[k][c] = RoundBf16(v[c]);  // exact: <= 3 mantissa bits
    }
    return t;
  }();
  return tables[e4m3 ? 1 : 0].data();
}

namespace ref {

bool DotRowsBf16Query(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      const float* q, size_t q_stride, int m, float* scores, size_t s_stride) {
  if (m <= 0 || !Bf16QueryRowsApply(f, T, D)) return false;
  for (int h = 0; h < m; ++h) {  // every row checked before any score is written
    for (int d = 0; d < D; ++d) {
      if (!Roundable(q[h * q_stride + d])) return false;
    }
  }
  const float* table = Fp8DecodeTable(f.kind == Kind::kFp8E4M3);
  const float s = F16ToF32(LoadF16(meta));
  std::vector<double> qb(D);
  for (int h = 0; h < m; ++h) {
    for (int d = 0; d < D; ++d) qb[d] = AsBf16(q[h * q_stride + d]);
    for (int t = 0; t < T; ++t) {
      const uint8_t* c = codes + static_cast<size_t>(t) * D;
      double sum = 0.0;
      for (int d = 0; d < D; ++d) sum += qb[d] * table[c[d]];
      scores[h * s_stride + t] = static_cast<float>(sum) * s;
    }
  }
  return true;
}

bool AxpyRowsBf16Weights(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                         const float* w, size_t w_stride, int m, float* acc, size_t a_stride) {
  if (m <= 0 || m > 16 || !Bf16WeightsRowsApply(f, T, D)) return false;
  const float s = F16ToF32(LoadF16(meta));
  for (int h = 0; h < m; ++h) {  // every row checked before any output is written
    for (int t = 0; t < T; ++t) {
      if (!Roundable(w[h * w_stride + t] * s)) return false;
    }
  }
  const float* table = Fp8DecodeTable(f.kind == Kind::kFp8E4M3);
  std::vector<double> u(T);
  for (int h = 0; h < m; ++h) {
    for (int t = 0; t < T; ++t) u[t] = AsBf16(w[h * w_stride + t] * s);
    for (int d = 0; d < D; ++d) {
      double sum = 0.0;
      for (int t = 0; t < T; ++t) sum += u[t] * table[codes[static_cast<size_t>(t) * D + d]];
      float& a = acc[h * a_stride + d];
      a += static_cast<float>(sum);
    }
  }
  return true;
}

}  // namespace ref
}  // namespace hqekv::attn
