// Exact ties: quant/README.md promises round-half-to-even for uniform, int8,
// fp8 and f16 codes, and "ties go down" for the normalized quantizer. Each
// test builds a chunk whose scaled values land exactly on .5 (or exactly on a
// normal threshold) and asserts every code, for the scalar reference and for
// the dispatched kernels on every SIMD target this CPU runs. Codes are read
// back with the README's packing rules (LSB-first, code order t*D+d per
// token, d*T+t per channel), independently of the library's unpacker.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/half.h"
#include "quant/format.h"
#include "quant_test_util.h"

namespace hqekv::quant {
namespace {

using testing::Encode;
using testing::Encoded;

// Code i of the stream, per the README's packing (B bits, LSB-first; fp8 and
// int8 one byte; f16 two bytes little-endian).
// n: codes in the chunk (T*D).
uint32_t CodeAt(const Format& f, const Encoded& e, size_t i, size_t n) {
  if (f.kind == Kind::kF16) return e.codes[2 * i] | (uint32_t{e.codes[2 * i + 1]} << 8);
  if (f.kind == Kind::kUniform3) {
    // README: the low 2 bits as a dense 2-bit stream, then the high bits as a
    // dense 1-bit stream starting at byte ceil(2 n / 8).
    const uint32_t lo = (e.codes[i / 4] >> (2 * (i % 4))) & 3u;
    const uint32_t hi = (e.codes[(2 * n + 7) / 8 + i / 8] >> (i % 8)) & 1u;
    return lo | (hi << 2);
  }
  const int B = f.bits;
  const size_t bit = i * B;
  return (e.codes[bit / 8] >> (bit % 8)) & ((1u << B) - 1u);
}

// Index of (t, d) in the code stream.
size_t StreamIndex(const Format& f, int T, int D, int t, int d) {
  return f.grouping == Grouping::kPerChannel &&
                 (f.kind == Kind::kUniform || f.kind == Kind::kNormal || f.kind == Kind::kUniform3)
             ? static_cast<size_t>(d) * T + t
             : static_cast<size_t>(t) * D + d;
}

// A chunk to quantize and, per element of [T][D], the code it must get
// (kAny: not asserted).
constexpr uint32_t kAny = 0xFFFFFFFFu;
struct TieCase {
  TieCase(std::string n, const Format& fmt, int t, int d)
      : name(std::move(n)),
        f(fmt),
        T(t),
        D(d),
        x(static_cast<size_t>(t) * d),
        want(x.size(), kAny) {}
  std::string name;
  Format f;
  int T, D;
  std::vector<float> x;        // [T][D]
  std::vector<uint32_t> want;  // [T][D]
};

// Runs the case through the scalar reference and the dispatched kernels
// (every SIMD target) and compares every asserted code.
void ExpectCodes(const TieCase& c) {
  SCOPED_TRACE(c.name);
  ASSERT_TRUE(Validate(c.f, c.T, c.D).ok()) << c.name;
  auto check = [&](bool reference) {
    const Encoded e = Encode(c.f, c.x, c.T, c.D, reference);
    int bad = 0;
    for (int t = 0; t < c.T; ++t) {
      for (int d = 0; d < c.D; ++d) {
        const uint32_t want = c.want[static_cast<size_t>(t) * c.D + d];
        if (want == kAny) continue;
        const uint32_t got =
            CodeAt(c.f, e, StreamIndex(c.f, c.T, c.D, t, d), static_cast<size_t>(c.T) * c.D);
        if (got != want && bad++ < 5) {
          ADD_FAILURE() << (reference ? "reference" : "dispatched") << ": x[" << t << "][" << d
                        << "] = " << c.x[static_cast<size_t>(t) * c.D + d] << " got code " << got
                        << ", want " << want;
        }
      }
    }
  };
  check(true);
  check(false);
  testing::RunOnEachTarget([&](int64_t) { check(false); });
}

uint32_t HalfEven(uint32_t j) { return j % 2 == 0 ? j : j + 1; }  // code of the tie j + 0.5

// Group membership of (t, d): (group id, index within the group, group size).
struct GroupPos {
  int id, k, n;
};
GroupPos GroupOf(const Format& f, int T, int D, int t, int d) {
  if (f.grouping == Grouping::kPerChannel) return {d, t, T};
  const int g = f.kind == Kind::kInt8 ? D : f.group;
  return {t * (D / g) + d / g, d % g, g};
}

// Uniform B-bit chunk: each group gets its own minimum m and power-of-two
// step s (so s16 = s, inv = 1/s exactly), holds m and m + (2^B-1)s (codes 0
// and 2^B-1, at a position rotating with the group), and otherwise ties
// m + (j + 1/2)s (code: j rounded half to even) with every 4th value an
// exact grid point m + js (code j).
TieCase UniformTies(const Format& f, int T, int D) {
  static const float kMin[] = {0.0f, -4.0f, 2.0f, -1.5f, 0.25f};
  static const float kStep[] = {1.0f, 0.5f, 0.25f, 2.0f, 0.125f};
  const uint32_t qmax = (1u << f.bits) - 1u;
  TieCase c{"uniform " + FormatName(f) + " T=" + std::to_string(T) + " D=" + std::to_string(D), f,
            T, D};
  for (int t = 0; t < T; ++t) {
    for (int d = 0; d < D; ++d) {
      const GroupPos g = GroupOf(f, T, D, t, d);
      const float m = kMin[g.id % 5], s = kStep[(g.id / 5 + g.id) % 5];
      const int k = (g.k + g.id) % g.n;  // rotates where the extremes sit
      float v;
      uint32_t code;
      if (k == 0) {
        v = m, code = 0;
      } else if (k == 1) {
        v = m + static_cast<float>(qmax) * s, code = qmax;
      } else {
        const uint32_t j = qmax == 1 ? 0 : static_cast<uint32_t>(k + g.id) % qmax;
        if (k % 4 == 3) {
          v = m + static_cast<float>(j) * s, code = j;
        } else {
          v = m + (static_cast<float>(j) + 0.5f) * s, code = HalfEven(j);
        }
      }
      c.x[static_cast<size_t>(t) * D + d] = v;
      c.want[static_cast<size_t>(t) * D + d] = code;
    }
  }
  return c;
}

// int8 chunk: per token a scale s (power of two) set by one value of
// magnitude 127s; other values are signed ties ±(j + 1/2)s, code ±HalfEven(j)
// (stored as the int8's byte), or exact ±js.
TieCase Int8Ties(int T, int D) {
  static const float kStep[] = {1.0f, 0.5f, 0.25f, 2.0f};
  TieCase c{"int8", Int8PerToken(), T, D};
  for (int t = 0; t < T; ++t) {
    const float s = kStep[t % 4];
    for (int d = 0; d < D; ++d) {
      const float sign = (d + t) % 3 == 1 ? -1.0f : 1.0f;
      const int k = (d + t) % D;
      float v;
      int32_t code;
      if (k == 0) {
        v = sign * 127.0f * s, code = sign > 0 ? 127 : -127;
      } else {
        const uint32_t j = static_cast<uint32_t>(d * 7 + t * 3) % 127;
        if (k % 4 == 3) {
          v = sign * static_cast<float>(j) * s, code = static_cast<int32_t>(j);
        } else {
          v = sign * (static_cast<float>(j) + 0.5f) * s, code = static_cast<int32_t>(HalfEven(j));
        }
        if (sign < 0) code = -code;
      }
      c.x[static_cast<size_t>(t) * D + d] = v;
      c.want[static_cast<size_t>(t) * D + d] = static_cast<uint8_t>(static_cast<int8_t>(code));
    }
  }
  return c;
}

// Independent FP8 decoders (OCP E4M3 "fn" / E5M2), positive codes only.
double Fp8Value(uint32_t code, bool e4m3) {
  const int m_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const uint32_t e = code >> m_bits, m = code & ((1u << m_bits) - 1u);
  const double frac = static_cast<double>(m) / (1 << m_bits);
  return e == 0 ? std::ldexp(frac, 1 - bias) : std::ldexp(1.0 + frac, static_cast<int>(e) - bias);
}

// FP8 chunk with scale 1 (one value equal to the format's max sets
// s16 = max / FP8_MAX = 1); the rest are the midpoints of every pair of
// adjacent positive codes (c, c+1), half of them negated: the code is the
// even one of the pair, with the sign bit for negative values.
TieCase Fp8Ties(bool e4m3, int T, int D) {
  const uint32_t max_code = e4m3 ? 0x7E : 0x7B;
  TieCase c{e4m3 ? "fp8e4m3" : "fp8e5m2", e4m3 ? Fp8E4M3() : Fp8E5M2(), T, D};
  for (size_t i = 0; i < c.x.size(); ++i) {
    if (i == 5) {
      c.x[i] = static_cast<float>(Fp8Value(max_code, e4m3));
      c.want[i] = max_code;
      continue;
    }
    const uint32_t lo =
        static_cast<uint32_t>(i * 5 % max_code);  // pair (lo, lo + 1), lo + 1 <= max
    const double mid = 0.5 * (Fp8Value(lo, e4m3) + Fp8Value(lo + 1, e4m3));
    const bool neg = lo > 0 && i % 2 == 1;  // -0 vs +0 for the (0, 1) tie is not specified
    c.x[i] = static_cast<float>(neg ? -mid : mid);
    c.want[i] = (lo % 2 == 0 ? lo : lo + 1) | (neg ? 0x80u : 0u);
  }
  return c;
}

// f16 chunk: midpoints of adjacent positive fp16 patterns (h, h+1) over the
// whole finite range (subnormals included), half negated, and a few exact
// values: the code is the even pattern.
TieCase F16Ties(int T, int D) {
  TieCase c{"f16", F16(), T, D};
  for (size_t i = 0; i < c.x.size(); ++i) {
    const uint32_t h = static_cast<uint32_t>(i * 61 % 0x7BFF);  // h + 1 <= 0x7BFF (65504)
    const bool neg = i % 2 == 1;
    if (i % 16 == 7) {  // exact value
      c.x[i] = (neg ? -1.0f : 1.0f) * F16ToF32(static_cast<f16_t>(h));
      c.want[i] = h | (neg ? 0x8000u : 0u);
      if (h == 0 && neg) c.want[i] = kAny;
      continue;
    }
    const double mid =
        0.5 * (double(F16ToF32(static_cast<f16_t>(h))) + F16ToF32(static_cast<f16_t>(h + 1)));
    c.x[i] = static_cast<float>(neg ? -mid : mid);
    c.want[i] = (h % 2 == 0 ? h : h + 1) | (neg ? 0x8000u : 0u);
  }
  return c;
}

// Applies the normalized Walsh-Hadamard transform to each token of y (exact
// in double for the dyadic values used here, D = 16: entries ±1/4), so that
// a ":had" format, which rotates its input, sees exactly y again.
std::vector<float> Unrotate(const std::vector<float>& y, int T, int D) {
  std::vector<float> x(y.size());
  for (int t = 0; t < T; ++t) {
    std::vector<double> r(y.begin() + static_cast<size_t>(t) * D,
                          y.begin() + static_cast<size_t>(t + 1) * D);
    for (int h = 1; h < D; h <<= 1) {
      for (int i = 0; i < D; i += 2 * h) {
        for (int j = i; j < i + h; ++j) {
          const double a = r[j], b = r[j + h];
          r[j] = a + b, r[j + h] = a - b;
        }
      }
    }
    for (int d = 0; d < D; ++d)
      x[static_cast<size_t>(t) * D + d] = static_cast<float>(r[d] / std::sqrt(double(D)));
  }
  return x;
}

TEST(QuantTies, UniformRoundsHalfToEvenInEveryGroupingAndWidth) {
  for (int bits : {1, 2, 4, 8}) {
    ExpectCodes(UniformTies(Uniform(bits, Grouping::kPerToken, 8), 4, 32));
    ExpectCodes(UniformTies(Uniform(bits, Grouping::kPerToken, 32), 3, 64));
    ExpectCodes(UniformTies(Uniform(bits, Grouping::kPerToken, 16), 5, 16));
    ExpectCodes(UniformTies(Uniform(bits, Grouping::kPerChannel), 32, 16));  // SIMD: T == 32
    ExpectCodes(UniformTies(Uniform(bits, Grouping::kPerChannel), 7, 8));    // scalar shape
  }
}

TEST(QuantTies, Uniform3RoundsHalfToEvenInEveryGrouping) {
  ExpectCodes(UniformTies(Uniform3(Grouping::kPerToken, 8), 4, 32));
  ExpectCodes(UniformTies(Uniform3(Grouping::kPerToken, 32), 3, 64));
  ExpectCodes(UniformTies(Uniform3(Grouping::kPerToken, 16), 5, 16));
  ExpectCodes(UniformTies(Uniform3(Grouping::kPerChannel), 32, 16));  // SIMD: T == 32
  ExpectCodes(UniformTies(Uniform3(Grouping::kPerChannel), 8, 8));    // scalar shape
  Format had = Uniform3(Grouping::kPerChannel);
  had.hadamard = true;
  TieCase c = UniformTies(had, 32, 16);
  c.x = Unrotate(c.x, c.T, c.D);
  ExpectCodes(c);
}

TEST(QuantTies, Int8RoundsHalfToEven) {
  ExpectCodes(Int8Ties(8, 64));
  ExpectCodes(Int8Ties(3, 24));
}

TEST(QuantTies, Fp8RoundsHalfToEvenOverTheWholeRange) {
  ExpectCodes(Fp8Ties(true, 8, 32));
  ExpectCodes(Fp8Ties(false, 8, 32));
}

TEST(QuantTies, F16RoundsHalfToEvenOverTheWholeRange) {
  ExpectCodes(F16Ties(32, 64));
  ExpectCodes(F16Ties(3, 40));
}

TEST(QuantTies, HadamardFormatsRoundTheRotatedValuesHalfToEven) {
  // The rotation is exact here, so the ties survive it.
  for (Format f : {Uniform(4, Grouping::kPerToken, 8), Uniform(2, Grouping::kPerToken, 16),
                   Uniform(4, Grouping::kPerChannel), Uniform(1, Grouping::kPerChannel)}) {
    f.hadamard = true;
    TieCase c = UniformTies(f, 32, 16);
    c.x = Unrotate(c.x, c.T, c.D);
    ExpectCodes(c);
  }
  Format f = Int8PerToken();
  f.hadamard = true;
  TieCase c = Int8Ties(4, 16);
  c.f = f;
  c.name = "int8:had";
  c.x = Unrotate(c.x, c.T, c.D);
  ExpectCodes(c);
}

// Normalized: a value exactly on the centre threshold (the group mean, u = 0)
// gets the lower code (ties go down, like searchsorted); one just above gets
// the upper one. Groups are symmetric around a fp16-exact mean m, so the
// float mean is exactly m whatever the summation order.
TieCase NormalCentreTies(const Format& f, int T, int D) {
  TieCase c{"normal " + FormatName(f) + " T=" + std::to_string(T) + " D=" + std::to_string(D), f, T,
            D};
  const uint32_t below = (1u << (f.bits - 1)) - 1u, above = below + 1u;
  static const float kMean[] = {1.5f, -0.75f, 0.0f, 3.0f};
  const float eps = 1.0f / 256;
  for (int t = 0; t < T; ++t) {
    for (int d = 0; d < D; ++d) {
      const GroupPos g = GroupOf(f, T, D, t, d);
      const float m = kMean[g.id % 4];
      // Pairs (2i, 2i+1) mirror each other around m: m ± a.
      const int pair = g.k / 2;
      const float sign = g.k % 2 == 0 ? 1.0f : -1.0f;
      float a;
      uint32_t code = kAny;
      switch (pair % 4) {
        case 0:
          a = 0.0f, code = below;  // exactly the mean: tie goes down
          break;
        case 1:
          a = eps,
          code = sign > 0 ? above : below;  // just off the tie, far from the other thresholds
          break;
        case 2:
          a = 2.0f;
          break;
        default:
          a = 1.0f;
      }
      c.x[static_cast<size_t>(t) * D + d] = m + sign * a;
      c.want[static_cast<size_t>(t) * D + d] = code;
    }
  }
  return c;
}

TEST(QuantTies, NormalValuesOnTheCentreThresholdGoDown) {
  for (int bits : {1, 2}) {
    ExpectCodes(NormalCentreTies(Normal(bits, Grouping::kPerToken, 8), 4, 32));
    ExpectCodes(NormalCentreTies(Normal(bits, Grouping::kPerToken, 32), 2, 64));
    ExpectCodes(NormalCentreTies(Normal(bits, Grouping::kPerChannel), 32, 8));
  }
  ExpectCodes(NormalCentreTies(Normal(4, Grouping::kPerToken, 8), 2, 16));  // scalar only
}

// The target loop itself: it must run every one of AVX-512 / AVX2 / SSE4
// that this CPU supports (a loop that re-reads SupportedTargets() after
// forcing one target runs only the first).
TEST(QuantTies, TargetLoopRunsEverySupportedTarget) {
  const int64_t supported = hwy::SupportedTargets();
  int want = 0;
  for (int64_t t : hqekv::test::kSimdTestTargets) want += (supported & t) != 0;
  int64_t seen = 0;
  EXPECT_EQ(testing::RunOnEachTarget([&](int64_t t) { seen |= t; }), want);
  EXPECT_EQ(hwy::SupportedTargets(), supported);  // dispatch restored
  for (int64_t t : hqekv::test::kSimdTestTargets) {
    EXPECT_EQ((seen & t) != 0, (supported & t) != 0) << hwy::TargetName(t);
  }
}

}  // namespace
}  // namespace hqekv::quant
