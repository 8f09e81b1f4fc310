#include "tokenizer/chat_template.h"

#include <cctype>
#include <filesystem>

#include "core/file.h"

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
    {ChatFormat::kLlama2, "llama2"},
    {ChatFormat::kMistral, "mistral"},
    {ChatFormat::kMistralV1, "mistral-v1"},
    {ChatFormat::kMistralV3, "mistral-v3"},
    {ChatFormat::kMistralV3Tekken, "mistral-v3-tekken"},
    {ChatFormat::kMistralV7, "mistral-v7"},
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

// The [INST] families, told apart as llama.cpp's detector does.
ChatFormat DetectInstFamily(std::string_view t) {
  if (Contains(t, "[SYSTEM_PROMPT]")) return ChatFormat::kMistralV7;
  if (Contains(t, "' [INST] ' + system_message") || Contains(t, "[AVAILABLE_TOOLS]")) {
    if (Contains(t, " [INST]")) return ChatFormat::kMistralV1;
    if (Contains(t, "\"[INST]\"")) return ChatFormat::kMistralV3Tekken;
    return ChatFormat::kMistralV3;
  }
  if (Contains(t, "<<SYS>>")) return ChatFormat::kLlama2;
  return ChatFormat::kMistral;
}

// Hugging Face's Llama-2-chat template: a leading system message becomes a
// <<SYS>> block inside the first user turn; every user turn but the first
// starts with "<s>" (the first one's BOS comes from the tokenizer).
std::string RenderLlama2(const std::vector<ChatMessage>& messages) {
  std::string out, system;
  bool first_user = true;
  for (const auto& m : messages) {
    if (m.role == "system") {
      system += m.content;
    } else if (m.role == "user") {
      std::string content = m.content;
      if (!system.empty()) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
      system.clear();
      out += (first_user ? "" : "<s>") + std::string("[INST] ") + Trim(content) + " [/INST]";
      first_user = false;
    } else {
      out += " " + Trim(m.content) + " </s>";
    }
  }
  return out;
}

// Mistral's [INST] formats (llama.cpp's llama2 without <<SYS>>, mistral-v1,
// -v3, -v3-tekken): a turn opens with `open`, the user text ends with `close`,
// the answer follows `answer`; a system text opens the next user turn followed
// by `system_sep`.
struct InstFormat {
  const char* open;
  const char* close;
  const char* answer;
  const char* system_sep;
  bool trim_answer;
};
constexpr InstFormat kMistralV0 = {"[INST] ", " [/INST]", "", "\n", false};
constexpr InstFormat kMistralV1 = {" [INST] ", " [/INST]", " ", "\n\n", false};
constexpr InstFormat kMistralV3 = {"[INST] ", "[/INST]", " ", "\n\n", true};
constexpr InstFormat kMistralV3Tekken = {"[INST]", "[/INST]", "", "\n\n", false};

std::string RenderInst(const std::vector<ChatMessage>& messages, const InstFormat& f) {
  std::string out;
  bool inside_turn = false;
  for (const auto& m : messages) {
    if (!inside_turn) {
      out += f.open;
      inside_turn = true;
    }
    if (m.role == "system") {
      out += m.content + f.system_sep;
    } else if (m.role == "user") {
      out += m.content + f.close;
    } else {
      out += f.answer + (f.trim_answer ? Trim(m.content) : m.content) + "</s>";
      inside_turn = false;
    }
  }
  return out;
}

std::string RenderMistralV7(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const auto& m : messages) {
    if (m.role == "system") {
      out += "[SYSTEM_PROMPT] " + m.content + "[/SYSTEM_PROMPT]";
    } else if (m.role == "user") {
      out += "[INST] " + m.content + "[/INST]";
    } else {
      out += " " + m.content + "</s>";
    }
  }
  return out;
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
  if (Contains(t, "<|im_start|>")) {
    if (Contains(t, "<|im_sep|>")) return std::nullopt;  // phi-4: not ChatML
    return ChatFormat::kChatML;
  }
  if (Contains(t, "[INST]")) return DetectInstFamily(t);
  if (Contains(t, "<|start_header_id|>") && Contains(t, "<|end_header_id|>"))
    return ChatFormat::kLlama3;
  if (Contains(t, "<|assistant|>") && Contains(t, "<|end|>")) return ChatFormat::kPhi3;
  if (Contains(t, "<start_of_turn>")) return ChatFormat::kGemma;
  return std::nullopt;
}

Result<ChatFormat> ResolveChatFormat(std::string_view jinja, std::string_view override_name) {
  if (!override_name.empty()) {
    if (auto f = ChatFormatFromName(override_name)) return *f;
    const std::string path(override_name);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      return MakeError("--chat-template: unknown template '" + path +
                       "' (supported: " + SupportedChatFormatNames() + ", or a template file)");
    }
    HQEKV_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
    if (auto f = DetectChatFormat(text)) return *f;
    return MakeError("--chat-template " + path + ": not a recognised template family (supported: " +
                     SupportedChatFormatNames() + ")");
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
    case ChatFormat::kLlama2:
      out = RenderLlama2(messages);
      break;
    case ChatFormat::kMistral:
      out = RenderInst(messages, kMistralV0);
      break;
    case ChatFormat::kMistralV1:
      out = RenderInst(messages, kMistralV1);
      break;
    case ChatFormat::kMistralV3:
      out = RenderInst(messages, kMistralV3);
      break;
    case ChatFormat::kMistralV3Tekken:
      out = RenderInst(messages, kMistralV3Tekken);
      break;
    case ChatFormat::kMistralV7:
      out = RenderMistralV7(messages);
      break;
  }
  return out;
}

const char* ChatEndOfTurnText(ChatFormat f) {
  switch (f) {
    case ChatFormat::kChatML:
      return "<|im_end|>";
    case ChatFormat::kLlama3:
      return "<|eot_id|>";
    case ChatFormat::kPhi3:
      return "<|end|>";
    case ChatFormat::kGemma:
      return "<end_of_turn>";
    default:
      return "</s>";  // llama2 and the mistral formats
  }
}

}  // namespace hqekv
