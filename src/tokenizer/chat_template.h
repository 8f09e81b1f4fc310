// Chat prompts: conversations rendered into the text a chat model was trained
// on. GGUF files carry the template as Jinja source (tokenizer.chat_template);
// hqekv runs it with its Jinja engine (tokenizer/jinja.h), as llama.cpp runs
// it with minja and transformers with jinja2, giving the template messages
// (with tool_calls and the like), tools, bos_token / eos_token and
// add_generation_prompt. When the template does not parse, or when a family
// is named with --chat-template, one of ten fixed renderers writes the
// family's format instead. The family is recognised by marker substrings,
// as llama.cpp's llm_chat_detect_template does; checked in this order (first
// match wins):
//
// clang-format off
//   name               recognised when the template contains
//   chatml             "<|im_start|>" (and not "<|im_sep|>": phi-4)
//   mistral-v7         "[INST]" and "[SYSTEM_PROMPT]"
//   mistral-v1         "[INST]", Mistral's official markers (a), and " [INST]"
//   mistral-v3-tekken  "[INST]", (a), and "\"[INST]\""
//   mistral-v3         "[INST]" and (a)
//   llama2             "[INST]" and "<<SYS>>"
//   mistral            "[INST]" alone (Mistral/Mixtral-Instruct v0.1, v0.2)
//   llama3             "<|start_header_id|>" and "<|end_header_id|>"
//   phi3               "<|assistant|>" and "<|end|>"
//   gemma              "<start_of_turn>"
//   (a) = "' [INST] ' + system_message" or "[AVAILABLE_TOOLS]"
//
//   name               one message (S = system, U = user, A = assistant text)
//   chatml             <|im_start|>ROLE\nTEXT<|im_end|>\n
//   llama3             <|start_header_id|>ROLE<|end_header_id|>\n\nTRIM(TEXT)<|eot_id|>
//   phi3               <|ROLE|>\nTEXT<|end|>\n
//   gemma              <start_of_turn>ROLE\nTRIM(TEXT)<end_of_turn>\n  (assistant -> model;
//                      S opens the next user turn followed by "\n\n")
//   llama2             <s>[INST] STRIP(<<SYS>>\nS\n<</SYS>>\n\nU) [/INST] STRIP(A) </s>
//                      (the system block only in the turn after S)
//   mistral            [INST] U [/INST]A</s>        (S + "\n" opens the next user turn)
//   mistral-v1         " [INST] U [/INST] A</s>"    (S + "\n\n" opens the next user turn)
//   mistral-v3         [INST] U[/INST] TRIM(A)</s>  (same)
//   mistral-v3-tekken  [INST]U[/INST]A</s>          (same)
//   mistral-v7         [SYSTEM_PROMPT] S[/SYSTEM_PROMPT][INST] U[/INST] A</s>
// clang-format on
//
// The fixed renderers write the generation prompt (the start of the
// assistant's turn) when asked (the [INST] families have none: the user turn
// ends with it). BOS is not part of the text: the tokenizer adds it when the
// file asks (add_bos_token), as llama.cpp does; llama2 writes "<s>" before
// every later user turn, as its template does (parsed as BOS with special
// tokens on). A template's rendering likewise loses a leading bos_token text
// when the tokenizer adds BOS (llama.cpp does the same), and a trailing
// eos_token text when it adds EOS. The llama2 and mistral* renderings follow
// the Hugging Face templates of Llama-2-chat and Mistral-7B-Instruct-v0.1,
// and the llama.cpp formats of Mistral's v1/v3/v7 templates.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hqekv {

namespace jinja {
class Template;
}
class Tokenizer;

// The fixed renderers.
enum class ChatFamily {
  kChatML,
  kLlama3,
  kPhi3,
  kGemma,
  kLlama2,
  kMistral,
  kMistralV1,
  kMistralV3,
  kMistralV3Tekken,
  kMistralV7,
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (a template may know "tool" and others)
  std::string content;
};

// What a template sees as bos_token / eos_token, and whether the tokenizer
// adds them itself (then the rendered text drops them at its ends).
struct ChatTokens {
  std::string bos, eos;
  bool add_bos = true;
  bool add_eos = false;
};
// The model's: the texts of its BOS and EOS tokens, its add_bos_token.
ChatTokens ChatTokensOf(const Tokenizer& tok);

// How a model's conversations become text: its Jinja template (with the
// family it resembles, for the end-of-turn text, or none), or a fixed
// family renderer. Copies share the parsed template.
class ChatFormat {
 public:
  // The fixed renderers as formats (ChatFormat::kChatML, ...).
  static const ChatFormat kChatML, kLlama3, kPhi3, kGemma, kLlama2, kMistral, kMistralV1,
      kMistralV3, kMistralV3Tekken, kMistralV7;

  explicit ChatFormat(ChatFamily family) : family_(family) {}
  // A parsed template; `family` is what its markers resemble (nullopt: none).
  ChatFormat(std::shared_ptr<const jinja::Template> tmpl, std::optional<ChatFamily> family,
             ChatTokens tokens, std::string fallback_note = "");

  bool runs_template() const { return template_ != nullptr; }
  const std::optional<ChatFamily>& family() const { return family_; }
  const ChatTokens& tokens() const { return tokens_; }
  const jinja::Template* jinja_template() const { return template_.get(); }
  // Why a fixed renderer stands in for the model's template ("" when it
  // does not): the template's parse error.
  const std::string& fallback_note() const { return fallback_note_; }
  void set_fallback_note(std::string note) { fallback_note_ = std::move(note); }

  // Same renderer: same family and the same parsed template (or none).
  bool operator==(const ChatFormat& o) const {
    return family_ == o.family_ && template_ == o.template_;
  }

 private:
  std::optional<ChatFamily> family_;
  std::shared_ptr<const jinja::Template> template_;
  ChatTokens tokens_;
  std::string fallback_note_;
};

// "jinja" for a template, else the family's name ("chatml", ...).
const char* ChatFormatName(const ChatFormat& f);
const char* ChatFamilyName(ChatFamily f);
std::optional<ChatFormat> ChatFormatFromName(std::string_view name);  // case-sensitive, as above
std::string SupportedChatFormatNames();  // "chatml, llama3, ..." (detection order)

// The family of a Jinja template by its markers; nullopt when none matches.
std::optional<ChatFormat> DetectChatFormat(std::string_view jinja);
std::optional<ChatFamily> DetectChatFamily(std::string_view jinja);

// The format for a model: `override_name` when not empty (a family name: that
// fixed renderer; or the path of a file holding a Jinja template), else the
// file's template `jinja`. A template runs through the Jinja engine with
// `tokens`; one that does not parse falls back to the fixed renderer of its
// family when its markers name one, else is an error. Errors name the cause,
// the file and the --chat-template flag. Without `tokens` (the two-argument
// form), bos/eos are the usual texts of the detected family ("<s>"/"</s>"
// for llama2 and mistral, "<|begin_of_text|>"/"<|eot_id|>" for llama3, ...;
// "" when none): pass ChatTokensOf(tokenizer) where the model is at hand.
Result<ChatFormat> ResolveChatFormat(std::string_view jinja, std::string_view override_name,
                                     const ChatTokens& tokens);
Result<ChatFormat> ResolveChatFormat(std::string_view jinja, std::string_view override_name);

// A conversation in the JSON shape templates expect (OpenAI / transformers):
// messages [{"role", "content", "tool_calls", "tool_call_id", ...}], tools
// (null when none), and any further template variables in `extra` (e.g.
// {"enable_thinking": false}).
struct ChatInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools = nullptr;
  bool add_generation_prompt = true;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};
nlohmann::ordered_json ChatMessagesJson(const std::vector<ChatMessage>& messages);

// The conversation as text. A template's errors (raise_exception, a syntax
// or type error at render time) come back with its line and column. A fixed
// renderer reads role and content only (content: a string, null, or a list
// of {"type": "text", "text"} parts).
Result<std::string> RenderChat(const ChatFormat& f, const ChatInput& in);
Result<std::string> TryRenderChat(const ChatFormat& f, const std::vector<ChatMessage>& messages,
                                  bool add_generation_prompt);

// As TryRenderChat, for callers without an error path: when the template
// fails at render time, the fixed renderer of its family writes the text
// (ChatML when it has none).
std::string RenderChat(const ChatFormat& f, const std::vector<ChatMessage>& messages,
                       bool add_generation_prompt);

// The text that closes an answer ("<|im_end|>", "<|eot_id|>", "</s>", ...):
// a stop string for chat, for models that write it as text. A template of
// no known family: its eos_token text.
const char* ChatEndOfTurnText(const ChatFormat& f);

}  // namespace hqekv
