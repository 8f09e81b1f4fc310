// Corrupted copies of the real stories260K.gguf: truncations, bit flips and
// huge values written over the header / metadata / tensor-info region. Every
// case must return (an error or, for harmless flips, a model) without
// crashing, hanging or reading outside the buffer — CI runs this under ASan,
// and each copy lives in an exactly-sized heap buffer so overreads are caught.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "io/gguf.h"
#include "io/mmap_file.h"
#include "io/model_source.h"

namespace hqekv {
namespace {

class CorruptStories : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto map = MappedFile::Open(std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf");
    ASSERT_TRUE(map.ok()) << map.message();
    original_ = new std::vector<uint8_t>((*map)->data(), (*map)->data() + (*map)->size());
    auto f = ParseGguf(original_->data(), original_->size(), "stories260K.gguf");
    ASSERT_TRUE(f.ok()) << f.message();
    data_offset_ = f->data_offset;
  }
  static void TearDownTestSuite() {
    delete original_;
    original_ = nullptr;
  }

  // Loads `bytes` (a copy-constructed vector: capacity == size, so ASan sees
  // any read past its end). Returns true if it loaded.
  static bool Load(const std::vector<uint8_t>& bytes, std::string* error) {
    auto m = LoadGgufImage(bytes.data(), bytes.size(), "corrupt.gguf");
    if (m.ok()) {
      // Touch what a forward pass would read first, to catch dangling views.
      const Tensor& t = (*m)->Get("token_embd.weight");
      volatile uint8_t sink = t.data[t.nbytes - 1];
      (void)sink;
      (void)(*m)->tokenizer->Encode("Once upon a time", true);
      return true;
    }
    *error = m.message();
    return false;
  }

  static std::vector<uint8_t>* original_;
  static size_t data_offset_;
};
std::vector<uint8_t>* CorruptStories::original_ = nullptr;
size_t CorruptStories::data_offset_ = 0;

TEST_F(CorruptStories, EveryTruncationIsAnError) {
  const std::vector<uint8_t>& o = *original_;
  ASSERT_GT(data_offset_, 10000u);  // header + metadata of this file: ~14 KB
  int cases = 0;
  auto check = [&](size_t n) {
    std::string err;
    const std::vector<uint8_t> cut(o.begin(), o.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_FALSE(Load(cut, &err)) << "truncated to " << n << " bytes loaded";
    EXPECT_NE(err.find("corrupt.gguf"), std::string::npos) << err;
    ++cases;
  };
  for (size_t n = 0; n < data_offset_ + 64; n += 3) check(n);  // header/metadata/tensor infos
  for (size_t n = data_offset_ + 64; n < o.size(); n += 4099) check(n);  // inside tensor data
  check(o.size() - 1);
  EXPECT_GT(cases, 4000);
  std::string err;
  EXPECT_TRUE(Load(o, &err)) << err;  // and the whole file loads
}

TEST_F(CorruptStories, BitFlipsInTheHeaderNeverCrash) {
  const std::vector<uint8_t>& o = *original_;
  std::mt19937 rng(12345);
  int errors = 0, loaded = 0;
  std::vector<uint8_t> b = o;
  for (size_t pos = 0; pos < data_offset_; pos += 2) {  // every other byte keeps ASan runs short
    const uint8_t mask = static_cast<uint8_t>(1u << (rng() % 8));
    b[pos] ^= mask;
    std::string err;
    if (Load(b, &err)) {
      ++loaded;
    } else {
      ++errors;
      EXPECT_NE(err.find("corrupt.gguf"), std::string::npos) << err;
    }
    b[pos] ^= mask;
  }
  // Flips in structural fields (magic, version, counts, lengths, types,
  // dims, offsets) are errors; flips inside string or score bytes may load.
  EXPECT_GT(errors, 100);
  EXPECT_GT(loaded, 100);
  // Every byte of the fixed header is structural.
  for (size_t pos = 0; pos < 24; ++pos) {
    b[pos] ^= 0x80;
    std::string err;
    EXPECT_FALSE(Load(b, &err)) << "flip at " << pos;
    b[pos] ^= 0x80;
  }
}

TEST_F(CorruptStories, HugeValuesAnywhereInTheHeader) {
  const std::vector<uint8_t>& o = *original_;
  std::mt19937_64 rng(777);
  const uint64_t values[] = {~0ull, 1ull << 63, 1ull << 40, 0x7FFFFFFFull, 0xFFFFFFFFull, 0};
  int errors = 0;
  for (int k = 0; k < 1500; ++k) {
    std::vector<uint8_t> b = o;
    const size_t pos = rng() % (data_offset_ - 8);
    const uint64_t v = values[rng() % std::size(values)];
    std::memcpy(b.data() + pos, &v, 8);
    std::string err;
    if (!Load(b, &err)) ++errors;
  }
  EXPECT_GT(errors, 500);
}

}  // namespace
}  // namespace hqekv
