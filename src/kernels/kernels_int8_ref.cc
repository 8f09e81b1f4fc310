// Scalar references of the int8-activation path (oracles of kernels_int8_hwy.cc)
// and its process-wide switch.
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/half.h"
#include "kernels/kernels.h"

namespace hqekv::kernels {
namespace {

std::atomic<bool> g_int8_acts{true};

}  // namespace

bool HasInt8Path(TensorType t) {
  switch (t) {
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kIQ4_NL:
    case TensorType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}
void SetInt8Activations(bool on) { g_int8_acts.store(on, std::memory_order_relaxed); }
bool Int8ActivationsEnabled() { return g_int8_acts.load(std::memory_order_relaxed); }

void QuantizeActsRef(const float* x, int64_t m, int64_t k, Int8Acts* out) {
  HQEKV_DCHECK(k % 32 == 0);
  out->m = m;
  out->k = k;
  out->q.resize(static_cast<size_t>(m * k));
  out->d.resize(static_cast<size_t>(m * k / 32));
  out->s.resize(static_cast<size_t>(m * k / 32));
  out->s16.resize(static_cast<size_t>(m * k / 16));
  for (int64_t b = 0; b < m * k / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    int sum[2] = {0, 0};
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(std::lrintf(xb[j] * id));
      out->q[static_cast<size_t>(32 * b + j)] = static_cast<int8_t>(q);
      sum[j / 16] += q;
    }
    out->d[static_cast<size_t>(b)] = d;
    out->s[static_cast<size_t>(b)] = d * static_cast<float>(sum[0] + sum[1]);
    out->s16[static_cast<size_t>(2 * b)] = d * static_cast<float>(sum[0]);
    out->s16[static_cast<size_t>(2 * b + 1)] = d * static_cast<float>(sum[1]);
  }
}

double DotInt8Ref(TensorType t, const void* row, const Int8Acts& a, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(row);
  const int8_t* q = a.q_row(i);
  const float* d = a.d_row(i);
  const float* s = a.s_row(i);
  double acc = 0;
  if (t == TensorType::kQ8_0) {
    for (int64_t b = 0; b < a.k / 32; ++b, p += 34) {
      int isum = 0;
      for (int j = 0; j < 32; ++j) isum += static_cast<int8_t>(p[2 + j]) * q[32 * b + j];
      acc += static_cast<double>(LoadHalf(p)) * d[b] * isum;
    }
    return acc;
  }
  if (t != TensorType::kQ4_K) {
    // The other types: w exactly as the fp32 oracle decodes it, times d * q.
    std::vector<float> w(static_cast<size_t>(a.k));
    DequantizeRowRef(t, row, a.k, w.data());
    for (int64_t j = 0; j < a.k; ++j) acc += static_cast<double>(w[j]) * d[j / 32] * q[j];
    return acc;
  }
  for (int64_t sb = 0; sb < a.k / 256; ++sb, p += 144) {
    const double dw = LoadHalf(p), dmin = LoadHalf(p + 2);
    const uint8_t* sc = p + 4;
    for (int j = 0; j < 8; ++j) {
      // Sub-block j: low nibbles of qs[32 (j/2) ..] for even j, high for odd.
      int scale, mn;
      if (j < 4) {
        scale = sc[j] & 63;
        mn = sc[j + 4] & 63;
      } else {
        scale = (sc[j + 4] & 0x0F) | ((sc[j - 4] >> 6) << 4);
        mn = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
      }
      const uint8_t* qs = p + 16 + 32 * (j / 2);
      const int64_t blk = 8 * sb + j;
      int isum = 0;
      for (int l = 0; l < 32; ++l) {
        const int w = j % 2 == 0 ? (qs[l] & 15) : (qs[l] >> 4);
        isum += w * q[32 * blk + l];
      }
      acc += dw * scale * d[blk] * isum - dmin * mn * s[blk];
    }
  }
  return acc;
}

}  // namespace hqekv::kernels
