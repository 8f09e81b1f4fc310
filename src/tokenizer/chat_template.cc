#include "tokenizer/chat_template.h"

#include <cctype>
#include <filesystem>

#include "core/file.h"
#include "tokenizer/jinja.h"
#include "tokenizer/tokenizer.h"

namespace hqekv {
namespace {

struct FormatRow {
  ChatFamily format;
  const char* name;
};
constexpr FormatRow kFormats[] = {
    {ChatFamily::kChatML, "chatml"},
    {ChatFamily::kLlama3, "llama3"},
    {ChatFamily::kPhi3, "phi3"},
    {ChatFamily::kGemma, "gemma"},
    {ChatFamily::kLlama2, "llama2"},
    {ChatFamily::kMistral, "mistral"},
    {ChatFamily::kMistralV1, "mistral-v1"},
    {ChatFamily::kMistralV3, "mistral-v3"},
    {ChatFamily::kMistralV3Tekken, "mistral-v3-tekken"},
    {ChatFamily::kMistralV7, "mistral-v7"},
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
ChatFamily DetectInstFamily(std::string_view t) {
  if (Contains(t, "[SYSTEM_PROMPT]")) return ChatFamily::kMistralV7;
  if (Contains(t, "' [INST] ' + system_message") || Contains(t, "[AVAILABLE_TOOLS]")) {
    if (Contains(t, " [INST]")) return ChatFamily::kMistralV1;
    if (Contains(t, "\"[INST]\"")) return ChatFamily::kMistralV3Tekken;
    return ChatFamily::kMistralV3;
  }
  if (Contains(t, "<<SYS>>")) return ChatFamily::kLlama2;
  return ChatFamily::kMistral;
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

std::string RenderFamily(ChatFamily f, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt) {
  std::string out;
  switch (f) {
    case ChatFamily::kChatML:
      for (const auto& m : messages)
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      break;
    case ChatFamily::kLlama3:
      for (const auto& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + Trim(m.content) +
               "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatFamily::kPhi3:
      for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
      if (add_generation_prompt) out += "<|assistant|>\n";
      break;
    case ChatFamily::kGemma: {
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
    case ChatFamily::kLlama2:
      out = RenderLlama2(messages);
      break;
    case ChatFamily::kMistral:
      out = RenderInst(messages, kMistralV0);
      break;
    case ChatFamily::kMistralV1:
      out = RenderInst(messages, kMistralV1);
      break;
    case ChatFamily::kMistralV3:
      out = RenderInst(messages, kMistralV3);
      break;
    case ChatFamily::kMistralV3Tekken:
      out = RenderInst(messages, kMistralV3Tekken);
      break;
    case ChatFamily::kMistralV7:
      out = RenderMistralV7(messages);
      break;
  }
  return out;
}

const char* FamilyEndOfTurnText(ChatFamily f) {
  switch (f) {
    case ChatFamily::kChatML:
      return "<|im_end|>";
    case ChatFamily::kLlama3:
      return "<|eot_id|>";
    case ChatFamily::kPhi3:
      return "<|end|>";
    case ChatFamily::kGemma:
      return "<end_of_turn>";
    default:
      return "</s>";  // llama2 and the mistral formats
  }
}

// The usual BOS / EOS texts of a family, for callers that do not pass the
// model's (the two-argument ResolveChatFormat).
ChatTokens FamilyTokens(std::optional<ChatFamily> f) {
  ChatTokens t;
  if (!f) return t;
  switch (*f) {
    case ChatFamily::kChatML:
      t.eos = "<|im_end|>";
      break;
    case ChatFamily::kLlama3:
      t.bos = "<|begin_of_text|>";
      t.eos = "<|eot_id|>";
      break;
    case ChatFamily::kPhi3:
      t.bos = "<s>";
      t.eos = "<|endoftext|>";
      break;
    case ChatFamily::kGemma:
      t.bos = "<bos>";
      t.eos = "<eos>";
      break;
    default:
      t.bos = "<s>";
      t.eos = "</s>";
  }
  return t;
}

// A message's content as the fixed renderers read it.
std::string ContentText(const nlohmann::ordered_json& c) {
  if (c.is_string()) return c.get<std::string>();
  if (c.is_null()) return "";
  if (c.is_array()) {
    std::string out;
    for (const auto& part : c)
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
          part["text"].is_string())
        out += part["text"].get<std::string>();
    return out;
  }
  return c.dump();
}

std::string RenderFamilyJson(ChatFamily f, const ChatInput& in) {
  std::vector<ChatMessage> msgs;
  for (const auto& m : in.messages) {
    if (!m.is_object()) continue;
    msgs.push_back({m.value("role", ""), m.contains("content") ? ContentText(m["content"]) : ""});
  }
  return RenderFamily(f, msgs, in.add_generation_prompt);
}

bool StartsWith(std::string_view s, std::string_view p) {
  return !p.empty() && s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}
bool EndsWith(std::string_view s, std::string_view p) {
  return !p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

}  // namespace

const ChatFormat ChatFormat::kChatML{ChatFamily::kChatML};
const ChatFormat ChatFormat::kLlama3{ChatFamily::kLlama3};
const ChatFormat ChatFormat::kPhi3{ChatFamily::kPhi3};
const ChatFormat ChatFormat::kGemma{ChatFamily::kGemma};
const ChatFormat ChatFormat::kLlama2{ChatFamily::kLlama2};
const ChatFormat ChatFormat::kMistral{ChatFamily::kMistral};
const ChatFormat ChatFormat::kMistralV1{ChatFamily::kMistralV1};
const ChatFormat ChatFormat::kMistralV3{ChatFamily::kMistralV3};
const ChatFormat ChatFormat::kMistralV3Tekken{ChatFamily::kMistralV3Tekken};
const ChatFormat ChatFormat::kMistralV7{ChatFamily::kMistralV7};

ChatFormat::ChatFormat(std::shared_ptr<const jinja::Template> tmpl,
                       std::optional<ChatFamily> family, ChatTokens tokens,
                       std::string fallback_note)
    : family_(family),
      template_(std::move(tmpl)),
      tokens_(std::move(tokens)),
      fallback_note_(std::move(fallback_note)) {}

ChatTokens ChatTokensOf(const Tokenizer& tok) {
  ChatTokens t;
  if (tok.bos() >= 0) t.bos = tok.Piece(tok.bos());
  if (tok.eos() >= 0) t.eos = tok.Piece(tok.eos());
  t.add_bos = tok.add_bos();
  t.add_eos = false;  // hqekv's tokenizers never append EOS
  return t;
}

const char* ChatFamilyName(ChatFamily f) {
  for (const auto& r : kFormats)
    if (r.format == f) return r.name;
  return "?";
}

const char* ChatFormatName(const ChatFormat& f) {
  if (f.runs_template()) return "jinja";
  return f.family() ? ChatFamilyName(*f.family()) : "?";
}

std::optional<ChatFormat> ChatFormatFromName(std::string_view name) {
  for (const auto& r : kFormats)
    if (name == r.name) return ChatFormat(r.format);
  return std::nullopt;
}

std::string SupportedChatFormatNames() {
  std::string out;
  for (const auto& r : kFormats) out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

std::optional<ChatFamily> DetectChatFamily(std::string_view t) {
  if (Contains(t, "<|im_start|>")) {
    if (Contains(t, "<|im_sep|>")) return std::nullopt;  // phi-4: not ChatML
    return ChatFamily::kChatML;
  }
  if (Contains(t, "[INST]")) return DetectInstFamily(t);
  if (Contains(t, "<|start_header_id|>") && Contains(t, "<|end_header_id|>"))
    return ChatFamily::kLlama3;
  if (Contains(t, "<|assistant|>") && Contains(t, "<|end|>")) return ChatFamily::kPhi3;
  if (Contains(t, "<start_of_turn>")) return ChatFamily::kGemma;
  return std::nullopt;
}

std::optional<ChatFormat> DetectChatFormat(std::string_view t) {
  if (auto f = DetectChatFamily(t)) return ChatFormat(*f);
  return std::nullopt;
}

namespace {

// A template's format, or the fixed renderer of its family when it does not
// parse. `origin` names the template in errors.
Result<ChatFormat> FormatOfTemplate(std::string_view source, const std::string& origin,
                                    const ChatTokens* tokens) {
  const std::optional<ChatFamily> family = DetectChatFamily(source);
  auto parsed = jinja::Template::Parse(source);
  if (parsed.ok()) {
    auto tmpl = std::make_shared<const jinja::Template>(std::move(*parsed));
    return ChatFormat(std::move(tmpl), family, tokens ? *tokens : FamilyTokens(family));
  }
  if (family) {
    ChatFormat f(*family);
    f.set_fallback_note(origin + " does not parse (" + parsed.message() + "); using the fixed " +
                        ChatFamilyName(*family) + " format");
    return f;
  }
  return MakeError(origin + " does not parse (" + parsed.message() +
                   ") and is not a recognised family (supported: " + SupportedChatFormatNames() +
                   "); name one with --chat-template");
}

Result<ChatFormat> Resolve(std::string_view jinja, std::string_view override_name,
                           const ChatTokens* tokens) {
  if (!override_name.empty()) {
    if (auto f = ChatFormatFromName(override_name)) return *f;
    const std::string path(override_name);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      return MakeError("--chat-template: unknown template '" + path +
                       "' (supported: " + SupportedChatFormatNames() + ", or a template file)");
    }
    HQEKV_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
    return FormatOfTemplate(text, "--chat-template " + path, tokens);
  }
  if (jinja.empty()) {
    return MakeError(
        "the model file has no tokenizer.chat_template; name a format with --chat-template (" +
        SupportedChatFormatNames() + ")");
  }
  return FormatOfTemplate(jinja, "tokenizer.chat_template", tokens);
}

}  // namespace

Result<ChatFormat> ResolveChatFormat(std::string_view jinja, std::string_view override_name,
                                     const ChatTokens& tokens) {
  return Resolve(jinja, override_name, &tokens);
}

Result<ChatFormat> ResolveChatFormat(std::string_view jinja, std::string_view override_name) {
  return Resolve(jinja, override_name, nullptr);
}

nlohmann::ordered_json ChatMessagesJson(const std::vector<ChatMessage>& messages) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& m : messages) out.push_back({{"role", m.role}, {"content", m.content}});
  return out;
}

Result<std::string> RenderChat(const ChatFormat& f, const ChatInput& in) {
  if (!f.runs_template()) return RenderFamilyJson(f.family().value_or(ChatFamily::kChatML), in);
  if (!in.messages.is_array()) return MakeError("chat messages must be a JSON array");
  const ChatTokens& t = f.tokens();
  nlohmann::ordered_json context = {{"messages", in.messages},
                                    {"add_generation_prompt", in.add_generation_prompt},
                                    {"bos_token", t.bos},
                                    {"eos_token", t.eos}};
  if (!in.tools.is_null()) context["tools"] = in.tools;
  if (in.extra.is_object())
    for (const auto& [k, v] : in.extra.items()) context[k] = v;
  auto text = f.jinja_template()->Render(context);
  if (!text.ok()) return MakeError("chat template: " + text.message());
  std::string out = std::move(*text);
  if (t.add_bos && StartsWith(out, t.bos)) out.erase(0, t.bos.size());
  if (t.add_eos && EndsWith(out, t.eos)) out.erase(out.size() - t.eos.size());
  return out;
}

Result<std::string> TryRenderChat(const ChatFormat& f, const std::vector<ChatMessage>& messages,
                                  bool add_generation_prompt) {
  if (!f.runs_template())
    return RenderFamily(f.family().value_or(ChatFamily::kChatML), messages, add_generation_prompt);
  ChatInput in;
  in.messages = ChatMessagesJson(messages);
  in.add_generation_prompt = add_generation_prompt;
  return RenderChat(f, in);
}

std::string RenderChat(const ChatFormat& f, const std::vector<ChatMessage>& messages,
                       bool add_generation_prompt) {
  auto text = TryRenderChat(f, messages, add_generation_prompt);
  if (text.ok()) return std::move(*text);
  return RenderFamily(f.family().value_or(ChatFamily::kChatML), messages, add_generation_prompt);
}

const char* ChatEndOfTurnText(const ChatFormat& f) {
  if (f.family()) return FamilyEndOfTurnText(*f.family());
  return f.tokens().eos.c_str();
}

}  // namespace hqekv
