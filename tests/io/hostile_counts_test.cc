// Counts declared by a model file that would start unbounded work (issue 19):
// a GGUF whose block_count claims 1,048,576 layers must be refused from the
// tensors it holds at once, not after building records for every layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "io/mmap_file.h"
#include "io/model_source.h"

namespace hqekv {
namespace {

std::vector<uint8_t> StoriesWithBlockCount(uint32_t n_layers) {
  auto map = MappedFile::Open(std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf");
  EXPECT_TRUE(map.ok()) << map.message();
  std::vector<uint8_t> bytes((*map)->data(), (*map)->data() + (*map)->size());
  // Metadata entry: key bytes, u32 type (4 = UINT32), u32 value.
  const std::string key = "llama.block_count";
  auto it = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  EXPECT_NE(it, bytes.end());
  const size_t at = static_cast<size_t>(it - bytes.begin()) + key.size();
  uint32_t type = 0;
  std::memcpy(&type, &bytes[at], 4);
  EXPECT_EQ(type, 4u);  // UINT32
  std::memcpy(&bytes[at + 4], &n_layers, 4);
  return bytes;
}

TEST(HostileCounts, HugeBlockCountIsRefusedFromTheTensorsPresent) {
  for (uint32_t n : {1u << 20, 1000u, 6u}) {  // stories260K has 5 layers
    const std::vector<uint8_t> bytes = StoriesWithBlockCount(n);
    const auto t0 = std::chrono::steady_clock::now();
    auto m = LoadGgufImage(bytes.data(), bytes.size(), "hostile.gguf");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_FALSE(m.ok()) << n;
    EXPECT_LT(s, 0.5) << "block_count " << n << " took " << s << " s";
    if (n >= 1000) {
      EXPECT_NE(m.message().find("block_count) = " + std::to_string(n) + " needs at least"),
                std::string::npos)
          << m.message();
    }
  }
  // The true count still loads.
  const std::vector<uint8_t> good = StoriesWithBlockCount(5);
  auto m = LoadGgufImage(good.data(), good.size(), "good.gguf");
  EXPECT_TRUE(m.ok()) << m.message();
}

}  // namespace
}  // namespace hqekv
