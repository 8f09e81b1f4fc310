// The regex-list pre-tokenizers (tokenizer_pretokenize.h): default, gpt-2,
// smollm, deepseek-llm, deepseek-v3 and tekken, and llama.cpp's name mapping.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/tokenizer_pretokenize.h"

namespace hqekv {
namespace {

// Expected splits made with Python's `regex` module (2024.x, not a build
// dependency) applying each set's regex list one after the other, keeping
// the unmatched text between matches as pieces, as llama.cpp's
// unicode_regex_split does. The regex strings are those of llama.cpp
// src/llama-vocab.cpp (llm_tokenizer_bpe). A random differential run of the
// same oracle against PreTokenize (80,000 strings of 0-14 codepoints drawn
// from ASCII letters, digits, punctuation, spaces, line breaks and
// non-ASCII letters, marks, numbers, CJK, fullwidth forms, U+3000) found no
// mismatch. deepseek-v3 (regex 2026.5.9): 100,000 random strings of 0-14
// codepoints from the same kinds of pools plus marks (U+0301, U+3099,
// U+20DD), symbols (€, ©, →, ^, `, emoji), kana and Hangul: no mismatch.
TEST(PreTokenizeSets, MatchesLlamaCppRegexLists) {
  struct Case {
    PreTokenizer kind;
    std::string text;
    std::vector<std::string> want;
  };
  const std::vector<Case> cases = {
      {PreTokenizer::kDefault,
       "(see below) don't a.b.c",
       {"(", "see", " below", ")", " don", "'", "t", " a", ".", "b", ".", "c"}},
      {PreTokenizer::kDefault,
       "x = 12345 + y^2;",
       {"x", " ", "=", " ", "123", "45", " ", "+", " y", "^", "2", ";"}},
      {PreTokenizer::kDefault,
       "Hello  world\x0A"
       "\x0A"
       " 42",
       {"Hello", " ", " world",
        "\x0A"
        "\x0A",
        " ", "42"}},
      {PreTokenizer::kGpt2,
       "I'LL can't  stop\x0A"
       " x",
       {"I", "'", "LL", " can", "'t", " ", " stop", "\x0A", " x"}},
      {PreTokenizer::kGpt2,
       "Hello world's 1234567 !!  \x0A"
       "\x0A"
       " x",
       {"Hello", " world", "'s", " 1234567", " !!",
        "  \x0A"
        "\x0A",
        " x"}},
      {PreTokenizer::kSmollm, "abc 123 x2y", {"abc", " ", "1", "2", "3", " x", "2", "y"}},
      {PreTokenizer::kSmollm,
       "It's 2024!  ok",
       {"It", "'s", " ", "2", "0", "2", "4", "!", " ", " ok"}},
      {PreTokenizer::kDeepseekLlm,
       "Hello, world!\x0D"
       "\x0A",
       {"Hello", ",", " world", "!", "\x0D", "\x0A"}},
      {PreTokenizer::kDeepseekLlm,
       "h\xC3\xA9"
       "llo  ",
       {"h", "\xC3\xA9", "llo", "  "}},
      {PreTokenizer::kDeepseekLlm,
       "\xE4\xB8\xAD"
       "\xE6\x96\x87"
       " text 42",
       {"\xE4\xB8\xAD"
        "\xE6\x96\x87",
        " text", " ", "42"}},
      {PreTokenizer::kDeepseekLlm,
       "\xCE\xA9"
       "K ok\xE3\x80\x80"
       "\xE4\xB8\xAD",
       {"\xCE\xA9", "K", " ok", "\xE3\x80\x80", "\xE4\xB8\xAD"}},
      // deepseek-v3: numbers in threes, CJK + kana runs, ASCII punctuation
      // glued to the ASCII letters after it, letters with their marks.
      {PreTokenizer::kDeepseekV3,
       "Hello, world! (see below) don't",
       {"Hello", ",", " world", "!", " (", "see", " below", ")", " don", "'t"}},
      {PreTokenizer::kDeepseekV3,
       "x=12345+y^2; 3.14159",
       {"x", "=", "123", "45", "+y", "^", "2", ";", " ", "3", ".", "141", "59"}},
      {PreTokenizer::kDeepseekV3,
       "\xE4\xB8\xAD\xE6\x96\x87\xE3\x81\x82\xE3\x82\xA2 text\xEA\xB0\x80",  // 中文あア text가
       {"\xE4\xB8\xAD\xE6\x96\x87\xE3\x81\x82\xE3\x82\xA2", " text\xEA\xB0\x80"}},
      {PreTokenizer::kDeepseekV3,
       "caf\xC3\xA9 e\xCC\x81t\xC3\xA9 \xE2\x82\xAC"
       "5 ((see))",  // café été €5, é as e + U+0301
       {"caf\xC3\xA9", " e\xCC\x81t\xC3\xA9", " \xE2\x82\xAC", "5", " ((", "see", "))"}},
      {PreTokenizer::kDeepseekV3,
       "  hi\x0A\x0A  there  ",
       {" ", " hi", "\x0A\x0A", " ", " there", "  "}},
      {PreTokenizer::kDeepseekV3,
       "'s \xE2\x80\x9Cquoted\xE2\x80\x9D\tx",  // curly quotes, a tab before a letter
       {"'s", " \xE2\x80\x9C", "quoted", "\xE2\x80\x9D", "\tx"}},
      {PreTokenizer::kTekken, "HelloWorld ABCdef XYZ", {"Hello", "World", " ABCdef", " XYZ"}},
      {PreTokenizer::kTekken,
       "\xC3\xA9"
       "A? path/to\x0A",
       {"\xC3\xA9", "A", "?", " path", "/to", "\x0A"}},
      {PreTokenizer::kTekken, "3.14 x  y", {"3", ".", "1", "4", " x", " ", " y"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> got;
    std::string joined;
    for (auto p : PreTokenize(c.text, c.kind)) {
      got.emplace_back(p);
      joined += p;
    }
    EXPECT_EQ(got, c.want) << c.text;
    EXPECT_EQ(joined, c.text);  // pieces tile the text
  }
}

// The three differences the issue names between DEFAULT and Llama 3 rules.
TEST(PreTokenizeSets, DefaultDiffersFromLlama3) {
  auto split = [](const char* s, PreTokenizer k) {
    std::vector<std::string> v;
    for (auto p : PreTokenize(s, k)) v.emplace_back(p);
    return v;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("(see below)", PreTokenizer::kDefault), (V{"(", "see", " below", ")"}));
  EXPECT_EQ(split("(see below)", PreTokenizer::kLlama3), (V{"(see", " below", ")"}));
  EXPECT_EQ(split("don't", PreTokenizer::kDefault), (V{"don", "'", "t"}));
  EXPECT_EQ(split("don't", PreTokenizer::kLlama3), (V{"don", "'t"}));
  EXPECT_EQ(split("a.b.c", PreTokenizer::kDefault), (V{"a", ".", "b", ".", "c"}));
  EXPECT_EQ(split("a.b.c", PreTokenizer::kLlama3), (V{"a", ".b", ".c"}));
  EXPECT_TRUE(PreTokenize("", PreTokenizer::kDefault).empty());
}

TEST(PreTokenizeSets, NamesAsLlamaCpp) {
  EXPECT_EQ(PreTokenizerByName("default"), PreTokenizer::kDefault);
  EXPECT_EQ(PreTokenizerByName("llama-bpe"), PreTokenizer::kLlama3);
  EXPECT_EQ(PreTokenizerByName("smaug-bpe"), PreTokenizer::kLlama3);
  EXPECT_EQ(PreTokenizerByName("qwen2"), PreTokenizer::kQwen2);
  EXPECT_EQ(PreTokenizerByName("gpt-2"), PreTokenizer::kGpt2);
  EXPECT_EQ(PreTokenizerByName("smollm"), PreTokenizer::kSmollm);
  EXPECT_EQ(PreTokenizerByName("deepseek-llm"), PreTokenizer::kDeepseekLlm);
  EXPECT_EQ(PreTokenizerByName("tekken"), PreTokenizer::kTekken);
  EXPECT_FALSE(PreTokenizerByName("gpt2").has_value());  // llama.cpp's name has a dash
  EXPECT_EQ(PreTokenizerByName("deepseek-v3"), PreTokenizer::kDeepseekV3);
  EXPECT_FALSE(PreTokenizerByName("deepseek-coder").has_value());
  EXPECT_FALSE(PreTokenizerByName("").has_value());
}

}  // namespace
}  // namespace hqekv
