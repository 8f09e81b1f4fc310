// Chat formats: family detection from template text and the rendered prompts.
// The expected strings are written from the families' published templates
// (Qwen2.5-Instruct tokenizer_config.json for ChatML, Meta Llama 3.1
// Instruct's for Llama 3) for a plain system + user (+ assistant) exchange.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <cstdio>
#include "../temp_path.h"

namespace hqekv {
namespace {

// Excerpts of the real templates (enough for the markers detection reads).
constexpr const char* kQwen25Excerpt =
    "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- else %}{%- if messages[0]['role'] == "
    "'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}";
constexpr const char* kLlama31Excerpt =
    "{{- bos_token }}{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim + "
    "'<|eot_id|>' }}";

TEST(ChatTemplate, DetectsFamiliesByMarkers) {
  EXPECT_EQ(DetectChatFormat(kQwen25Excerpt), ChatFormat::kChatML);
  EXPECT_EQ(DetectChatFormat(kLlama31Excerpt), ChatFormat::kLlama3);
  EXPECT_EQ(DetectChatFormat("{{'<|user|>\\n' + m + '<|end|>\\n'}}{{'<|assistant|>\\n'}}"),
            ChatFormat::kPhi3);
  EXPECT_EQ(DetectChatFormat("{{ '<start_of_turn>' + role + '\\n' }}"), ChatFormat::kGemma);
  EXPECT_FALSE(DetectChatFormat("{{ m['content'] }}").has_value());
  EXPECT_FALSE(DetectChatFormat("<|im_start|><|im_sep|>").has_value());  // phi-4: not ChatML
}

TEST(ChatTemplate, ResolveNamesTheFlagOnErrors) {
  EXPECT_EQ(*ResolveChatFormat("", "llama3"), ChatFormat::kLlama3);
  EXPECT_EQ(*ResolveChatFormat(kQwen25Excerpt, ""), ChatFormat::kChatML);
  EXPECT_EQ(*ResolveChatFormat(kQwen25Excerpt, "gemma"), ChatFormat::kGemma);  // override wins
  auto unknown = ResolveChatFormat(kQwen25Excerpt, "vicuna");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("--chat-template"), std::string::npos);
  EXPECT_NE(unknown.message().find("chatml"), std::string::npos);
  EXPECT_FALSE(ResolveChatFormat("", "").ok());
  EXPECT_FALSE(ResolveChatFormat("{{ m }}", "").ok());
}

const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."}, {"user", " Hi! "}, {"assistant", "Hello."}, {"user", "2+2?"}};

TEST(ChatTemplate, RendersChatMl) {
  EXPECT_EQ(RenderChat(ChatFormat::kChatML, kConversation, true),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\n Hi! <|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(RenderChat(ChatFormat::kChatML, {{"user", "x"}}, false),
            "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTemplate, RendersLlama3) {
  EXPECT_EQ(RenderChat(ChatFormat::kLlama3, kConversation, true),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"  // trimmed, as the
                                                                         // template's | trim
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, RendersGemmaAndPhi3) {
  EXPECT_EQ(RenderChat(ChatFormat::kGemma, kConversation, true),
            "<start_of_turn>user\nYou are terse.\n\nHi!<end_of_turn>\n"
            "<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\n2+2?<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(RenderChat(ChatFormat::kPhi3, {{"user", "hi"}}, true),
            "<|user|>\nhi<|end|>\n<|assistant|>\n");
}

// The [INST] families by the markers llama.cpp's detector reads (excerpts of
// Llama-2-chat's, Mistral-7B-Instruct-v0.1's and Mistral's official templates).
TEST(ChatTemplate, DetectsInstFamilies) {
  EXPECT_EQ(DetectChatFormat("{% set content = '<<SYS>>\\n' + system_message %}"
                             "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"),
            ChatFormat::kLlama2);
  EXPECT_EQ(DetectChatFormat("{{ '[INST] ' + message['content'] + ' [/INST]' }}"),
            ChatFormat::kMistral);
  EXPECT_EQ(DetectChatFormat("{{ ' [INST] ' + system_message + '\\n\\n' }}"),
            ChatFormat::kMistralV1);
  EXPECT_EQ(DetectChatFormat("{{ '[AVAILABLE_TOOLS] [' }}{{ '[INST] ' + c + '[/INST]' }}"),
            ChatFormat::kMistralV3);
  EXPECT_EQ(DetectChatFormat("{{ '[AVAILABLE_TOOLS][' }}{{ \"[INST]\" + c + \"[/INST]\" }}"),
            ChatFormat::kMistralV3Tekken);
  EXPECT_EQ(DetectChatFormat("{{ '[SYSTEM_PROMPT]' + s }}{{ '[INST]' + c + '[/INST]' }}"),
            ChatFormat::kMistralV7);
  for (const char* name :
       {"llama2", "mistral", "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7"}) {
    auto f = ChatFormatFromName(name);
    ASSERT_TRUE(f.has_value()) << name;
    EXPECT_STREQ(ChatFormatName(*f), name);
  }
}

TEST(ChatTemplate, RendersLlama2AsItsTemplate) {
  // Llama-2-chat: the system block inside the first user turn, content.strip()
  // of the whole turn, " A </s>" answers, "<s>" before later user turns.
  EXPECT_EQ(RenderChat(ChatFormat::kLlama2, kConversation, true),
            "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\n Hi! [/INST] Hello. </s>"
            "<s>[INST] 2+2? [/INST]");
  EXPECT_EQ(RenderChat(ChatFormat::kLlama2, {{"user", " x "}}, false), "[INST] x [/INST]");
}

TEST(ChatTemplate, RendersMistralVariants) {
  const std::vector<ChatMessage> no_system(kConversation.begin() + 1, kConversation.end());
  EXPECT_EQ(RenderChat(ChatFormat::kMistral, no_system, true),
            "[INST]  Hi!  [/INST]Hello.</s>[INST] 2+2? [/INST]");
  EXPECT_EQ(RenderChat(ChatFormat::kMistral, kConversation, true),
            "[INST] You are terse.\n Hi!  [/INST]Hello.</s>[INST] 2+2? [/INST]");
  EXPECT_EQ(RenderChat(ChatFormat::kMistralV1, kConversation, true),
            " [INST] You are terse.\n\n Hi!  [/INST] Hello.</s> [INST] 2+2? [/INST]");
  const std::vector<ChatMessage> padded = {{"user", "a"}, {"assistant", " b "}, {"user", "c"}};
  EXPECT_EQ(RenderChat(ChatFormat::kMistralV3, padded, true),
            "[INST] a[/INST] b</s>[INST] c[/INST]");
  EXPECT_EQ(RenderChat(ChatFormat::kMistralV3Tekken, padded, true),
            "[INST]a[/INST] b </s>[INST]c[/INST]");
  EXPECT_EQ(RenderChat(ChatFormat::kMistralV7, kConversation, true),
            "[SYSTEM_PROMPT] You are terse.[/SYSTEM_PROMPT][INST]  Hi! [/INST] Hello.</s>"
            "[INST] 2+2?[/INST]");
}

TEST(ChatTemplate, OverrideReadsATemplateFile) {
  const std::string path = hqekv::test::TempPath("hqekv_llama2_template.jinja");
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("{{ '<<SYS>>' }}{{ '[INST] ' }}", f);
    std::fclose(f);
  }
  EXPECT_EQ(*ResolveChatFormat("", path), ChatFormat::kLlama2);
  const std::string junk = hqekv::test::TempPath("hqekv_junk_template.jinja");
  {
    FILE* f = std::fopen(junk.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("{{ messages }}", f);
    std::fclose(f);
  }
  auto bad = ResolveChatFormat("", junk);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find(junk), std::string::npos);
  std::remove(path.c_str());
  std::remove(junk.c_str());
}

}  // namespace
}  // namespace hqekv
