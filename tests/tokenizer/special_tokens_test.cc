// Special tokens as llama.cpp treats them: a ChatML / Qwen3-style vocabulary
// (control tokens, a user-defined <think>, end-of-generation tokens found by
// text as well as by the file's ids).
#include <gtest/gtest.h>

#include <cstdio>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace hqekv {
namespace {

struct Vocab {
  TokenizerVocab v;
  std::unique_ptr<Tokenizer> tok;
  int32_t Id(const std::string& piece) const { return tok->FindPiece(piece); }
};

// SPM vocabulary: control <unk> <s> </s>, 256 byte tokens, a few pieces, then
// the special tokens of a ChatML model. eos is <|im_end|> (as Qwen instruct
// files say); <|endoftext|>, <|eom_id|> and <|end_of_text|> are ends by text.
Vocab ChatVocab() {
  Vocab r;
  TokenizerVocab& v = r.v;
  v.kind = TokenizerKind::kSpm;
  auto add = [&](const std::string& p, int32_t type, float score = 0) {
    v.tokens.push_back(p);
    v.types.push_back(type);
    v.scores.push_back(score);
  };
  add("<unk>", kTokUnknown);
  add("<s>", kTokControl);
  add("</s>", kTokControl);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, kTokByte);
  }
  const std::string sp = "\xE2\x96\x81";
  for (const std::string& p : std::vector<std::string>{"h", "i", "e", "l", "o", "u", "s", "r", "a",
                                                       "t", "n", "k", "\n", sp})
    add(p, kTokNormal, -10);
  add("hi", kTokNormal, -1);
  for (const char* p :
       {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|eom_id|>", "<|end_of_text|>"})
    add(p, kTokControl);
  add("<think>", kTokUserDefined);
  add("</think>", kTokUserDefined);
  v.unk = 0;
  v.bos = 1;
  v.eos = static_cast<int32_t>(v.tokens.size()) - 6;  // <|im_end|>
  v.add_bos = false;
  v.add_space_prefix = false;
  v.chat_template =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] "
      "+ '<|im_end|>' + '\\n'}}{% endfor %}";
  auto t = MakeTokenizer(v, "chat-vocab");
  EXPECT_TRUE(t.ok()) << t.message();
  if (t.ok()) r.tok = std::move(*t);
  return r;
}

TEST(SpecialTokens, ChatMlPromptBecomesWholeTokens) {
  const Vocab fx = ChatVocab();
  ASSERT_TRUE(fx.tok);
  ASSERT_EQ(fx.Id("<|im_end|>"), fx.v.eos);
  const std::string prompt = RenderChat(ChatFormat::kChatML, {{"user", "hi"}}, true);
  const auto ids = fx.tok->Encode(prompt, false, /*parse_special=*/true);
  // Control tokens matched whole; the text between them encoded fragment by fragment.
  auto text = [&](const char* s) { return fx.tok->Encode(s, false, false); };
  std::vector<int32_t> want = {fx.Id("<|im_start|>")};
  for (int32_t id : text("user\nhi")) want.push_back(id);
  want.push_back(fx.Id("<|im_end|>"));
  for (int32_t id : text("\n")) want.push_back(id);
  want.push_back(fx.Id("<|im_start|>"));
  for (int32_t id : text("assistant\n")) want.push_back(id);
  EXPECT_EQ(ids, want);
  // --no-special: the same text, control markers spelled out byte by byte.
  const auto plain = fx.tok->Encode(prompt, false, false);
  EXPECT_GT(plain.size(), want.size() + 20);  // the markers spelled out byte by byte
  for (int32_t id : plain) EXPECT_FALSE(fx.tok->IsControl(id));
  EXPECT_EQ(fx.tok->Decode(plain, -1), prompt);
}

TEST(SpecialTokens, UserDefinedTokensAreNeverSplit) {
  const Vocab fx = ChatVocab();
  ASSERT_TRUE(fx.tok);
  for (bool parse_special : {false, true}) {
    const auto ids = fx.tok->Encode("<think>hi</think>", false, parse_special);
    EXPECT_EQ(ids, (std::vector<int32_t>{fx.Id("<think>"), fx.Id("hi"), fx.Id("</think>")}))
        << parse_special;
  }
  // Printed (they are text the model writes), unlike control tokens.
  EXPECT_EQ(fx.tok->DecodePiece(-1, fx.Id("<think>")), "<think>");
  EXPECT_EQ(fx.tok->DecodePiece(-1, fx.Id("<|im_end|>")), "");
}

// llama.cpp (and Hugging Face) read "<unk>" written in the text as the
// unknown token when special tokens are parsed, and as text otherwise (found
// on Llama 2's real vocabulary: tests/peers/tokenizer_parity.sh).
TEST(SpecialTokens, UnknownTokenTextIsItsIdOnlyWhenParsing) {
  const Vocab fx = ChatVocab();
  ASSERT_TRUE(fx.tok);
  const int32_t hi = fx.Id("hi");
  EXPECT_EQ(fx.tok->Encode("hi<unk>hi", false, true), (std::vector<int32_t>{hi, fx.v.unk, hi}));
  const auto plain = fx.tok->Encode("hi<unk>hi", false, false);
  EXPECT_EQ(plain.size(), 7u);  // hi, <0x3C>, u, n, k, <0x3E>, hi
  for (int32_t id : plain) EXPECT_NE(id, fx.v.unk);
  EXPECT_EQ(fx.tok->Decode(plain, -1), "hi<unk>hi");
}

TEST(SpecialTokens, EndOfGenerationByIdAndByText) {
  const Vocab fx = ChatVocab();
  ASSERT_TRUE(fx.tok);
  const Tokenizer& t = *fx.tok;
  for (const char* p : {"<|im_end|>", "<|endoftext|>", "<|eom_id|>", "<|end_of_text|>"})
    EXPECT_TRUE(t.IsEndOfGeneration(fx.Id(p))) << p;
  for (const char* p : {"<|im_start|>", "<think>", "</s>", "hi"})
    EXPECT_FALSE(t.IsEndOfGeneration(fx.Id(p))) << p;
  EXPECT_EQ(t.EndOfGenerationIds().size(), 4u);
  EXPECT_FALSE(t.IsEndOfGeneration(-1));
  EXPECT_EQ(t.chat_template(), fx.v.chat_template);
  EXPECT_TRUE(IsEndOfGenerationText("<|eot_id|>"));
  EXPECT_FALSE(IsEndOfGenerationText("<|im_start|>"));
}

}  // namespace
}  // namespace hqekv
