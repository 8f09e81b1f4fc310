// Scalar reference of normalized (Gaussian) quantization (kNormal), b in {1, 2, 4}.
// Per group: fp16 mean mu and fp16 unbiased std sigma (divide by n-1, as the
// HqeKV authors do; 0 for a group of one value). A value x gets the code
// k = #{ interior thresholds mu + sigma*u_j strictly below x }, i.e. the
// reconstruction point nearest in probability mass; x^ = mu + sigma * c_k with
// c_k = Phi^-1((k + 1/2) / 2^b). Code order and planes as uniform, with plane 0
// = fp16 stds and plane 1 = fp16 means (multiplier first, offset second).
#include "quant/no_contract.h"  // first: sums of squares must match the SIMD kernels

#include <cmath>
#include <vector>

#include "quant/internal.h"

namespace hqekv::quant::ref {

namespace {

// Pairwise combination of 8 interleaved partial sums (fixed order).
float Combine8(const float* p) {
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

}  // namespace

void NormalStats(const float* x, int n, size_t stride, float* mean, float* stdev) {
  float mu, ss;
  if (stride == 1 && n % 8 == 0) {
    // Contiguous groups (per-token): 8 interleaved partial sums, p[j] over
    // i = j, j+8, j+16, ... in order, then combined pairwise. This is the
    // order 8-lane SIMD produces, so the kernels match bit for bit.
    float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < n; ++i) p[i % 8] += Sanitize(x[i]);
    mu = Combine8(p) / static_cast<float>(n);
    float q[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < n; ++i) {
      const float dv = Sanitize(x[i]) - mu;
      q[i % 8] += dv * dv;
    }
    ss = Combine8(q);
  } else {
    // Strided groups (per-channel) and odd sizes: one sequential sum.
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) sum += Sanitize(x[i * stride]);
    mu = sum / static_cast<float>(n);
    ss = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float dv = Sanitize(x[i * stride]) - mu;
      ss += dv * dv;
    }
  }
  *mean = mu;
  *stdev = n > 1 ? std::sqrt(ss / static_cast<float>(n - 1)) : 0.0f;
}

namespace {

void QuantizeNormalGroup(const float* x, int n, size_t stride, int bits, uint8_t* codes,
                         f16_t* sd16, f16_t* mu16) {
  float mu, sd;
  NormalStats(x, n, stride, &mu, &sd);
  *mu16 = MetaF16(mu);
  *sd16 = MetaF16(sd);
  const float m = F16ToF32(*mu16);
  const float s = F16ToF32(*sd16);
  const int nthr = (1 << bits) - 1;
  float thr[15];
  for (int j = 0; j < nthr; ++j) thr[j] = NormalThreshold(m, s, NormalThresholds(bits)[j]);
  for (int i = 0; i < n; ++i) {
    const float v = Sanitize(x[i * stride]);
    int k = 0;
    for (int j = 0; j < nthr; ++j) k += v > thr[j] ? 1 : 0;
    codes[i] = static_cast<uint8_t>(k);
  }
}

}  // namespace

void QuantizeNormal(const Format& f, const float* src, int T, int D, uint8_t* codes,
                    uint8_t* meta) {
  const int groups = NumGroups(f, T, D);
  std::vector<uint8_t> c(NumCodes(T, D));
  std::vector<f16_t> sds(groups), mus(groups);
  if (f.grouping == Grouping::kPerChannel) {
    for (int d = 0; d < D; ++d) {
      QuantizeNormalGroup(src + d, T, static_cast<size_t>(D), f.bits,
                          &c[static_cast<size_t>(d) * T], &sds[d], &mus[d]);
    }
  } else {
    const int gpt = D / f.group;
    for (int t = 0; t < T; ++t) {
      for (int k = 0; k < gpt; ++k) {
        const size_t off = static_cast<size_t>(t) * D + static_cast<size_t>(k) * f.group;
        QuantizeNormalGroup(src + off, f.group, 1, f.bits, &c[off], &sds[t * gpt + k],
                            &mus[t * gpt + k]);
      }
    }
  }
  PackCodes(c.data(), c.size(), f.bits, codes);
  for (int g = 0; g < groups; ++g) {
    StoreF16(sds[g], meta + 2 * g);
    StoreF16(mus[g], meta + 2 * (groups + g));
  }
}

void DequantizeNormal(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                      float* dst) {
  const int groups = NumGroups(f, T, D);
  std::vector<uint8_t> c(NumCodes(T, D));
  UnpackCodes(codes, c.size(), f.bits, c.data());
  const float* centres = NormalCentres(f.bits);
  const bool chan = f.grouping == Grouping::kPerChannel;
  const int gpt = chan ? 0 : D / f.group;
  for (int t = 0; t < T; ++t) {
    for (int d = 0; d < D; ++d) {
      const int g = chan ? d : t * gpt + d / f.group;
      const size_t i = chan ? static_cast<size_t>(d) * T + t : static_cast<size_t>(t) * D + d;
      const float s = F16ToF32(LoadF16(meta + 2 * g));
      const float m = F16ToF32(LoadF16(meta + 2 * (groups + g)));
      dst[static_cast<size_t>(t) * D + d] = centres[c[i]] * s + m;
    }
  }
}

}  // namespace hqekv::quant::ref
