#include "tokenizer/chat_template.h"

#include <cctype>

namespace hqekv {
namespace {

struct FormatRow {
  ChatFormat format;
  const char* name;
};
constexpr FormatRow kFormats[] = {
    {ChatFormat::kChatML, "chatml"},
    {ChatFormat::kLlama3, "llama3"},
    {ChatFormat::kPhi3, "phi3"},
    {ChatFormat::kGemma, "gemma"},
};

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Leading and trailing ASCII whitespace removed (llama.cpp trims message text
// for the families that do so in their templates: llama3, gemma).
std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

const char* ChatFormatName(ChatFormat f) {
  for (const auto& r : kFormats)
    if (r.format == f) return r.name;
  return "?";
}

std::optional<ChatFormat> ChatFormatFromName(std::string_view name) {
  for (const auto& r : kFormats)
    if (name == r.name) return r.format;
  return std::nullopt;
}

std::string SupportedChatFormatNames() {
  std::string out;
  for (const auto& r : kFormats) out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

std::optional<ChatFormat> DetectChatFormat(std::string_view t) {
  if (Contains(t, "<|im_start|>") && !Contains(t, "<|im_sep|>")) return ChatFormat::kChatML;
  if (Contains(t, "<|start_header_id|>") && Contains(t, "<|end_header_id|>"))
    return ChatFormat::kLlama3;
  if (Contains(t, "<|assistant|>") && Contains(t, "<|end|>")) return ChatFormat::kPhi3;
  if (Contains(t, "<start_of_turn>")) return ChatFormat::kGemma;
  return std::nullopt;
}

Result<ChatFormat> ResolveChatFormat(std::string_view jinja, std::string_view override_name) {
  if (!override_name.empty()) {
    if (auto f = ChatFormatFromName(override_name)) return *f;
    return MakeError("--chat-template: unknown template '" + std::string(override_name) +
                     "' (supported: " + SupportedChatFormatNames() + ")");
  }
  if (jinja.empty()) {
    return MakeError(
        "the model file has no tokenizer.chat_template; name a format with --chat-template (" +
        SupportedChatFormatNames() + ")");
  }
  if (auto f = DetectChatFormat(jinja)) return *f;
  return MakeError("tokenizer.chat_template is not a recognised family (supported: " +
                   SupportedChatFormatNames() + "); name one with --chat-template");
}

std::string RenderChat(ChatFormat f, const std::vector<ChatMessage>& messages,
                       bool add_generation_prompt) {
  std::string out;
  switch (f) {
    case ChatFormat::kChatML:
      for (const auto& m : messages)
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      break;
    case ChatFormat::kLlama3:
      for (const auto& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + Trim(m.content) +
               "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatFormat::kPhi3:
      for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
      if (add_generation_prompt) out += "<|assistant|>\n";
      break;
    case ChatFormat::kGemma: {
      std::string system;  // Gemma has no system role: the text opens the next user turn
      for (const auto& m : messages) {
        if (m.role == "system") {
          system += Trim(m.content);
          continue;
        }
        const std::string role = m.role == "assistant" ? "model" : m.role;
        out += "<start_of_turn>" + role + "\n";
        if (!system.empty() && role != "model") {
          out += system + "\n\n";
          system.clear();
        }
        out += Trim(m.content) + "<end_of_turn>\n";
      }
      if (add_generation_prompt) out += "<start_of_turn>model\n";
      break;
    }
  }
  return out;
}

}  // namespace hqekv
