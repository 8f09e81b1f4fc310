// Model files whose metadata is well-formed but means nonsense must be
// refused at load, naming the key, instead of running with a wrong number:
//   float keys stored as integers (an epsilon as u32: degenerate output);
//   special token ids that are neither a token nor "none" (bos = -7), a BOS
//   asked for that does not exist, BOS / EOS past the vocabulary;
//   a tokenizer whose vocabulary differs from the embedding's rows.
// Each case is stories260K.gguf copied with one metadata edit.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/mmap_file.h"
#include "io/model_source.h"

namespace hqekv {
namespace {

std::vector<uint8_t> StoriesWith(const std::function<void(GgufWriter&)>& edit) {
  auto map = MappedFile::Open(std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf");
  EXPECT_TRUE(map.ok()) << map.message();
  auto f = ParseGguf((*map)->data(), (*map)->size(), "stories260K.gguf");
  EXPECT_TRUE(f.ok()) << f.message();
  GgufWriter w;
  for (const auto& [k, v] : f->metadata) w.Set(k, v);
  for (const auto& t : f->tensors)
    EXPECT_TRUE(w.AddTensor(t.name, t.type, t.ne, t.data, t.nbytes).ok());
  edit(w);
  return w.Serialize();
}

// The load's error message ("" when it loaded).
std::string LoadError(const std::vector<uint8_t>& bytes) {
  auto m = LoadGgufImage(bytes.data(), bytes.size(), "edited.gguf");
  return m.ok() ? "" : m.message();
}

constexpr char kEps[] = "llama.attention.layer_norm_rms_epsilon";

TEST(ModelLoadValidation, TheUneditedCopyLoads) {
  EXPECT_EQ(LoadError(StoriesWith([](GgufWriter&) {})), "");
}

TEST(ModelLoadValidation, AFloatKeyStoredAsAnIntegerIsRefused) {
  // The epsilon's float bits written as u32 (1e-5f -> 925353388), and a
  // rounded 0: both were used as the epsilon.
  for (uint32_t v : {std::bit_cast<uint32_t>(1e-5f), 0u}) {
    const std::string e = LoadError(StoriesWith([&](GgufWriter& w) { w.SetU32(kEps, v); }));
    EXPECT_NE(e.find(std::string(kEps) + "' has type"), std::string::npos) << v << ": " << e;
    EXPECT_NE(e.find("expected a float"), std::string::npos) << e;
  }
}

TEST(ModelLoadValidation, AnEpsilonOfOneOrMoreIsRefused) {
  const std::string e = LoadError(StoriesWith([](GgufWriter& w) { w.SetF32(kEps, 4.0f); }));
  EXPECT_NE(e.find("layer_norm_rms_epsilon"), std::string::npos) << e;
}

TEST(SpecialTokenIds, ANegativeIdOtherThanNoneIsRefused) {
  const std::string e =
      LoadError(StoriesWith([](GgufWriter& w) { w.SetI32("tokenizer.ggml.bos_token_id", -7); }));
  EXPECT_NE(e.find("tokenizer.ggml.bos_token_id = -7 is not a token id"), std::string::npos) << e;
  // -1 (and u32 0xFFFFFFFF) mean "none" and load.
  EXPECT_EQ(
      LoadError(StoriesWith([](GgufWriter& w) { w.SetI32("tokenizer.ggml.bos_token_id", -1); })),
      "");
}

TEST(SpecialTokenIds, AddBosWithoutABosTokenIsRefused) {
  const std::string e = LoadError(StoriesWith([](GgufWriter& w) {
    w.SetU32("tokenizer.ggml.bos_token_id", 0xFFFFFFFFu);
    w.SetBool("tokenizer.ggml.add_bos_token", true);
  }));
  EXPECT_NE(e.find("add_bos_token is true but there is no tokenizer.ggml.bos_token_id"),
            std::string::npos)
      << e;
}

TEST(SpecialTokenIds, BosOrEosPastTheVocabularyIsRefused) {
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
    const std::string e = LoadError(StoriesWith([&](GgufWriter& w) { w.SetU32(key, 512); }));
    EXPECT_NE(e.find(std::string(key) + " = 512 is out of range (the vocabulary has 512 tokens)"),
              std::string::npos)
        << e;
  }
}

TEST(VocabularyMismatch, ATokenizerSmallerThanTheEmbeddingIsRefused) {
  auto map = MappedFile::Open(std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf");
  ASSERT_TRUE(map.ok());
  auto f = ParseGguf((*map)->data(), (*map)->size(), "stories260K.gguf");
  ASSERT_TRUE(f.ok());
  std::vector<std::string> tokens = f->Find("tokenizer.ggml.tokens")->strings;
  ASSERT_EQ(tokens.size(), 512u);
  tokens.pop_back();
  const std::string e = LoadError(StoriesWith([&](GgufWriter& w) {
    w.SetStringArray("tokenizer.ggml.tokens", tokens);
    if (const GgufValue* s = f->Find("tokenizer.ggml.scores"))
      w.SetF32Array("tokenizer.ggml.scores",
                    std::vector<float>(s->floats.begin(), s->floats.end() - 1));
    if (const GgufValue* t = f->Find("tokenizer.ggml.token_type"))
      w.SetI32Array("tokenizer.ggml.token_type",
                    std::vector<int32_t>(t->ints.begin(), t->ints.end() - 1));
  }));
  EXPECT_NE(e.find("tokenizer has 511 tokens but token_embd.weight has 512 rows"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace hqekv
