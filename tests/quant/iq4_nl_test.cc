// llama.cpp's iq4_nl KV cache type (quant/iq4_nl.h) against ggml's own output
// (tests/data/ggml-quants: IQ4_NL.* made by ggml's quantize_row_iq4_nl_ref
// and dequantize_row_iq4_nl): decoding bit-exact for the reference and the
// Highway kernels on every target; quantizing byte-exact wherever ggml's
// bytes are defined; the grid search's ties; plane sizes; and attention over
// iq4_nl chunks through attn/kernel_set.h's selection.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "attn/kernel_set.h"
#include "core/iq4_grid.h"
#include "quant/iq4_nl.h"
#include "quant_test_util.h"

namespace hqekv::quant {
namespace {

const std::string kIq4Dir = std::string(HQEKV_SOURCE_DIR) + "/tests/data/ggml-quants/";
constexpr int kIq4Row = 1024;       // MANIFEST.tsv: row_length of the 32-value types
constexpr int kIq4BlockBytes = 18;  // ggml's block_iq4_nl: fp16 d, then 16 bytes of indices
constexpr int kIq4Blocks = kIq4Row / 32;

std::vector<uint8_t> ReadIq4File(const std::string& name) {
  std::ifstream f(kIq4Dir + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// ggml blocks of one row <-> our planes of a 1 x 1024 chunk.
testing::Encoded Iq4Split(const uint8_t* blocks) {
  testing::Encoded e;
  e.codes.resize(kIq4Blocks * 16);
  e.meta.resize(kIq4Blocks * 2);
  for (int k = 0; k < kIq4Blocks; ++k) {
    std::memcpy(e.meta.data() + 2 * k, blocks + k * kIq4BlockBytes, 2);
    std::memcpy(e.codes.data() + 16 * k, blocks + k * kIq4BlockBytes + 2, 16);
  }
  return e;
}

const Format kIq4 = *ParseFormat("iq4_nl");

TEST(Iq4Nl, DecodeMatchesGgmlBitExactly) {
  for (const std::string file : {"IQ4_NL", "random_blocks/IQ4_NL"}) {
    const auto blocks = ReadIq4File(file + ".blocks");
    const auto deq = ReadIq4File(file + ".deq.f32");
    const size_t row_bytes = kIq4Blocks * kIq4BlockBytes;
    ASSERT_GT(blocks.size(), 0u) << file;
    ASSERT_EQ(blocks.size() % row_bytes, 0u) << file;
    const size_t rows = blocks.size() / row_bytes;
    ASSERT_EQ(deq.size(), rows * kIq4Row * 4) << file;
    auto check = [&](const char* label, bool reference) {
      for (size_t r = 0; r < rows; ++r) {
        const testing::Encoded e = Iq4Split(blocks.data() + r * row_bytes);
        const std::vector<float> y = testing::Decode(kIq4, e, 1, kIq4Row, reference);
        ASSERT_EQ(std::memcmp(y.data(), deq.data() + r * kIq4Row * 4, kIq4Row * 4), 0)
            << file << " row " << r << " " << label;
      }
    };
    check("reference", true);
    testing::RunOnEachTarget([&](int64_t) { check("simd", false); });
  }
}

// ggml's quantizer leaves the indices of a block with max|x| < 1e-15 as the
// previous block's (undefined: row 4 of the golden inputs is all zeros); every
// other byte must match, scale and indices.
TEST(Iq4Nl, QuantizeMatchesGgmlWhereGgmlIsDefined) {
  const auto in = ReadIq4File("IQ4_NL.f32");
  const auto golden = ReadIq4File("IQ4_NL.blocks");
  const size_t rows = 6, row_bytes = kIq4Blocks * kIq4BlockBytes;
  ASSERT_EQ(in.size(), rows * kIq4Row * 4);
  ASSERT_EQ(golden.size(), rows * row_bytes);
  int same_blocks = 0, zero_blocks = 0;
  for (bool reference : {true, false}) {
    same_blocks = zero_blocks = 0;
    for (size_t r = 0; r < rows; ++r) {
      std::vector<float> x(kIq4Row);
      std::memcpy(x.data(), in.data() + r * kIq4Row * 4, kIq4Row * 4);
      const testing::Encoded ours = testing::Encode(kIq4, x, 1, kIq4Row, reference);
      const testing::Encoded want = Iq4Split(golden.data() + r * row_bytes);
      for (int k = 0; k < kIq4Blocks; ++k) {
        SCOPED_TRACE("row " + std::to_string(r) + " block " + std::to_string(k));
        ASSERT_EQ(std::memcmp(ours.meta.data() + 2 * k, want.meta.data() + 2 * k, 2), 0);
        const bool zero = LoadF16(want.meta.data() + 2 * k) == 0;
        zero_blocks += zero;
        const bool codes_same =
            std::memcmp(ours.codes.data() + 16 * k, want.codes.data() + 16 * k, 16) == 0;
        if (!zero) {
          ASSERT_TRUE(codes_same);
        }
        same_blocks += codes_same;
        // Ours for a zero block: index 8 (the grid's +1), so 0 decodes as +0.
        if (zero) {
          for (int j = 0; j < 16; ++j) ASSERT_EQ(ours.codes[16 * k + j], 0x88);
        }
      }
    }
  }
  // The all-zero row only (its 32 blocks); 160 of 192 blocks byte-identical.
  EXPECT_EQ(zero_blocks, 32);
  EXPECT_EQ(same_blocks, 160);
}

TEST(Iq4Nl, NearestGridPointTiesGoToTheLargerOne) {
  for (int i = 0; i < 16; ++i) EXPECT_EQ(ref::Iq4NlIndex(static_cast<float>(kIq4Values[i])), i);
  EXPECT_EQ(ref::Iq4NlIndex(-1000.0f), 0);
  EXPECT_EQ(ref::Iq4NlIndex(1000.0f), 15);
  for (int i = 0; i + 1 < 16; ++i) {
    const float lo = kIq4Values[i], hi = kIq4Values[i + 1];
    const float mid = 0.5f * (lo + hi);  // exact: the grid values are small integers
    EXPECT_EQ(ref::Iq4NlIndex(mid), i + 1) << mid;
    EXPECT_EQ(ref::Iq4NlIndex(std::nextafter(mid, lo)), i) << mid;
  }
}

TEST(Iq4Nl, PlaneSizesAreFourAndAHalfBits) {
  EXPECT_EQ(FormatName(kIq4), "iq4_nl");
  for (int D : {32, 64, 128}) {
    const size_t bytes = CodeBytes(kIq4, 1, D) + MetaBytes(kIq4, 1, D);
    EXPECT_DOUBLE_EQ(8.0 * static_cast<double>(bytes) / D, 4.5) << D;
  }
  EXPECT_TRUE(Validate(kIq4, 7, 64).ok());
  const Status bad = Validate(kIq4, 7, 48);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("blocks of 32"), std::string::npos) << bad.message();
  EXPECT_FALSE(ParseFormat("iq4_nl:chan").ok());
}

// The Highway kernels really run on every target (a silent fallback would make
// the SIMD == reference comparisons of simd_test.cc vacuous), dequantizing bit
// for bit like the reference.
TEST(Iq4Nl, FastPathsRunAndDequantizeLikeTheReference) {
  const int T = 5, D = 128;
  const std::vector<float> x = testing::Gaussian(T, D, 41);
  const testing::Encoded e = testing::Encode(kIq4, x, T, D, /*reference=*/true);
  const std::vector<float> want = testing::Decode(kIq4, e, T, D, /*reference=*/true);
  const int ran = testing::RunOnEachTarget([&](int64_t) {
    std::vector<float> y(x.size()), s(T), acc(D, 0.0f);
    ASSERT_TRUE(simd::DequantizeIq4Nl(kIq4, e.codes.data(), e.meta.data(), T, D, y.data()));
    ASSERT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0);
    EXPECT_TRUE(simd::DotIq4Nl(kIq4, e.codes.data(), e.meta.data(), T, D, x.data(), s.data()));
    EXPECT_TRUE(simd::AxpyIq4Nl(kIq4, e.codes.data(), e.meta.data(), T, D, x.data(), acc.data()));
  });
  if (ran == 0) GTEST_SKIP() << "no x86 SIMD target on this CPU";
}

// Decode attention over iq4_nl chunks runs the kernels attn/kernel_set.h
// selects for the format: scores and sums of the dequantized rows.
TEST(Iq4Nl, AttentionThroughTheKernelSet) {
  const int T = 32, D = 64, group = 3;
  const std::vector<float> k = testing::Gaussian(T, D, 51), v = testing::Gaussian(T, D, 52);
  const testing::Encoded ke = testing::Encode(kIq4, k, T, D, false);
  const testing::Encoded ve = testing::Encode(kIq4, v, T, D, false);
  const std::vector<float> kx = testing::Decode(kIq4, ke, T, D, true);
  const std::vector<float> vx = testing::Decode(kIq4, ve, T, D, true);
  const std::vector<float> q = testing::Gaussian(group, D, 53);
  const std::vector<float> w = testing::Gaussian(group, T, 54, 0.1f);
  for (bool rounded : {false, true}) {
    const attn::ChunkKernels ks =
        attn::SelectKernels(kIq4, D, attn::KernelOptions{rounded, rounded});
    ASSERT_NE(ks.dot_k, nullptr);
    ASSERT_NE(ks.axpy_v, nullptr);
    std::vector<float> scores(static_cast<size_t>(group) * T), acc(static_cast<size_t>(group) * D);
    attn::PreparedQuery pq;
    ks.dot_k(attn::ChunkRef{kIq4, ke.codes.data(), ke.meta.data(), T, D}, q.data(), group,
             scores.data(), T, pq, nullptr);
    ks.axpy_v(attn::ChunkRef{kIq4, ve.codes.data(), ve.meta.data(), T, D}, w.data(), T, group,
              acc.data(), nullptr);
    for (int h = 0; h < group; ++h) {
      for (int t = 0; t < T; ++t) {
        double s = 0, mag = 0;
        for (int d = 0; d < D; ++d) {
          s += static_cast<double>(q[h * D + d]) * kx[t * D + d];
          mag += std::fabs(static_cast<double>(q[h * D + d]) * kx[t * D + d]);
        }
        ASSERT_NEAR(scores[h * T + t], s, 1e-5 * mag + 1e-6) << "h=" << h << " t=" << t;
      }
      for (int d = 0; d < D; ++d) {
        double s = 0, mag = 0;
        for (int t = 0; t < T; ++t) {
          s += static_cast<double>(w[h * T + t]) * vx[t * D + d];
          mag += std::fabs(static_cast<double>(w[h * T + t]) * vx[t * D + d]);
        }
        ASSERT_NEAR(acc[h * D + d], s, 1e-5 * mag + 1e-6) << "h=" << h << " d=" << d;
      }
    }
  }
}

}  // namespace
}  // namespace hqekv::quant
