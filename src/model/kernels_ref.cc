// Scalar reference kernels: the oracle of the SIMD kernels in kernels_hwy.cc.
#include <cstring>
#include <vector>

#include "core/half.h"
#include "model/kernels.h"

namespace hqekv::kernels {
namespace {

float LoadHalf(const uint8_t* p) {
  f16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

float BF16ToF32(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Q4_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
// Bytes 0..3: low 6 bits = scales 0..3, top 2 bits = high bits of scales 4..7;
// bytes 4..7: the same for mins; bytes 8..11: low nibble = low 4 bits of
// scales 4..7, high nibble = low 4 bits of mins 4..7.
void ScaleMinK4(int j, const uint8_t* s, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The block decoders below hard-code the offsets of io/gguf_types.h's layouts.
static_assert(BlockBytes(TensorType::kQ4_K) == 144 && BlockSize(TensorType::kQ4_K) == 256);
static_assert(BlockBytes(TensorType::kQ6_K) == 210 && BlockSize(TensorType::kQ6_K) == 256);
static_assert(BlockBytes(TensorType::kQ8_0) == 34 && BlockBytes(TensorType::kQ4_0) == 18);

void DequantBlockQ4K(const uint8_t* b, float* y) {
  const float d = LoadHalf(b), dmin = LoadHalf(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int g = 0; g < 4; ++g) {
    int sc1, m1, sc2, m2;
    ScaleMinK4(2 * g, scales, &sc1, &m1);
    ScaleMinK4(2 * g + 1, scales, &sc2, &m2);
    const uint8_t* q = qs + 32 * g;
    for (int l = 0; l < 32; ++l) y[64 * g + l] = d * sc1 * (q[l] & 0x0F) - dmin * m1;
    for (int l = 0; l < 32; ++l) y[64 * g + 32 + l] = d * sc2 * (q[l] >> 4) - dmin * m2;
  }
}

void DequantBlockQ6K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = LoadHalf(b + 208);
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[is + 0] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

int64_t RowBytes(TensorType t, int64_t k) { return k / BlockSize(t) * BlockBytes(t); }

Status CheckRowLength(TensorType t, int64_t k, const std::string& what) {
  if (k <= 0 || k % BlockSize(t) != 0) {
    return MakeError(what + ": row length " + std::to_string(k) + " is not a positive multiple of " +
                     std::to_string(BlockSize(t)) + " as " + TensorTypeName(t) + " requires");
  }
  return Status::Ok();
}

void DequantizeRowRef(TensorType t, const void* row, int64_t k, float* out) {
  const uint8_t* p = static_cast<const uint8_t*>(row);
  switch (t) {
    case TensorType::kF32:
      std::memcpy(out, p, k * 4);
      return;
    case TensorType::kF16:
      for (int64_t i = 0; i < k; ++i) out[i] = LoadHalf(p + 2 * i);
      return;
    case TensorType::kBF16:
      for (int64_t i = 0; i < k; ++i) {
        uint16_t b;
        std::memcpy(&b, p + 2 * i, 2);
        out[i] = BF16ToF32(b);
      }
      return;
    case TensorType::kQ8_0:
      for (int64_t b = 0; b < k / 32; ++b, p += 34) {
        const float d = LoadHalf(p);
        for (int j = 0; j < 32; ++j) out[32 * b + j] = d * static_cast<int8_t>(p[2 + j]);
      }
      return;
    case TensorType::kQ4_0:
      for (int64_t b = 0; b < k / 32; ++b, p += 18) {
        const float d = LoadHalf(p);
        for (int j = 0; j < 16; ++j) {
          out[32 * b + j] = d * ((p[2 + j] & 0x0F) - 8);
          out[32 * b + 16 + j] = d * ((p[2 + j] >> 4) - 8);
        }
      }
      return;
    case TensorType::kQ4_K:
      for (int64_t b = 0; b < k / 256; ++b) DequantBlockQ4K(p + 144 * b, out + 256 * b);
      return;
    case TensorType::kQ6_K:
      for (int64_t b = 0; b < k / 256; ++b) DequantBlockQ6K(p + 210 * b, out + 256 * b);
      return;
  }
}

double DotRef(TensorType t, const void* row, const float* x, int64_t k) {
  std::vector<float> w(k);
  DequantizeRowRef(t, row, k, w.data());
  double s = 0;
  for (int64_t i = 0; i < k; ++i) s += static_cast<double>(w[i]) * x[i];
  return s;
}

void MatMulRef(const WeightMatrix& w, const float* x, int64_t m, float* y) {
  std::vector<float> row(w.k);
  for (int64_t r = 0; r < w.n; ++r) {
    DequantizeRowRef(w.type, w.row(r), w.k, row.data());
    for (int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (int64_t c = 0; c < w.k; ++c) s += static_cast<double>(row[c]) * x[i * w.k + c];
      y[i * w.n + r] = static_cast<float>(s);
    }
  }
}

}  // namespace hqekv::kernels
