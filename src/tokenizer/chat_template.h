// Chat prompts: conversations rendered into the text a chat model was trained
// on. GGUF files carry the template as Jinja source
// (tokenizer.chat_template); hqekv does not run Jinja. It recognises the
// template family by marker substrings, as llama.cpp's
// llm_chat_detect_template does, and renders the family's fixed format.
// Checked in this order (first match wins):
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
// The generation prompt (the start of the assistant's turn) follows when
// asked (the [INST] families have none: the user turn ends with it). BOS is
// not part of the text: the tokenizer adds it when the file asks
// (add_bos_token), as llama.cpp does; llama2 writes "<s>" before every later
// user turn, as its template does (parsed as BOS with special tokens on).
// The llama2 and mistral* renderings follow the Hugging Face templates of
// Llama-2-chat and Mistral-7B-Instruct-v0.1, and the llama.cpp formats of
// Mistral's v1/v3/v7 templates; tests/tokenizer/chat_template_ref.sh checks
// the families against @huggingface/jinja on transcribed real templates.
//
// Why not a Jinja engine: the popular families' templates reduce to these
// formats for plain system/user/assistant conversations, and a detector
// cannot silently run arbitrary template code; an unrecognised template is an
// error that names --chat-template.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hqekv {

enum class ChatFormat {
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
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

const char* ChatFormatName(ChatFormat f);                             // "chatml", ...
std::optional<ChatFormat> ChatFormatFromName(std::string_view name);  // case-sensitive, as above
std::string SupportedChatFormatNames();  // "chatml, llama3, ..." (detection order)

// The family of a Jinja template by its markers; nullopt when none matches.
std::optional<ChatFormat> DetectChatFormat(std::string_view jinja);

// The format for a model: `override_name` when not empty (a family name, or
// the path of a file holding a Jinja template, detected as above), else
// detected from the file's template. Errors name the cause, the file and the
// --chat-template flag.
Result<ChatFormat> ResolveChatFormat(std::string_view jinja, std::string_view override_name);

// The conversation as the family's text; add_generation_prompt appends the
// opening of the assistant's turn (where the family has one).
std::string RenderChat(ChatFormat f, const std::vector<ChatMessage>& messages,
                       bool add_generation_prompt);

// The text that closes an answer in the family ("<|im_end|>", "<|eot_id|>",
// "</s>", ...): a stop string for chat, for models that write it as text.
const char* ChatEndOfTurnText(ChatFormat f);

}  // namespace hqekv
