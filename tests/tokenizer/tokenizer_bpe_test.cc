// Byte-level BPE tokenizer built from a small gpt2-style GGUF written by
// GgufWriter, and the Llama 3 / Qwen2 pre-tokenizer scanner.
#include <gtest/gtest.h>

#include <map>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tokenizer/tokenizer.h"
#include "io/tokenizer_gguf.h"
#include "tokenizer/tokenizer_pretokenize.h"
#include "tokenizer/tokenizer_unicode.h"

namespace hqekv {
namespace {

// GPT-2 byte-to-unicode rule, restated for the test: printable bytes
// ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) are themselves, the rest U+0100.. in order.
std::string ByteChar(int b) {
  static std::map<int, uint32_t> m = [] {
    std::map<int, uint32_t> r;
    uint32_t next = 256;
    for (int x = 0; x < 256; ++x) {
      const bool printable = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
      r[x] = printable ? x : next++;
    }
    return r;
  }();
  std::string s;
  unicode::AppendUtf8(s, m[b]);
  return s;
}

struct BpeFixture {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  std::vector<uint8_t> image;
  std::unique_ptr<Tokenizer> tok;

  int32_t Id(const std::string& piece) const {
    for (size_t k = 0; k < tokens.size(); ++k)
      if (tokens[k] == piece) return static_cast<int32_t>(k);
    return -1;
  }

  explicit BpeFixture(const std::string& pre, bool add_bos = true) {
    for (int b = 0; b < 256; ++b) {
      tokens.push_back(ByteChar(b));
      types.push_back(kTokNormal);
    }
    const std::string G = ByteChar(' ');  // "Ġ"
    merges = {"h e",      "l l", "he ll",      "hell o", G + " w", "o r",
              G + "w or", "l d", G + "wor ld", "1 2",    "12 3",   G + " " + G};
    for (const auto& m : merges) {
      const size_t sp = m.find(' ');
      tokens.push_back(m.substr(0, sp) + m.substr(sp + 1));
      types.push_back(kTokNormal);
    }
    tokens.push_back("ab");  // a piece with no merge producing it
    types.push_back(kTokNormal);
    for (const char* s : {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"}) {
      tokens.push_back(s);
      types.push_back(kTokControl);
    }
    tokens.push_back("<tool>");
    types.push_back(kTokUserDefined);

    GgufWriter w;
    w.SetString("tokenizer.ggml.model", "gpt2");
    w.SetString("tokenizer.ggml.pre", pre);
    w.SetStringArray("tokenizer.ggml.tokens", tokens);
    w.SetI32Array("tokenizer.ggml.token_type", types);
    w.SetStringArray("tokenizer.ggml.merges", merges);
    w.SetU32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(Id("<|begin_of_text|>")));
    w.SetU32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(Id("<|end_of_text|>")));
    w.SetU32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(Id("<|eot_id|>")));
    w.SetU32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);  // "none"
    w.SetBool("tokenizer.ggml.add_bos_token", add_bos);
    image = w.Serialize();
    auto f = ParseGguf(image.data(), image.size(), "bpe.gguf");
    EXPECT_TRUE(f.ok()) << f.message();
    if (!f.ok()) return;
    auto t = TokenizerFromGguf(*f);
    EXPECT_TRUE(t.ok()) << t.message();
    if (t.ok()) tok = std::move(*t);
  }
};

TEST(BpeTokenizer, MergesByRank) {
  BpeFixture fx("llama-bpe");
  ASSERT_TRUE(fx.tok);
  const Tokenizer& t = *fx.tok;
  EXPECT_EQ(t.kind(), TokenizerKind::kBpe);
  const std::string G = ByteChar(' ');
  EXPECT_EQ(t.Encode("hello world", false),
            (std::vector<int32_t>{fx.Id("hello"), fx.Id(G + "world")}));
  // "world" without the space: "o r" (rank 5) before "l d" (rank 7); "w or" is no merge.
  EXPECT_EQ(t.Encode("world", false), (std::vector<int32_t>{fx.Id("w"), fx.Id("or"), fx.Id("ld")}));
  EXPECT_EQ(t.Encode("hello", true),
            (std::vector<int32_t>{fx.Id("<|begin_of_text|>"), fx.Id("hello")}));
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.bos(), fx.Id("<|begin_of_text|>"));
  EXPECT_TRUE(t.IsEndOfGeneration(fx.Id("<|eot_id|>")));
  EXPECT_TRUE(t.IsEndOfGeneration(fx.Id("<|end_of_text|>")));
  EXPECT_FALSE(t.IsEndOfGeneration(fx.Id("hello")));
  EXPECT_NE(t.Describe().find("bpe"), std::string::npos);
  BpeFixture no_bos("qwen2", false);
  ASSERT_TRUE(no_bos.tok);
  EXPECT_FALSE(no_bos.tok->add_bos());
}

TEST(BpeTokenizer, DigitsFollowThePreTokenizer) {
  BpeFixture llama("llama-bpe"), qwen("qwen2");
  ASSERT_TRUE(llama.tok && qwen.tok);
  // Llama 3: digits in groups of three; Qwen2: one digit per piece.
  EXPECT_EQ(llama.tok->Encode("12345", false),
            (std::vector<int32_t>{llama.Id("123"), llama.Id("4"), llama.Id("5")}));
  EXPECT_EQ(
      qwen.tok->Encode("12345", false),
      (std::vector<int32_t>{qwen.Id("1"), qwen.Id("2"), qwen.Id("3"), qwen.Id("4"), qwen.Id("5")}));
}

TEST(BpeTokenizer, Llama3LooksWholeWordsUpFirst) {
  BpeFixture llama("llama-bpe"), qwen("qwen2");
  ASSERT_TRUE(llama.tok && qwen.tok);
  // "ab" is a vocab piece but no merge makes it: llama.cpp's llama-bpe takes
  // the whole word (ignore_merges); qwen2 follows the merges only.
  EXPECT_EQ(llama.tok->Encode("ab", false), (std::vector<int32_t>{llama.Id("ab")}));
  EXPECT_EQ(qwen.tok->Encode("ab", false), (std::vector<int32_t>{qwen.Id("a"), qwen.Id("b")}));
}

TEST(BpeTokenizer, RoundTripsAnyBytes) {
  BpeFixture fx("llama-bpe");
  ASSERT_TRUE(fx.tok);
  const std::vector<std::string> texts = {
      "hello world",
      "  leading and trailing   ",
      "tabs\t\tand\r\nCRLF\n\n\nruns    of spaces",
      "caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD "
      "\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",  // é 你好 😀 👍🏽
      "invalid utf-8: \xFF\xFE\xC3 end",
      std::string("nul\0inside", 10),
      "I'm can't WE'LL 12345678 3.14",
  };
  for (const auto& s : texts) {
    const auto ids = fx.tok->Encode(s, false);
    EXPECT_EQ(fx.tok->Decode(ids), s);
    for (int32_t id : ids) EXPECT_FALSE(fx.tok->IsControl(id));
  }
}

TEST(BpeTokenizer, ControlTokensOnlyWhenAskedUserDefinedAlways) {
  BpeFixture fx("llama-bpe");
  ASSERT_TRUE(fx.tok);
  const Tokenizer& t = *fx.tok;
  const std::string text = "<|begin_of_text|>hello<|eot_id|><tool>";
  EXPECT_EQ(t.Encode(text, false, true),
            (std::vector<int32_t>{fx.Id("<|begin_of_text|>"), fx.Id("hello"), fx.Id("<|eot_id|>"),
                                  fx.Id("<tool>")}));
  // Without parse_special, control tokens are text; user-defined ones are
  // still whole tokens (llama.cpp's tokenizer_st_partition).
  const auto plain = t.Encode(text, false, false);
  for (int32_t id : plain) EXPECT_NE(id, fx.Id("<|eot_id|>"));
  EXPECT_EQ(plain.back(), fx.Id("<tool>"));
  EXPECT_EQ(t.Decode(plain), text);
  EXPECT_EQ(t.DecodePiece(-1, fx.Id("<|eot_id|>")), "");    // control: not printed
  EXPECT_EQ(t.DecodePiece(-1, fx.Id("<tool>")), "<tool>");  // user-defined: printed
  EXPECT_EQ(t.Piece(fx.Id("<|eot_id|>")), "<|eot_id|>");
}

TEST(BpeTokenizer, ByteMappingMatchesGpt2) {
  BpeFixture fx("llama-bpe");
  ASSERT_TRUE(fx.tok);
  // Known GPT-2 facts: space -> U+0120 "Ġ", newline -> U+010A "Ċ".
  EXPECT_EQ(fx.tok->Encode(" ", false), (std::vector<int32_t>{fx.tok->FindPiece("\xC4\xA0")}));
  EXPECT_EQ(fx.tok->Encode("\n", false), (std::vector<int32_t>{fx.tok->FindPiece("\xC4\x8A")}));
  EXPECT_EQ(fx.tok->DecodePiece(0, fx.tok->FindPiece("\xC4\xA0")), " ");
}

TEST(BpeTokenizer, BadMetadataIsAnError) {
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", "llama-bpe");
  w.SetStringArray("tokenizer.ggml.tokens", {"a", "b"});
  w.SetStringArray("tokenizer.ggml.merges", {"a b"});  // "ab" missing
  auto img = w.Serialize();
  auto f = ParseGguf(img.data(), img.size(), "m.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  auto t = TokenizerFromGguf(*f);
  ASSERT_FALSE(t.ok());  // no usable merge at all
  EXPECT_NE(t.message().find("m.gguf"), std::string::npos) << t.message();
  EXPECT_NE(t.message().find("merges"), std::string::npos) << t.message();
  // One unusable merge among good ones is skipped (and reported), not fatal.
  w.SetStringArray("tokenizer.ggml.tokens", {"a", "b", "ab"});
  w.SetStringArray("tokenizer.ggml.merges", {"a b", "a c"});
  img = w.Serialize();
  f = ParseGguf(img.data(), img.size(), "m.gguf");
  ASSERT_TRUE(f.ok());
  t = TokenizerFromGguf(*f);
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ((*t)->Encode("ab", false), (std::vector<int32_t>{2}));
  EXPECT_NE((*t)->Describe().find("1 unusable"), std::string::npos) << (*t)->Describe();
  w.SetStringArray("tokenizer.ggml.merges", {"ab"});  // no space: malformed
  img = w.Serialize();
  f = ParseGguf(img.data(), img.size(), "m.gguf");
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(TokenizerFromGguf(*f).ok());
  w.SetStringArray("tokenizer.ggml.merges", {"a b"});

  w.SetString("tokenizer.ggml.pre", "some-unknown-pre");
  img = w.Serialize();
  f = ParseGguf(img.data(), img.size(), "m.gguf");
  ASSERT_TRUE(f.ok());
  t = TokenizerFromGguf(*f);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("some-unknown-pre"), std::string::npos) << t.message();

  w.SetString("tokenizer.ggml.model", "rwkv");
  img = w.Serialize();
  f = ParseGguf(img.data(), img.size(), "m.gguf");
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(TokenizerFromGguf(*f).ok());
}

// Expected splits produced with Python's `regex` module on the exact
// pattern strings in tokenizer_pretokenize.h (and a 20,000-string random
// differential run of the same kind found no mismatch).
TEST(PreTokenize, MatchesTheRegex) {
  struct Case {
    PreTokenizer kind;
    std::string text;
    std::vector<std::string> want;
  };
  const std::vector<Case> cases = {
      {PreTokenizer::kLlama3,
       "Hello world's 1234567 !!  \x0A\x0A x",
       {"Hello", " world", "'s", " ", "123", "456", "7", " !!", "  \x0A\x0A", " x"}},
      {PreTokenizer::kQwen2,
       "Hello world's 1234567 !!  \x0A\x0A x",
       {"Hello", " world", "'s", " ", "1", "2", "3", "4", "5", "6", "7", " !!", "  \x0A\x0A",
        " x"}},
      {PreTokenizer::kLlama3,
       "I'LL can't   \x0A  \x09 x",
       {"I", "'LL", " can", "'t", "   \x0A", "  \x09", " x"}},
      {PreTokenizer::kQwen2,
       "I'LL can't   \x0A  \x09 x",
       {"I", "'LL", " can", "'t", "   \x0A", "  \x09", " x"}},
      {PreTokenizer::kLlama3, "  leading", {" ", " leading"}},
      {PreTokenizer::kQwen2, "  leading", {" ", " leading"}},
      {PreTokenizer::kLlama3, "trailing  ", {"trailing", "  "}},
      {PreTokenizer::kQwen2, "trailing  ", {"trailing", "  "}},
      {PreTokenizer::kLlama3,
       "a\x0D\x0A\x0D\x0A"
       "b",
       {"a", "\x0D\x0A\x0D\x0A", "b"}},
      {PreTokenizer::kQwen2,
       "a\x0D\x0A\x0D\x0A"
       "b",
       {"a", "\x0D\x0A\x0D\x0A", "b"}},
      {PreTokenizer::kLlama3,
       "\xC3\xA9t\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80!!\x0A",
       {"\xC3\xA9t\xC3\xA9", " \xE4\xBD\xA0\xE5\xA5\xBD", " \xF0\x9F\x98\x80!!\x0A"}},
      {PreTokenizer::kQwen2,
       "\xC3\xA9t\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80!!\x0A",
       {"\xC3\xA9t\xC3\xA9", " \xE4\xBD\xA0\xE5\xA5\xBD", " \xF0\x9F\x98\x80!!\x0A"}},
      {PreTokenizer::kLlama3, "x\xC2\xA0\xC2\xA0y", {"x", "\xC2\xA0", "\xC2\xA0y"}},
      {PreTokenizer::kQwen2, "x\xC2\xA0\xC2\xA0y", {"x", "\xC2\xA0", "\xC2\xA0y"}},
      {PreTokenizer::kLlama3, "(\xE0\xA4\x85\xE0\xA4\xBF)", {"(\xE0\xA4\x85", "\xE0\xA4\xBF)"}},
      {PreTokenizer::kQwen2, "(\xE0\xA4\x85\xE0\xA4\xBF)", {"(\xE0\xA4\x85", "\xE0\xA4\xBF)"}},
      {PreTokenizer::kLlama3, "3.14159 ,,, x2", {"3", ".", "141", "59", " ,,,", " x", "2"}},
      {PreTokenizer::kQwen2,
       "3.14159 ,,, x2",
       {"3", ".", "1", "4", "1", "5", "9", " ,,,", " x", "2"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> got;
    for (auto p : PreTokenize(c.text, c.kind)) got.emplace_back(p);
    EXPECT_EQ(got, c.want) << c.text;
  }
}

}  // namespace
}  // namespace hqekv
