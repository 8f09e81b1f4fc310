// Uniform and normal (grouped) chunk kernels of quant/simd.cc: per token
// (groups along D) and per channel (groups along T), quantize, dequantize,
// dot and axpy.
//
// Part of quant/simd.cc's translation unit only (included there once per
// SIMD target, under its no-contraction pragma, quant/no_contract.h): the
// gemma.cpp "-inl.h" style, the toggle guard below admits one inclusion per
// target.

#if defined(HQEKV_QUANT_SIMD_GROUPED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HQEKV_QUANT_SIMD_GROUPED_INL_H_
#undef HQEKV_QUANT_SIMD_GROUPED_INL_H_
#else
#define HQEKV_QUANT_SIMD_GROUPED_INL_H_
#endif

#include <hwy/highway.h>

#include "quant/simd_codec-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::quant {
namespace HWY_NAMESPACE {
namespace {  // internal linkage, as quant/simd-inl.h

// ------------------------------------------------- per-token uniform / normal

template <class DFT>
void QuantizePerToken(const Format& f, const float* src, int T, int D, uint8_t* codes,
                      uint8_t* meta) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DI di;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int g = f.group, groups = T * (D / g), bits = f.bits;
  const bool normal = f.kind == Kind::kNormal;
  float* p0 = Scratch(0, static_cast<size_t>(groups));
  float* p1 = Scratch(1, static_cast<size_t>(groups));
  float* sc = Scratch(2, static_cast<size_t>(groups) * 3);
  float* mi = Scratch(3, static_cast<size_t>(groups));
  float* inv = normal ? nullptr : sc + groups;
  // Pass 1: group statistics. A group is g consecutive values (groups are
  // contiguous in token-major order).
  int k_done = 0;
  if (normal && g % 8 == 0 && hn::Lanes(DFC()) >= 4) {
    // 8 interleaved partial sums per group in (8 / NC) capped vectors, then
    // the same pairwise combination as ref::NormalStats: bit-identical.
    const DFC dc;
    const int NC = static_cast<int>(hn::Lanes(dc)), A = 8 / NC;
    alignas(32) float p[8];
    for (; k_done < groups; ++k_done) {
      const float* x = src + static_cast<size_t>(k_done) * g;
      hn::Vec<DFC> acc[2] = {hn::Zero(dc), hn::Zero(dc)};
      for (int i = 0; i < g; i += 8) {
        for (int a = 0; a < A; ++a)
          acc[a] = hn::Add(acc[a], SanitizeV(dc, hn::LoadU(dc, x + i + a * NC)));
      }
      for (int a = 0; a < A; ++a) hn::StoreU(acc[a], dc, p + a * NC);
      const float mu = (((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))) /
                       static_cast<float>(g);
      const hn::Vec<DFC> mv = hn::Set(dc, mu);
      acc[0] = acc[1] = hn::Zero(dc);
      for (int i = 0; i < g; i += 8) {
        for (int a = 0; a < A; ++a) {
          const hn::Vec<DFC> dv = hn::Sub(SanitizeV(dc, hn::LoadU(dc, x + i + a * NC)), mv);
          acc[a] = hn::Add(acc[a], hn::Mul(dv, dv));
        }
      }
      for (int a = 0; a < A; ++a) hn::StoreU(acc[a], dc, p + a * NC);
      const float ss = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
      p0[k_done] = mu;
      p1[k_done] = g > 1 ? std::sqrt(ss / static_cast<float>(g - 1)) : 0.0f;
    }
  }
  for (int k = k_done; k < groups; ++k) {
    const float* x = src + static_cast<size_t>(k) * g;
    if (normal) {
      ref::NormalStats(x, g, 1, &p0[k], &p1[k]);  // remaining groups: the reference itself
      continue;
    }
    VF lo = SanitizeV(df, hn::LoadU(df, x)), hi = lo;
    for (int j = N; j < g; j += N) {
      const VF v = SanitizeV(df, hn::LoadU(df, x + j));
      lo = hn::Min(lo, v);
      hi = hn::Max(hi, v);
    }
    p0[k] = hn::GetLane(hn::MinOfLanes(df, lo));
    p1[k] = hn::GetLane(hn::MaxOfLanes(df, hi));
  }
  // Pass 2: metadata (plane 0 = scale / std, plane 1 = minimum / mean).
  uint8_t* plane0 = meta;
  uint8_t* plane1 = meta + 2 * static_cast<size_t>(groups);
  if (normal) {
    NormalParamsBatch(p0, p1, groups, bits, plane0, plane1, sc);
  } else {
    UniformParamsBatch(p0, p1, groups, bits, plane0, plane1, p0 /*scales, unused*/, mi, inv);
  }
  // Pass 3: codes, appended to one dense stream.
  const VU shifts = LaneShifts(du, bits);
  const VF top = hn::Set(df, static_cast<float>((1 << bits) - 1));
  const int nthr = (1 << bits) - 1;
  // 2 and 4 bits: code bytes first, then one vectorized packing pass; 8 bits:
  // the bytes are the codes; 1 bit: N codes -> one lane-sum -> bit writer.
  const bool bytes_first = bits == 2 || bits == 4;
  uint8_t* tmp =
      bytes_first ? reinterpret_cast<uint8_t*>(Scratch(4, NumCodes(T, D) / 4 + 1)) : nullptr;
  BitWriter bw(codes);
  uint8_t* out8 = bytes_first ? tmp : codes;
  const hn::Rebind<uint8_t, DI> d8;
  for (int k = 0; k < groups; ++k) {
    const float* x = src + static_cast<size_t>(k) * g;
    VF thr[3], m, iv;
    if (normal) {
      for (int j = 0; j < nthr; ++j) thr[j] = hn::Set(df, sc[3 * k + j]);
    } else {
      m = hn::Set(df, mi[k]);
      iv = hn::Set(df, inv[k]);
    }
    for (int j = 0; j < g; j += N) {
      const VF v = SanitizeV(df, hn::LoadU(df, x + j));
      const VI c = normal ? NormalCode(df, di, v, thr, nthr) : UniformCode(df, di, v, m, iv, top);
      if (bits == 1) {
        bw.Put(JoinCodes(du, c, shifts), N * bits);
      } else {
        hn::StoreU(hn::DemoteTo(d8, c), d8, out8);
        out8 += N;
      }
    }
  }
  if (bits == 1) bw.Flush();
  if (bytes_first) PackStream(tmp, NumCodes(T, D), bits, codes);
}

void DequantizePerToken(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                        float* dst) {
  const DF df;
  const DI di;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int g = f.group, groups = T * (D / g), bits = f.bits;
  float* a = Scratch(0, static_cast<size_t>(groups));
  float* b = Scratch(1, static_cast<size_t>(groups));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, groups, a, b);
  const Levels<DF> lv(f);
  const VU shifts = LaneShifts(du, bits), mask = hn::Set(du, (1u << bits) - 1u);
  const size_t nbytes = CodeBytes(f, T, D);
  const hn::Rebind<uint8_t, DI> d8;
  size_t pos = 0;  // code index
  for (int k = 0; k < groups; ++k) {
    const VF av = hn::Set(df, a[k]), bv = hn::Set(df, b[k]);
    for (int j = 0; j < g; j += N, pos += N) {
      const VI c = bits == 8 ? hn::PromoteTo(di, hn::LoadU(d8, codes + pos))
                             : FetchCodes(du, codes, nbytes, pos, bits, N, shifts, mask);
      hn::StoreU(hn::MulAdd(lv(c), av, bv), df, dst + pos);
    }
  }
}

void DotPerToken(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                 const float* q, float* scores) {
  const DF df;
  const DI di;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int g = f.group, gpt = D / g, groups = T * gpt, bits = f.bits;
  float* a = Scratch(0, static_cast<size_t>(groups));
  float* b = Scratch(1, static_cast<size_t>(groups));
  float* qsum = Scratch(2, static_cast<size_t>(gpt));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, groups, a, b);
  for (int k = 0; k < gpt; ++k) {
    VF s = hn::Zero(df);
    for (int j = 0; j < g; j += N) s = hn::Add(s, hn::LoadU(df, q + k * g + j));
    qsum[k] = hn::GetLane(hn::SumOfLanes(df, s));
  }
  const Levels<DF> lv(f);
  const VU shifts = LaneShifts(du, bits), mask = hn::Set(du, (1u << bits) - 1u);
  const size_t nbytes = CodeBytes(f, T, D);
  const hn::Rebind<uint8_t, DI> d8;
  size_t pos = 0;
  for (int t = 0; t < T; ++t) {
    VF acc = hn::Zero(df);
    float off = 0.0f;
    for (int k = 0; k < gpt; ++k) {
      const int gi = t * gpt + k;
      const VF av = hn::Set(df, a[gi]);
      off += b[gi] * qsum[k];
      for (int j = 0; j < g; j += N, pos += N) {
        const VI c = bits == 8 ? hn::PromoteTo(di, hn::LoadU(d8, codes + pos))
                               : FetchCodes(du, codes, nbytes, pos, bits, N, shifts, mask);
        acc = hn::MulAdd(hn::Mul(lv(c), av), hn::LoadU(df, q + k * g + j), acc);
      }
    }
    scores[t] = hn::GetLane(hn::SumOfLanes(df, acc)) + off;
  }
}

void AxpyPerToken(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                  const float* w, float* acc) {
  const DF df;
  const DI di;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int g = f.group, gpt = D / g, groups = T * gpt, bits = f.bits;
  float* a = Scratch(0, static_cast<size_t>(groups));
  float* b = Scratch(1, static_cast<size_t>(groups));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, groups, a, b);
  const Levels<DF> lv(f);
  const VU shifts = LaneShifts(du, bits), mask = hn::Set(du, (1u << bits) - 1u);
  const size_t nbytes = CodeBytes(f, T, D);
  const hn::Rebind<uint8_t, DI> d8;
  size_t pos = 0;
  for (int t = 0; t < T; ++t) {
    for (int k = 0; k < gpt; ++k) {
      const int gi = t * gpt + k;
      const VF av = hn::Set(df, w[t] * a[gi]), bv = hn::Set(df, w[t] * b[gi]);
      for (int j = 0; j < g; j += N, pos += N) {
        const VI c = bits == 8 ? hn::PromoteTo(di, hn::LoadU(d8, codes + pos))
                               : FetchCodes(du, codes, nbytes, pos, bits, N, shifts, mask);
        float* o = acc + k * g + j;
        hn::StoreU(hn::Add(hn::MulAdd(lv(c), av, hn::LoadU(df, o)), bv), df, o);
      }
    }
  }
}

// ----------------------------------------------- per-channel uniform / normal
// Channel d's 32 codes are b little-endian 32-bit words at byte 4*b*d; token t
// sits in word (t*b)/32 at bit (t*b)%32. Lanes run over channels, so a vector
// of word w of N channels is a strided (interleaved) load of the words.

template <class DUT, class VU = hn::Vec<DUT>>
HWY_INLINE void StoreWords(DUT du, const VU* words, int nw, uint8_t* out) {
  uint32_t* o = reinterpret_cast<uint32_t*>(out);
  if (nw == 1) {
    hn::StoreU(words[0], du, o);
  } else if (nw == 2) {
    hn::StoreInterleaved2(words[0], words[1], du, o);
  } else {
    hn::StoreInterleaved4(words[0], words[1], words[2], words[3], du, o);
  }
}

template <class DFT>
void QuantizePerChannel(const Format& f, const float* src, int T, int D, uint8_t* codes,
                        uint8_t* meta) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DI di;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int bits = f.bits, per_word = 32 / bits;
  const bool normal = f.kind == Kind::kNormal;
  float* p0 = Scratch(0, static_cast<size_t>(D));
  float* p1 = Scratch(1, static_cast<size_t>(D));
  float* sc = Scratch(2, static_cast<size_t>(D) * 3);
  float* mi = Scratch(3, static_cast<size_t>(D));
  float* inv = normal ? nullptr : sc + D;
  // Pass 1: per-channel statistics, accumulated over tokens in order (the
  // reference's order: identical float results).
  for (int d0 = 0; d0 < D; d0 += N) {
    if (normal) {
      VF sum = hn::Zero(df);
      for (int t = 0; t < T; ++t)
        sum = hn::Add(sum, SanitizeV(df, hn::LoadU(df, src + t * D + d0)));
      const VF mean = hn::Div(sum, hn::Set(df, static_cast<float>(T)));
      VF ss = hn::Zero(df);
      for (int t = 0; t < T; ++t) {
        const VF dv = hn::Sub(SanitizeV(df, hn::LoadU(df, src + t * D + d0)), mean);
        ss = hn::Add(ss, hn::Mul(dv, dv));
      }
      hn::StoreU(mean, df, p0 + d0);
      hn::StoreU(hn::Sqrt(hn::Div(ss, hn::Set(df, static_cast<float>(T - 1)))), df, p1 + d0);
    } else {
      VF lo = SanitizeV(df, hn::LoadU(df, src + d0)), hi = lo;
      for (int t = 1; t < T; ++t) {
        const VF v = SanitizeV(df, hn::LoadU(df, src + t * D + d0));
        lo = hn::Min(lo, v);
        hi = hn::Max(hi, v);
      }
      hn::StoreU(lo, df, p0 + d0);
      hn::StoreU(hi, df, p1 + d0);
    }
  }
  uint8_t* plane0 = meta;
  uint8_t* plane1 = meta + 2 * static_cast<size_t>(D);
  if (normal) {
    NormalParamsBatch(p0, p1, D, bits, plane0, plane1, sc);
  } else {
    UniformParamsBatch(p0, p1, D, bits, plane0, plane1, p0, mi, inv);
  }
  // Pass 2: codes, N channels at a time, one 32-bit word per channel and word index.
  const VF top = hn::Set(df, static_cast<float>((1 << bits) - 1));
  const int nthr = (1 << bits) - 1;
  float* thr_t = Scratch(4, static_cast<size_t>(3) * N);
  for (int d0 = 0; d0 < D; d0 += N) {
    VF thr[3], m, iv;
    if (normal) {
      for (int j = 0; j < nthr; ++j) {
        for (int i = 0; i < N; ++i) thr_t[j * N + i] = sc[3 * (d0 + i) + j];
        thr[j] = hn::LoadU(df, thr_t + j * N);
      }
    } else {
      m = hn::LoadU(df, mi + d0);
      iv = hn::LoadU(df, inv + d0);
    }
    VU words[4];
    for (int w = 0; w < bits; ++w) {
      VU word = hn::Zero(du);
      for (int k = 0; k < per_word; ++k) {
        const int t = w * per_word + k;
        const VF v = SanitizeV(df, hn::LoadU(df, src + t * D + d0));
        const VI c = normal ? NormalCode(df, di, v, thr, nthr) : UniformCode(df, di, v, m, iv, top);
        word = hn::Or(word, hn::ShiftLeftSame(hn::BitCast(du, c), k * bits));
      }
      words[w] = word;
    }
    StoreWords(du, words, bits, codes + static_cast<size_t>(4) * bits * d0);
  }
}

template <class DFT>
void DequantizePerChannel(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                          float* dst) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int bits = f.bits, per_word = 32 / bits;
  float* a = Scratch(0, static_cast<size_t>(D));
  float* b = Scratch(1, static_cast<size_t>(D));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, D, a, b);
  const Levels<DF> lv(f);
  const VU mask = hn::Set(du, (1u << bits) - 1u);
  for (int d0 = 0; d0 < D; d0 += N) {
    VU words[4];
    LoadWords(du, codes + static_cast<size_t>(4) * bits * d0, bits, words);
    const VF av = hn::LoadU(df, a + d0), bv = hn::LoadU(df, b + d0);
    float* out = dst + d0;
    for (int w = 0; w < bits; ++w) {  // token t = w * per_word + k (no division in the loop)
      for (int k = 0; k < per_word; ++k, out += D) {
        const VU c = hn::And(hn::ShiftRightSame(words[w], k * bits), mask);
        const VF lvl = lv(hn::BitCast(DI(), c));
        hn::StoreU(hn::MulAdd(lvl, av, bv), df, out);
      }
    }
  }
}

// scores[t] = sum_d (q_d a_d) level[d][t] + sum_d q_d b_d, lanes over tokens:
// N tokens' codes of one channel are N*b <= 32 consecutive bits of one word.
void DotPerChannel(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                   const float* q, float* scores) {
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int bits = f.bits, nvec = T / N;
  float* a = Scratch(0, static_cast<size_t>(D));
  float* b = Scratch(1, static_cast<size_t>(D));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, D, a, b);
  const Levels<DF> lv(f);
  const VU shifts = LaneShifts(du, bits), mask = hn::Set(du, (1u << bits) - 1u);
  VF acc[8];
  for (int v = 0; v < nvec; ++v) acc[v] = hn::Zero(df);
  VF offv = hn::Zero(df);
  for (int d0 = 0; d0 < D; d0 += N) {
    offv = hn::MulAdd(hn::LoadU(df, q + d0), hn::LoadU(df, b + d0), offv);
  }
  for (int d = 0; d < D; ++d) {
    const uint8_t* cw = codes + static_cast<size_t>(4) * bits * d;
    const VF qa = hn::Set(df, q[d] * a[d]);
    for (int v = 0; v < nvec; ++v) {
      const int bit = v * N * bits;
      const uint32_t word = Load32(cw + 4 * (bit >> 5)) >> (bit & 31);
      const VI c = SplitCodes(du, word, shifts, mask);
      acc[v] = hn::MulAdd(lv(c), qa, acc[v]);
    }
  }
  const VF off = hn::SumOfLanes(df, offv);
  for (int v = 0; v < nvec; ++v) hn::StoreU(hn::Add(acc[v], off), df, scores + v * N);
}

template <class DFT>
void AxpyPerChannel(const Format& f, const uint8_t* codes, const uint8_t* meta, int T, int D,
                    const float* w, float* acc) {
  HQEKV_QUANT_TAGS(DFT);
  const DF df;
  const DU du;
  const int N = static_cast<int>(hn::Lanes(df));
  const int bits = f.bits, per_word = 32 / bits;
  float* a = Scratch(0, static_cast<size_t>(D));
  float* b = Scratch(1, static_cast<size_t>(D));
  AffineFromPlanes<Offset::kRoundTwice>(f, meta, D, a, b);
  const Levels<DF> lv(f);
  const VU mask = hn::Set(du, (1u << bits) - 1u);
  float wsum = 0.0f;
  for (int t = 0; t < T; ++t) wsum += w[t];
  const VF wsv = hn::Set(df, wsum);
  for (int d0 = 0; d0 < D; d0 += N) {
    VU words[4];
    LoadWords(du, codes + static_cast<size_t>(4) * bits * d0, bits, words);
    VF sum = hn::Zero(df);
    for (int wi = 0; wi < bits; ++wi) {
      for (int k = 0; k < per_word; ++k) {
        const VU c = hn::And(hn::ShiftRightSame(words[wi], k * bits), mask);
        const VF wt = hn::Set(df, w[wi * per_word + k]);
        sum = hn::MulAdd(lv(hn::BitCast(DI(), c)), wt, sum);
      }
    }
    const VF o = hn::LoadU(df, acc + d0);
    hn::StoreU(hn::MulAdd(hn::LoadU(df, a + d0), sum, hn::MulAdd(hn::LoadU(df, b + d0), wsv, o)),
               df, acc + d0);
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace hqekv::quant
HWY_AFTER_NAMESPACE();

#endif  // HQEKV_QUANT_SIMD_GROUPED_INL_H_ toggle
