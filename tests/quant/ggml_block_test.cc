// The llama.cpp KV cache block types (q8_0, q4_0, q4_1, q5_0, q5_1) against
// ggml's own output (tests/data/ggml-quants, made by ggml's reference
// quantizers and decoders; the blocks are ggml's with their fp16 fields moved
// to our metadata plane): decoding bit-exact (signed zeros included),
// quantizing byte-exact on the documented inputs, for the scalar reference
// and for the Highway kernels on every target; SIMD == reference on stress
// inputs; plane sizes (true bits per element) and validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "quant/format_traits.h"
#include "attn/multi_query.h"
#include "quant_test_util.h"

namespace hqekv::quant {
namespace {

const std::string kDir = std::string(HQEKV_SOURCE_DIR) + "/tests/data/ggml-quants/";
constexpr int kRowLength = 1024;  // MANIFEST.tsv: 32-value block types

struct BlockType {
  Kind kind;
  const char* ggml_name;  // file prefix
  int block_bytes;        // ggml block: fp16 fields first, then our codes
  int meta_fields;        // fp16 fields: d (and m)
};
const BlockType kTypes[] = {{Kind::kQ8_0, "Q8_0", 34, 1},
                            {Kind::kQ4_0, "Q4_0", 18, 1},
                            {Kind::kQ4_1, "Q4_1", 20, 2},
                            {Kind::kQ5_0, "Q5_0", 22, 1},
                            {Kind::kQ5_1, "Q5_1", 24, 2}};

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// ggml blocks of one row <-> our two planes (codes, metadata) of a 1 x 1024
// chunk. ggml's block: d [, m] [, qh (q5)], then the quants.
void SplitBlocks(const BlockType& t, const uint8_t* blocks, testing::Encoded* e) {
  const int nb = kRowLength / 32;
  const BlockLayout L = BlockLayoutOf(t.kind);
  const int mask = L.bits == 5 ? 4 : 0, head = 2 * t.meta_fields + mask;
  e->codes.assign(static_cast<size_t>(nb) * L.code_bytes, 0);
  e->meta.assign(static_cast<size_t>(nb) * L.meta_bytes(), 0);
  for (int k = 0; k < nb; ++k) {
    const uint8_t* b = blocks + k * t.block_bytes;
    std::memcpy(e->meta.data() + 2 * k, b, 2);                                     // d
    if (t.meta_fields == 2) std::memcpy(e->meta.data() + 2 * (nb + k), b + 2, 2);  // m
    if (mask) std::memcpy(e->meta.data() + L.mask_offset(nb) + 4 * k, b + 2 * t.meta_fields, 4);
    std::memcpy(e->codes.data() + static_cast<size_t>(k) * L.code_bytes, b + head, L.code_bytes);
  }
}
std::vector<uint8_t> JoinBlocks(const BlockType& t, const testing::Encoded& e) {
  const int nb = kRowLength / 32;
  const BlockLayout L = BlockLayoutOf(t.kind);
  const int mask = L.bits == 5 ? 4 : 0, head = 2 * t.meta_fields + mask;
  std::vector<uint8_t> out(static_cast<size_t>(nb) * t.block_bytes);
  for (int k = 0; k < nb; ++k) {
    uint8_t* b = out.data() + k * t.block_bytes;
    std::memcpy(b, e.meta.data() + 2 * k, 2);
    if (t.meta_fields == 2) std::memcpy(b + 2, e.meta.data() + 2 * (nb + k), 2);
    if (mask) std::memcpy(b + 2 * t.meta_fields, e.meta.data() + L.mask_offset(nb) + 4 * k, 4);
    std::memcpy(b + head, e.codes.data() + static_cast<size_t>(k) * L.code_bytes, L.code_bytes);
  }
  return out;
}

// The golden inputs, rebuilt from the generator documented in
// tests/data/ggml-quants/README.md (splitmix64, Box-Muller in double).
uint64_t SplitMix(uint64_t* s) {
  *s += 0x9E3779B97F4A7C15ull;
  uint64_t z = *s;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
std::vector<float> GoldenInputRow(int r) {
  std::vector<float> x(kRowLength);
  if (r == 4 || r == 5) {
    std::fill(x.begin(), x.end(), r == 4 ? 0.0f : 0.3f);
    return x;
  }
  uint64_t s = 0x6767756667676D6Cull + static_cast<uint64_t>(r);
  for (int i = 0; i < kRowLength; ++i) {
    const uint64_t a = SplitMix(&s), b = SplitMix(&s);
    const double u1 = static_cast<double>((a >> 11) + 1) * 0x1p-53;
    const double u2 = static_cast<double>(b >> 11) * 0x1p-53;
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    x[i] = r == 1 ? static_cast<float>(0.02 * z)
                  : (r == 2 ? static_cast<float>(z + 0.5) : static_cast<float>(z));
  }
  if (r == 3) {
    float sign = 40.0f;
    for (int i = 13; i < kRowLength; i += 200, sign = -sign) x[i] = sign;
  }
  return x;
}

// fn(label, reference?) for the reference and for each SIMD target.
template <class Fn>
void ForReferenceAndEachTarget(Fn fn) {
  fn("reference", true);
  testing::RunOnEachTarget([&](int64_t) { fn("simd", false); });
}

TEST(GgmlBlock, DecodeMatchesGgmlBitExactly) {
  for (const BlockType& t : kTypes) {
    const Format f = GgmlBlock(t.kind);
    for (const std::string& file :
         {std::string(t.ggml_name), "random_blocks/" + std::string(t.ggml_name)}) {
      const auto blocks = ReadBytes(kDir + file + ".blocks");
      const auto deq = ReadBytes(kDir + file + ".deq.f32");
      const size_t row_bytes = kRowLength / 32 * t.block_bytes;
      ASSERT_GT(blocks.size(), 0u) << file;
      ASSERT_EQ(blocks.size() % row_bytes, 0u) << file;
      const size_t rows = blocks.size() / row_bytes;
      ASSERT_EQ(deq.size(), rows * kRowLength * 4) << file;
      ForReferenceAndEachTarget([&](const char* label, bool reference) {
        for (size_t r = 0; r < rows; ++r) {
          testing::Encoded e;
          SplitBlocks(t, blocks.data() + r * row_bytes, &e);
          const std::vector<float> y = testing::Decode(f, e, 1, kRowLength, reference);
          ASSERT_EQ(std::memcmp(y.data(), deq.data() + r * kRowLength * 4, kRowLength * 4), 0)
              << file << " row " << r << " " << label;
        }
      });
    }
  }
}

TEST(GgmlBlock, QuantizeMatchesGgmlBytes) {
  for (const BlockType& t : kTypes) {
    const Format f = GgmlBlock(t.kind);
    const auto golden = ReadBytes(kDir + std::string(t.ggml_name) + ".blocks");
    const size_t row_bytes = kRowLength / 32 * t.block_bytes;
    ASSERT_EQ(golden.size(), 6 * row_bytes) << t.ggml_name;
    ForReferenceAndEachTarget([&](const char* label, bool reference) {
      for (int r = 0; r < 6; ++r) {
        const std::vector<float> x = GoldenInputRow(r);
        const testing::Encoded e = testing::Encode(f, x, 1, kRowLength, reference);
        // Encode adds one guard byte per plane: it must be untouched.
        ASSERT_EQ(e.codes.back(), 0xA5);
        ASSERT_EQ(e.meta.back(), 0xA5);
        testing::Encoded planes{{e.codes.begin(), e.codes.end() - 1},
                                {e.meta.begin(), e.meta.end() - 1}};
        const std::vector<uint8_t> ours = JoinBlocks(t, planes);
        ASSERT_EQ(std::memcmp(ours.data(), golden.data() + r * row_bytes, row_bytes), 0)
            << t.ggml_name << " row " << r << " " << label;
      }
    });
  }
}

// Stress inputs: Gaussian at several scales, zeros of both signs, constants,
// ties of the largest magnitude with opposite signs, non-finite values.
std::vector<std::vector<float>> StressInputs(int T, int D) {
  std::vector<std::vector<float>> xs;
  const size_t n = static_cast<size_t>(T) * D;
  xs.push_back(testing::Gaussian(T, D, 7));
  xs.push_back(testing::Gaussian(T, D, 8, 1e-5f));
  xs.push_back(testing::Gaussian(T, D, 9, 3000.0f));
  xs.push_back(std::vector<float>(n, 0.0f));
  xs.push_back(std::vector<float>(n, -0.0f));
  xs.push_back(std::vector<float>(n, 1.7f));
  std::vector<float> zeros(n, 0.0f);
  for (size_t i = 0; i < n; i += 3) zeros[i] = -0.0f;
  for (size_t i = 5; i < n; i += 64) zeros[i] = 2.0f;
  xs.push_back(zeros);
  std::vector<float> ties = testing::Gaussian(T, D, 10, 0.1f);
  for (size_t i = 0; i < n; i += 32) ties[i + 3] = -1.0f, ties[i + 20] = 1.0f;
  xs.push_back(ties);
  std::vector<float> special = testing::Gaussian(T, D, 11);
  const float inf = std::numeric_limits<float>::infinity();
  const float sp[] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 1e30f, 1e-39f};
  for (size_t i = 0; i < n; i += 11) special[i] = sp[(i / 11) % 5];
  xs.push_back(special);
  std::vector<float> tiny(n, 0.0f);
  for (size_t i = 0; i < n; i += 7) tiny[i] = 1e-40f;
  xs.push_back(tiny);
  return xs;
}

TEST(GgmlBlock, SimdMatchesReferenceOnEveryTarget) {
  const int ran = testing::RunOnEachTarget([&](int64_t) {
    for (const BlockType& t : kTypes) {
      const Format f = GgmlBlock(t.kind);
      for (const auto& [T, D] :
           {std::pair{32, 64}, std::pair{32, 128}, std::pair{5, 32}, std::pair{1, 256}}) {
        for (const std::vector<float>& x : StressInputs(T, D)) {
          const testing::Encoded r = testing::Encode(f, x, T, D, true);
          const testing::Encoded s = testing::Encode(f, x, T, D, false);
          ASSERT_EQ(r.codes, s.codes) << t.ggml_name << " T=" << T << " D=" << D;
          ASSERT_EQ(r.meta, s.meta) << t.ggml_name << " T=" << T << " D=" << D;
          const std::vector<float> yr = testing::Decode(f, r, T, D, true);
          const std::vector<float> ys = testing::Decode(f, s, T, D, false);
          ASSERT_EQ(std::memcmp(yr.data(), ys.data(), yr.size() * 4), 0) << t.ggml_name;
          for (float v : ys) ASSERT_TRUE(std::isfinite(v)) << t.ggml_name;
          // Dot / Axpy, single and multi-query, against the reference.
          const std::vector<float> q = testing::Gaussian(3, D, 12);
          const std::vector<float> w = testing::Gaussian(3, T, 13);
          const float xmax = testing::MaxAbs(yr) + 1e-30f;
          const float dot_tol = 1e-5f * D * xmax * testing::MaxAbs(q);
          const float axpy_tol = 1e-5f * T * xmax * testing::MaxAbs(w);
          std::vector<float> sr(3 * T), ss(3 * T), sm(3 * T);
          std::vector<float> ar(3 * D, 0.5f), as(3 * D, 0.5f), am(3 * D, 0.5f);
          for (int h = 0; h < 3; ++h) {
            ref::DotChunk(f, r.codes.data(), r.meta.data(), T, D, q.data() + h * D,
                          sr.data() + h * T);
            DotChunk(f, r.codes.data(), r.meta.data(), T, D, q.data() + h * D, ss.data() + h * T);
            ref::AxpyChunk(f, r.codes.data(), r.meta.data(), T, D, w.data() + h * T,
                           ar.data() + h * D);
            AxpyChunk(f, r.codes.data(), r.meta.data(), T, D, w.data() + h * T, as.data() + h * D);
          }
          attn::DotChunkMulti(f, r.codes.data(), r.meta.data(), T, D, q.data(), D, 3, sm.data(), T);
          attn::AxpyChunkMulti(f, r.codes.data(), r.meta.data(), T, D, w.data(), T, 3, am.data(),
                               D);
          for (int i = 0; i < 3 * T; ++i) {
            ASSERT_NEAR(ss[i], sr[i], dot_tol) << t.ggml_name << " dot " << i;
            ASSERT_NEAR(sm[i], sr[i], dot_tol) << t.ggml_name << " dot multi " << i;
          }
          for (int i = 0; i < 3 * D; ++i) {
            ASSERT_NEAR(as[i], ar[i], axpy_tol) << t.ggml_name << " axpy " << i;
            ASSERT_NEAR(am[i], ar[i], axpy_tol) << t.ggml_name << " axpy multi " << i;
          }
        }
      }
    }
  });
  if (ran == 0) GTEST_SKIP() << "no x86 SIMD target on this CPU";
}

// An independent oracle of the block math, written from the formulas of
// quant/README.md per element (not per block): every reconstruction is
// within half a step of the input (plus the fp16 rounding of d and m), and
// the error is exactly what the stored code and parameters give.
TEST(GgmlBlock, RoundTripWithinHalfAStep) {
  const int T = 32, D = 64;
  const std::vector<float> x = testing::Gaussian(T, D, 21);
  for (const BlockType& t : kTypes) {
    const Format f = GgmlBlock(t.kind);
    const testing::Encoded e = testing::Encode(f, x, T, D, true);
    const std::vector<float> y = testing::Decode(f, e, T, D, true);
    const int nb = T * D / 32;
    for (int k = 0; k < nb; ++k) {
      const float d = std::fabs(F16ToF32(LoadF16(e.meta.data() + 2 * k)));
      float lo = x[32 * k], hi = x[32 * k], amax = 0.0f;
      for (int j = 0; j < 32; ++j) {
        lo = std::min(lo, x[32 * k + j]);
        hi = std::max(hi, x[32 * k + j]);
        amax = std::max(amax, std::fabs(x[32 * k + j]));
      }
      // Exact scale before fp16 rounding, and the grid shift it causes at the ends.
      const BlockLayout L = BlockLayoutOf(t.kind);
      const float steps = L.has_min
                              ? static_cast<float>((1 << L.bits) - 1)
                              : (L.bits == 8 ? 127.0f : static_cast<float>(1 << (L.bits - 1)));
      const float exact = (L.has_min ? hi - lo : amax) / steps;
      // Truncation after +0.5 is round half up: error <= d/2; the _0 types'
      // grid runs from -2^(b-1) d to (2^(b-1) - 1) d, so the value opposite
      // the largest magnitude may lose up to one step.
      // _1 types: the grid also starts at the fp16-rounded minimum.
      const float m_shift =
          L.has_min ? std::fabs(F16ToF32(LoadF16(e.meta.data() + 2 * (nb + k))) - lo) : 0.0f;
      const float bound = (L.has_min || L.bits == 8 ? 0.5f : 1.0f) * exact +
                          std::fabs(d - exact) * steps * 1.01f + m_shift + 2e-3f * exact + 1e-7f;
      for (int j = 0; j < 32; ++j) {
        ASSERT_LE(std::fabs(y[32 * k + j] - x[32 * k + j]), bound)
            << t.ggml_name << " block " << k << " j " << j;
      }
    }
  }
}

TEST(GgmlBlock, PlaneSizesAreTheTrueBitsOfLlamaCpp) {
  // bits per element = (codes + fp16 scales [+ minima]) * 8 / values.
  const double want[] = {8.5, 4.5, 5.0, 5.5, 6.0};
  for (int i = 0; i < 5; ++i) {
    const Format f = GgmlBlock(kTypes[i].kind);
    const int T = 32, D = 128;
    const size_t bytes = CodeBytes(f, T, D) + MetaBytes(f, T, D);
    EXPECT_EQ(bytes * 32 / (T * D), static_cast<size_t>(kTypes[i].block_bytes));
    EXPECT_DOUBLE_EQ(8.0 * bytes / (T * D), want[i]) << kTypes[i].ggml_name;
  }
}

TEST(GgmlBlock, ParseNameAndValidate) {
  for (const char* name : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1"}) {
    const auto f = ParseFormat(name);
    ASSERT_TRUE(f.ok()) << name;
    EXPECT_EQ(FormatName(*f), name);
    EXPECT_TRUE(Validate(*f, 32, 64).ok());
    const Status bad = Validate(*f, 32, 48);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find("blocks of 32"), std::string::npos) << bad.message();
    EXPECT_FALSE(ParseFormat(std::string(name) + ":chan").ok());
  }
  const auto f = ParseFormat("q4_0:had");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->hadamard);
  const auto unknown = ParseFormat("q3_0");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("q5_1"), std::string::npos) << unknown.message();
}

}  // namespace
}  // namespace hqekv::quant
