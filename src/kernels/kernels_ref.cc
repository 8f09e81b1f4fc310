// Scalar reference kernels: the oracle of the SIMD kernels in kernels_hwy.cc.
#include <cstring>
#include <vector>

#include "core/half.h"
#include "kernels/kernels.h"

namespace hqekv::kernels {
namespace {

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

// Legacy 32-value blocks with an offset (Q4_1, Q5_1: x = d*q + m) or a
// centred code (Q5_0: x = d*(q - 16)). The 5th bit of value j (j < 32) is bit
// j of the little-endian u32 qh; nibbles as Q4_0 (low: j, high: j + 16).
inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void DequantBlockQ4_1(const uint8_t* b, float* y) {
  const float d = LoadHalf(b), m = LoadHalf(b + 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = (b[4 + j] & 0x0F) * d + m;
    y[j + 16] = (b[4 + j] >> 4) * d + m;
  }
}

void DequantBlockQ5_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint32_t qh = LoadU32(b + 2);
  for (int j = 0; j < 16; ++j) {
    const int lo = ((b[6 + j] & 0x0F) | (((qh >> j) & 1) << 4)) - 16;
    const int hi = ((b[6 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
    y[j] = lo * d;
    y[j + 16] = hi * d;
  }
}

void DequantBlockQ5_1(const uint8_t* b, float* y) {
  const float d = LoadHalf(b), m = LoadHalf(b + 2);
  const uint32_t qh = LoadU32(b + 4);
  for (int j = 0; j < 16; ++j) {
    const int lo = (b[8 + j] & 0x0F) | (((qh >> j) & 1) << 4);
    const int hi = (b[8 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    y[j] = lo * d + m;
    y[j + 16] = hi * d + m;
  }
}

// Q2_K: scales[16] (low nibble scale, high nibble min, one pair per 16
// values), qs[64], fp16 d at 80, dmin at 82. Two halves of 128 values; in a
// half, 2-bit field s (0..3) of qs[32h + l] is value 128h + 32s + l.
void DequantBlockQ2_K(const uint8_t* b, float* y) {
  const uint8_t* sc = b;
  const float d = LoadHalf(b + 80), dmin = LoadHalf(b + 82);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* q = b + 16 + 32 * h;
    for (int s = 0; s < 4; ++s) {
      for (int part = 0; part < 2; ++part) {
        const uint8_t pair = sc[8 * h + 2 * s + part];
        const float dl = d * (pair & 0x0F), ml = dmin * (pair >> 4);
        float* out = y + 128 * h + 32 * s + 16 * part;
        for (int l = 0; l < 16; ++l) out[l] = dl * ((q[16 * part + l] >> (2 * s)) & 3) - ml;
      }
    }
  }
}

// Q3_K's 16 signed 6-bit scales (stored + 32) from its 12 packed bytes: low
// 4 bits of scale i in byte i % 8 (low nibble for i < 8, high for i >= 8),
// high 2 bits in byte 8 + i % 4 at bit 2 * (i / 4).
void ScalesQ3_K(const uint8_t* s, int* out) {
  for (int i = 0; i < 16; ++i) {
    const int low = (i < 8) ? (s[i] & 0x0F) : (s[i - 8] >> 4);
    const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    out[i] = (low | (high << 4)) - 32;
  }
}

// Q3_K: hmask[32] at 0, qs[64] at 32, scales[12] at 96, fp16 d at 108. As
// Q2_K's quant layout; the 3rd bit of value 32g + l (g = 0..7) is bit g of
// hmask[l], and a clear bit subtracts 4.
void DequantBlockQ3_K(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  int scales[16];
  ScalesQ3_K(b + 96, scales);
  const float d = LoadHalf(b + 108);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* q = b + 32 + 32 * h;
    for (int s = 0; s < 4; ++s) {
      const int g = 4 * h + s;
      for (int part = 0; part < 2; ++part) {
        const float dl = d * scales[2 * g + part];
        float* out = y + 32 * g + 16 * part;
        for (int l = 0; l < 16; ++l) {
          const int i = 16 * part + l;
          out[l] = dl * (((q[i] >> (2 * s)) & 3) - ((hm[i] >> g) & 1 ? 0 : 4));
        }
      }
    }
  }
}

// Q5_K: as Q4_K, plus qh[32] at 16: bit 2g of qh[l] is the 5th bit of value
// 64g + l, bit 2g + 1 that of 64g + 32 + l; nibbles at 48.
void DequantBlockQ5_K(const uint8_t* b, float* y) {
  const float d = LoadHalf(b), dmin = LoadHalf(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  for (int g = 0; g < 4; ++g) {
    int sc1, m1, sc2, m2;
    ScaleMinK4(2 * g, scales, &sc1, &m1);
    ScaleMinK4(2 * g + 1, scales, &sc2, &m2);
    const float d1 = d * sc1, mm1 = dmin * m1, d2 = d * sc2, mm2 = dmin * m2;
    const uint8_t* q = b + 48 + 32 * g;
    for (int l = 0; l < 32; ++l)
      y[64 * g + l] = d1 * ((q[l] & 0x0F) + (((qh[l] >> (2 * g)) & 1) << 4)) - mm1;
    for (int l = 0; l < 32; ++l)
      y[64 * g + 32 + l] = d2 * ((q[l] >> 4) + (((qh[l] >> (2 * g + 1)) & 1) << 4)) - mm2;
  }
}

void DequantBlockIQ4_NL(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * kIq4Values[b[2 + j] & 0x0F];
    y[j + 16] = d * kIq4Values[b[2 + j] >> 4];
  }
}

// IQ4_XS: fp16 d, u16 scales_h, scales_l[4], qs[128]. Sub-block i (32 values)
// has the 6-bit scale (nibble i of scales_l) | (bits 2i..2i+1 of scales_h) << 4,
// stored + 32; its 16 bytes of qs are laid out as IQ4_NL's.
void DequantBlockIQ4_XS(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  uint16_t sh;
  std::memcpy(&sh, b + 2, 2);
  for (int i = 0; i < 8; ++i) {
    const int ls = ((b[4 + i / 2] >> (4 * (i % 2))) & 0x0F) | (((sh >> (2 * i)) & 3) << 4);
    const float dl = d * (ls - 32);
    const uint8_t* q = b + 8 + 16 * i;
    for (int j = 0; j < 16; ++j) {
      y[32 * i + j] = dl * kIq4Values[q[j] & 0x0F];
      y[32 * i + j + 16] = dl * kIq4Values[q[j] >> 4];
    }
  }
}

// Calls decode(block, out) for each block of a row of k values of type t.
template <typename F>
void ForBlocks(TensorType t, const uint8_t* p, int64_t k, float* out, F decode) {
  const int bs = BlockSize(t), bb = BlockBytes(t);
  for (int64_t b = 0; b < k / bs; ++b) decode(p + bb * b, out + bs * b);
}

}  // namespace

int64_t RowBytes(TensorType t, int64_t k) { return k / BlockSize(t) * BlockBytes(t); }

Status CheckRowLength(TensorType t, int64_t k, const std::string& what) {
  if (k <= 0 || k % BlockSize(t) != 0) {
    return MakeError(what + ": row length " + std::to_string(k) +
                     " is not a positive multiple of " + std::to_string(BlockSize(t)) + " as " +
                     TensorTypeName(t) + " requires");
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
        out[i] = BF16BitsToF32(b);
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
    case TensorType::kQ4_1:
      return ForBlocks(t, p, k, out, DequantBlockQ4_1);
    case TensorType::kQ5_0:
      return ForBlocks(t, p, k, out, DequantBlockQ5_0);
    case TensorType::kQ5_1:
      return ForBlocks(t, p, k, out, DequantBlockQ5_1);
    case TensorType::kQ2_K:
      return ForBlocks(t, p, k, out, DequantBlockQ2_K);
    case TensorType::kQ3_K:
      return ForBlocks(t, p, k, out, DequantBlockQ3_K);
    case TensorType::kQ5_K:
      return ForBlocks(t, p, k, out, DequantBlockQ5_K);
    case TensorType::kIQ4_NL:
      return ForBlocks(t, p, k, out, DequantBlockIQ4_NL);
    case TensorType::kIQ4_XS:
      return ForBlocks(t, p, k, out, DequantBlockIQ4_XS);
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
