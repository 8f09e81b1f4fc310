// SentencePiece-style tokenizer: the bundled stories260K vocabulary (GGUF and
// llama2.c tok512.bin) against llama2.c's known outputs, plus a synthetic
// vocabulary for byte fallback and special tokens.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/llama2c.h"
#include "io/mmap_file.h"
#include "io/model_source.h"
#include "tokenizer/tokenizer.h"
#include "../source_root.h"

namespace hqekv {
namespace {

std::string ReadAll(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<int32_t> ReadIds(const std::string& p) {
  std::ifstream f(p);
  std::vector<int32_t> ids;
  int32_t x;
  while (f >> x) ids.push_back(x);
  return ids;
}

class StoriesTokenizer : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto m = LoadModel(test::kSourceRoot + "/models/" + GetParam());
    ASSERT_TRUE(m.ok()) << m.message();
    model_ = std::move(*m);
    tok_ = model_->tokenizer.get();
  }
  std::unique_ptr<ModelSource> model_;
  const Tokenizer* tok_ = nullptr;
};

TEST_P(StoriesTokenizer, Greedy200DecodesToKnownText) {
  const std::vector<int32_t> ids =
      ReadIds(test::kSourceRoot + "/tests/data/stories260K.greedy200.ids");
  ASSERT_EQ(ids.size(), 200u);
  const std::string want = ReadAll(test::kSourceRoot + "/tests/data/stories260K.greedy200.txt");
  // llama2.c prints each piece after BOS (prev = 1): byte for byte the file.
  EXPECT_EQ(tok_->Decode(ids), want);
}

TEST_P(StoriesTokenizer, EncodesLikeLlama2c) {
  // The greedy story begins "Once upon a time": its first four ids.
  const std::vector<int32_t> story =
      ReadIds(test::kSourceRoot + "/tests/data/stories260K.greedy200.ids");
  EXPECT_EQ(tok_->Encode("Once upon a time", true),
            (std::vector<int32_t>{1, story[0], story[1], story[2], story[3]}));
  EXPECT_EQ(tok_->Encode("Once upon a time", false),
            (std::vector<int32_t>{story[0], story[1], story[2], story[3]}));
  EXPECT_EQ(tok_->Encode("", true), (std::vector<int32_t>{1}));
  EXPECT_TRUE(tok_->Encode("", false).empty());
}

TEST_P(StoriesTokenizer, RoundTripsTextAndBytes) {
  const std::vector<std::string> texts = {
      "Once upon a time, there was a little girl named Lily.",
      "Tabs\tand\nnewlines\n\n  double  spaces   ",
      "caf\xC3\xA9 na\xC3\xAFve \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80!",  // é ï 你好 😀
      "{}[]()<>~`|\\^_@#$%&*+=",
      "<s> is not BOS when written as text </s>",
  };
  for (const auto& t : texts) {
    const auto ids = tok_->Encode(t, true);
    EXPECT_EQ(tok_->Decode({ids.begin() + 1, ids.end()}), t) << t;
  }
}

TEST_P(StoriesTokenizer, ByteFallbackForUnknownCharacters) {
  // "你" (E4 BD A0) is not in the 512-token vocab: three <0xXX> byte tokens.
  const auto ids = tok_->Encode("\xE4\xBD\xA0", false);
  const int32_t sp = tok_->FindPiece("\xE2\x96\x81");  // the dummy-prefix space
  ASSERT_GE(sp, 0);
  EXPECT_EQ(ids, (std::vector<int32_t>{sp, tok_->FindPiece("<0xE4>"), tok_->FindPiece("<0xBD>"),
                                       tok_->FindPiece("<0xA0>")}));
  EXPECT_EQ(tok_->FindPiece("<0xE4>"), 3 + 0xE4);  // byte tokens follow <unk>, <s>, </s>
  EXPECT_EQ(tok_->DecodePiece(5, 3 + 0x41), "A");
}

TEST_P(StoriesTokenizer, ControlTokensAndLeadingSpace) {
  EXPECT_EQ(tok_->DecodePiece(0, 1), "");  // BOS prints nothing
  EXPECT_EQ(tok_->DecodePiece(0, 2), "");  // EOS prints nothing
  EXPECT_TRUE(tok_->IsEndOfGeneration(2));
  EXPECT_FALSE(tok_->IsEndOfGeneration(1));
  EXPECT_TRUE(tok_->IsControl(1));
  const int32_t once = ReadIds(test::kSourceRoot + "/tests/data/stories260K.greedy200.ids")[0];
  EXPECT_EQ(tok_->DecodePiece(1, once), "Once");    // after BOS: space dropped
  EXPECT_EQ(tok_->DecodePiece(42, once), " Once");  // elsewhere: kept
  EXPECT_EQ(tok_->DecodePiece(1, -5), "");
  EXPECT_EQ(tok_->DecodePiece(1, 100000), "");
  EXPECT_NE(tok_->Describe().find("spm"), std::string::npos);
  // parse_special: "<s>" written in the text becomes BOS.
  const auto ids = tok_->Encode("<s>Hi", false, /*parse_special=*/true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
}

INSTANTIATE_TEST_SUITE_P(BothFiles, StoriesTokenizer,
                         ::testing::Values("stories260K.gguf", "stories260K.bin"));

TEST(Llama2cTokenizer, RejectsCorruptFiles) {
  auto map = MappedFile::Open(test::kSourceRoot + "/models/tok512.bin");
  ASSERT_TRUE(map.ok()) << map.message();
  std::vector<uint8_t> bytes((*map)->data(), (*map)->data() + (*map)->size());
  // Truncations anywhere give an error, never a crash.
  for (size_t n = 0; n < bytes.size(); n += 7) {
    auto v = ParseLlama2cTokenizer(bytes.data(), n, 512, "tok512.bin");
    EXPECT_FALSE(v.ok()) << n;
  }
  // A huge length field.
  std::vector<uint8_t> bad = bytes;
  const int32_t huge = 0x7FFFFFFF;
  std::memcpy(bad.data() + 8, &huge, 4);
  auto v = ParseLlama2cTokenizer(bad.data(), bad.size(), 512, "tok512.bin");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.message().find("tok512.bin"), std::string::npos);
  // Absurd vocab size is bounded by the file size before allocating.
  EXPECT_FALSE(ParseLlama2cTokenizer(bytes.data(), bytes.size(), 1 << 30, "tok512.bin").ok());
  EXPECT_TRUE(ParseLlama2cTokenizer(bytes.data(), bytes.size(), 512, "tok512.bin").ok());
}

// A tiny hand-made SPM vocabulary: merges by score, byte fallback, specials.
TEST(SpmTokenizer, SyntheticVocabMergesByScore) {
  TokenizerVocab v;
  v.kind = TokenizerKind::kSpm;
  v.tokens = {"<unk>", "<s>", "</s>", "<|end|>"};
  v.types = {kTokUnknown, kTokControl, kTokControl, kTokControl};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    v.tokens.push_back(buf);
    v.types.push_back(kTokByte);
  }
  const std::vector<std::pair<std::string, float>> pieces = {{"\xE2\x96\x81", -1},
                                                             {"a", -1},
                                                             {"b", -1},
                                                             {"c", -1},
                                                             {"ab", -2},
                                                             {"bc", -0.5f},
                                                             {"\xE2\x96\x81"
                                                              "a",
                                                              -3},
                                                             {"abc", -4}};
  for (const auto& [p, s] : pieces) {
    v.tokens.push_back(p);
    v.types.push_back(kTokNormal);
  }
  v.scores.assign(v.tokens.size(), 0.0f);
  for (size_t k = 0; k < pieces.size(); ++k) v.scores[260 + k] = pieces[k].second;
  v.bos = 1;
  v.eos = 2;
  v.unk = 0;
  auto t = MakeTokenizer(v, "synthetic");
  ASSERT_TRUE(t.ok()) << t.message();
  const Tokenizer& tok = **t;
  auto id = [&](const std::string& p) { return tok.FindPiece(p); };
  // "▁abc": best first merge is "bc" (-0.5), then "▁a" (-3) beats "a"+"bc"
  // = "abc" (-4); "ab" (-2) never forms because "b" was taken by "bc".
  EXPECT_EQ(tok.Encode("abc", false), (std::vector<int32_t>{id("\xE2\x96\x81"
                                                               "a"),
                                                            id("bc")}));
  // Unknown "z" falls back to its byte.
  EXPECT_EQ(tok.Encode("az", false), (std::vector<int32_t>{id("\xE2\x96\x81"
                                                              "a"),
                                                           id("<0x7A>")}));
  // Special token only with parse_special.
  EXPECT_EQ(tok.Encode("a<|end|>", false, true), (std::vector<int32_t>{id("\xE2\x96\x81"
                                                                          "a"),
                                                                       3}));
  EXPECT_NE(tok.Encode("a<|end|>", false, false), (std::vector<int32_t>{id("\xE2\x96\x81"
                                                                           "a"),
                                                                        3}));
  EXPECT_EQ(tok.Decode(tok.Encode("a<|end|>", false, false)), "a<|end|>");
  // Without the space prefix "a"+"bc" merges into "abc".
  v.add_space_prefix = false;
  auto t2 = MakeTokenizer(v, "synthetic");
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ((*t2)->Encode("abc", false), (std::vector<int32_t>{id("abc")}));
  EXPECT_EQ((*t2)->Encode("abz", false), (std::vector<int32_t>{id("ab"), id("<0x7A>")}));
}

TEST(SpmTokenizer, InvalidVocabsAreRejected) {
  TokenizerVocab v;
  EXPECT_FALSE(MakeTokenizer(v, "x").ok());  // empty
  v.tokens = {"a", "b"};
  v.scores = {0};
  EXPECT_FALSE(MakeTokenizer(v, "x").ok());  // score count
  v.scores = {0, 0};
  v.bos = 7;
  auto r = MakeTokenizer(v, "x.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("x.gguf"), std::string::npos);
  v.bos = -1;
  v.types = {1, 9};
  EXPECT_FALSE(MakeTokenizer(v, "x").ok());  // bad type
}

}  // namespace
}  // namespace hqekv
