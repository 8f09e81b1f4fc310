// Weight block decoders against ggml's own: every block file of
// tests/data/ggml-quants (made by ggml's reference quantizers and random
// bytes, decoded by ggml's dequantize_row_*) must decode bit-exactly, signed
// zeros included; the SIMD dot must agree with the scalar reference on them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace hqekv::kernels {
namespace {

const std::string kDir = std::string(HQEKV_SOURCE_DIR) + "/tests/data/ggml-quants/";

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

struct GoldenFile {
  std::string blocks;  // path relative to kDir
  std::string type;
  int rows = 0;
  int64_t row_length = 0;
};

// The block files of MANIFEST.tsv (kinds ref_blocks, chunk_blocks, random_blocks).
std::vector<GoldenFile> BlockFiles() {
  std::ifstream f(kDir + "MANIFEST.tsv");
  std::vector<GoldenFile> out;
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string file, type, id, be, bb, rows, len, kind;
    std::getline(in, file, '\t');
    std::getline(in, type, '\t');
    std::getline(in, id, '\t');
    std::getline(in, be, '\t');
    std::getline(in, bb, '\t');
    std::getline(in, rows, '\t');
    std::getline(in, len, '\t');
    std::getline(in, kind, '\t');
    if (kind.size() >= 6 && kind.compare(kind.size() - 6, 6, "blocks") == 0) {
      out.push_back({file, type, std::stoi(rows), std::stoll(len)});
    }
  }
  return out;
}

std::string DeqName(const std::string& blocks) {
  return blocks.substr(0, blocks.size() - std::string(".blocks").size()) + ".deq.f32";
}

TEST(KernelsGolden, EveryTypeOfTheManifestIsSupported) {
  const auto files = BlockFiles();
  ASSERT_EQ(files.size(), 29u);  // 14 reference + 14 random + IQ4_NL chunk
  for (const auto& g : files) EXPECT_TRUE(TensorTypeFromName(g.type).has_value()) << g.type;
}

TEST(KernelsGolden, DecodeIsBitExact) {
  for (const auto& g : BlockFiles()) {
    const auto t = TensorTypeFromName(g.type);
    ASSERT_TRUE(t.has_value()) << g.type;
    const auto blocks = ReadBytes(kDir + g.blocks);
    const auto deq = ReadBytes(kDir + DeqName(g.blocks));
    const int64_t rb = RowBytes(*t, g.row_length);
    ASSERT_EQ(static_cast<int64_t>(blocks.size()), rb * g.rows) << g.blocks;
    ASSERT_EQ(static_cast<int64_t>(deq.size()), 4 * g.row_length * g.rows) << g.blocks;
    std::vector<float> ref(g.row_length), simd(g.row_length);
    for (int r = 0; r < g.rows; ++r) {
      DequantizeRowRef(*t, blocks.data() + r * rb, g.row_length, ref.data());
      DequantizeRow(*t, blocks.data() + r * rb, g.row_length, simd.data());
      const uint8_t* want = deq.data() + 4 * g.row_length * r;
      int64_t first_bad = -1;
      for (int64_t i = 0; i < g.row_length && first_bad < 0; ++i)
        if (std::memcmp(&ref[i], want + 4 * i, 4) != 0) first_bad = i;
      EXPECT_EQ(first_bad, -1) << g.blocks << " row " << r;
      EXPECT_EQ(std::memcmp(simd.data(), ref.data(), 4 * g.row_length), 0)
          << g.blocks << " row " << r;
    }
  }
}

TEST(KernelsGolden, SimdDotMatchesScalarOnGoldenBlocks) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const auto& g : BlockFiles()) {
    const TensorType t = *TensorTypeFromName(g.type);
    const auto blocks = ReadBytes(kDir + g.blocks);
    const int64_t rb = RowBytes(t, g.row_length);
    std::vector<float> x(g.row_length), w(g.row_length);
    for (auto& v : x) v = nd(rng);
    for (int r = 0; r < g.rows; ++r) {
      const uint8_t* row = blocks.data() + r * rb;
      DequantizeRowRef(t, row, g.row_length, w.data());
      double abs_sum = 0;
      for (int64_t i = 0; i < g.row_length; ++i) abs_sum += std::abs(double(w[i]) * x[i]);
      // Random BF16 rows reach 3e38: their fp32 sums overflow, which says
      // nothing about the kernel (the decode test above covers them).
      if (abs_sum > 1e30) continue;
      const double ref = DotRef(t, row, x.data(), g.row_length);
      EXPECT_NEAR(Dot(t, row, x.data(), g.row_length), ref, 1e-5 * abs_sum + 1e-30)
          << g.blocks << " row " << r;
    }
  }
}

}  // namespace
}  // namespace hqekv::kernels
