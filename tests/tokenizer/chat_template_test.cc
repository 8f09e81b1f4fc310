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

const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."}, {"user", " Hi! "}, {"assistant", "Hello."}, {"user", "2+2?"}};

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
  // A template that parses runs through the engine whatever its family (the
  // detector alone rejected "{{ m }}"); one that neither parses nor has a
  // family is an error naming both.
  auto plain = ResolveChatFormat("{{ m }}", "");
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_TRUE(plain->runs_template());
  EXPECT_FALSE(plain->family().has_value());
  auto broken = ResolveChatFormat("{{ m ", "");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.message().find("does not parse"), std::string::npos) << broken.message();
  EXPECT_NE(broken.message().find("line 1"), std::string::npos) << broken.message();
  EXPECT_NE(broken.message().find("--chat-template"), std::string::npos);
}

TEST(ChatTemplate, UnparsableTemplateFallsBackToItsFamily) {
  // The excerpt is not a whole template (its if has no endif).
  auto f = ResolveChatFormat(kQwen25Excerpt, "");
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->runs_template());
  EXPECT_EQ(f->family(), ChatFamily::kChatML);
  EXPECT_NE(f->fallback_note().find("does not parse"), std::string::npos);
}

// The model's template runs through the engine with the model's BOS/EOS
// texts; a leading BOS text goes (the tokenizer adds BOS).
TEST(ChatTemplate, RunsTheModelsTemplate) {
  const std::string tmpl =
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}{{ eos_token }}"
      "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
      "{% if tools %}[{{ tools | length }} tools]{% endif %}";
  ChatTokens tokens{"<B>", "<E>", /*add_bos=*/true, /*add_eos=*/false};
  auto f = ResolveChatFormat(tmpl, "", tokens);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_TRUE(f->runs_template());
  EXPECT_STREQ(ChatFormatName(*f), "jinja");
  EXPECT_STREQ(ChatEndOfTurnText(*f), "<E>");  // no family: the eos text
  EXPECT_EQ(*TryRenderChat(*f, {{"user", " hi "}}, true), "<user>hi<E><assistant>");
  ChatInput in;
  in.messages = ChatMessagesJson({{"user", "a"}});
  in.tools = nlohmann::ordered_json::parse(R"([{"type": "function"}])");
  in.add_generation_prompt = false;
  EXPECT_EQ(*RenderChat(*f, in), "<user>a<E>[1 tools]");
  tokens.add_bos = false;  // a tokenizer that does not add BOS: the text keeps it
  EXPECT_EQ(*TryRenderChat(*ResolveChatFormat(tmpl, "", tokens), {{"user", "x"}}, false),
            "<B><user>x<E>");
}

// raise_exception is an error with the template's message for callers that
// can report it; the legacy RenderChat writes the family's fixed format.
TEST(ChatTemplate, TemplateErrorsAreReported) {
  const std::string tmpl =
      "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') "
      "}}{% endif %}{% for m in messages %}{{ '<start_of_turn>' + m.role + '\n' + m.content + "
      "'<end_of_turn>\n' }}{% endfor %}";
  auto f = ResolveChatFormat(tmpl, "", ChatTokens{});
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->family(), ChatFamily::kGemma);
  auto err = TryRenderChat(*f, kConversation, true);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.message().find("System role not supported"), std::string::npos);
  EXPECT_NE(err.message().find("line 1"), std::string::npos);
  EXPECT_EQ(RenderChat(*f, kConversation, true),
            RenderChat(ChatFormat::kGemma, kConversation, true));
}

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
  auto from_file = ResolveChatFormat("", path);
  ASSERT_TRUE(from_file.ok()) << from_file.message();
  EXPECT_TRUE(from_file->runs_template());
  EXPECT_EQ(from_file->family(), ChatFamily::kLlama2);
  EXPECT_EQ(RenderChat(*from_file, {{"user", "x"}}, true), "<<SYS>>[INST] ");
  const std::string junk = hqekv::test::TempPath("hqekv_junk_template.jinja");
  {
    FILE* f = std::fopen(junk.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("{{ messages ", f);
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
