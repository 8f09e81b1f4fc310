// Chat prompts: conversations rendered into the text a chat model was trained
// on. GGUF files carry the template as Jinja source
// (tokenizer.chat_template); hqekv does not run Jinja. It recognises the
// template family by marker substrings, as llama.cpp's
// llm_chat_detect_template does, and renders the family's fixed format:
//
//   family  recognised when the template contains          per message
//   chatml  "<|im_start|>" (and not "<|im_sep|>", phi-4)   <|im_start|>ROLE\nTEXT<|im_end|>\n
//   llama3  "<|start_header_id|>" and "<|end_header_id|>"
//   <|start_header_id|>ROLE<|end_header_id|>\n\nTRIM(TEXT)<|eot_id|> phi3    "<|assistant|>" and
//   "<|end|>"                  <|ROLE|>\nTEXT<|end|>\n gemma   "<start_of_turn>"
//   <start_of_turn>ROLE\nTRIM(TEXT)<end_of_turn>\n
//                                                          (assistant -> model; the system text
//                                                          opens the next user turn followed by
//                                                          "\n\n")
//
// The generation prompt (the start of the assistant's turn) follows when asked.
// Checked in this order. BOS is not part of the text: the tokenizer adds it
// when the file asks (add_bos_token), as llama.cpp does.
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

enum class ChatFormat { kChatML, kLlama3, kPhi3, kGemma };

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

const char* ChatFormatName(ChatFormat f);                             // "chatml", ...
std::optional<ChatFormat> ChatFormatFromName(std::string_view name);  // case-sensitive, as above
std::string SupportedChatFormatNames();  // "chatml, llama3, phi3, gemma"

// The family of a Jinja template by its markers; nullopt when none matches.
std::optional<ChatFormat> DetectChatFormat(std::string_view jinja);

// The format for a model: `override_name` (a family name) when not empty,
// else detected from the file's template. Errors name the cause and the
// --chat-template flag.
Result<ChatFormat> ResolveChatFormat(std::string_view jinja, std::string_view override_name);

// The conversation as the family's text; add_generation_prompt appends the
// opening of the assistant's turn.
std::string RenderChat(ChatFormat f, const std::vector<ChatMessage>& messages,
                       bool add_generation_prompt);

}  // namespace hqekv
