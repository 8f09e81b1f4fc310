// `hqekv chat-template`: prints a conversation as a chat format renders it,
// the text `chat` and `run --chat` feed the tokenizer. The conversation is a
// JSON array of messages ({"role", "content"}, and "tool_calls" and the like
// for templates that read them) or an object {"messages": [...], "tools":
// [...], other template variables}. A template file runs through the Jinja
// engine with --bos-token / --eos-token; a leading BOS text is dropped, as
// the tokenizer adds BOS (tests/tokenizer/chat_template_ref.sh compares the
// output with @huggingface/jinja's).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/registry.h"
#include "core/file.h"
#include "tokenizer/chat_template.h"

namespace hqekv::cli::cmd_chat_template {
namespace {

struct ChatTemplateArgs {
  std::string format, messages_file;
  std::string bos_token = "<s>", eos_token = "</s>";
  bool no_generation_prompt = false;
};

Result<ChatInput> ReadConversation(const std::string& path) {
  HQEKV_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  const auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  ChatInput in;
  if (j.is_array()) {
    in.messages = j;
  } else if (j.is_object() && j.contains("messages") && j["messages"].is_array()) {
    for (const auto& [k, v] : j.items()) {
      if (k == "messages")
        in.messages = v;
      else if (k == "tools")
        in.tools = v;
      else
        in.extra[k] = v;
    }
  } else {
    return MakeError(path + ": not a JSON array of messages nor an object with \"messages\"");
  }
  for (const auto& m : in.messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return MakeError(path + ": every message needs a string \"role\"");
  }
  return in;
}

int Render(const ChatTemplateArgs& a) {
  ChatTokens tokens;
  tokens.bos = a.bos_token;
  tokens.eos = a.eos_token;
  auto format = ResolveChatFormat("", a.format, tokens);
  auto in = format.ok() ? ReadConversation(a.messages_file) : Result<ChatInput>(format.error());
  if (!in.ok()) {
    std::fprintf(stderr, "hqekv chat-template: error: %s\n", in.message().c_str());
    return 1;
  }
  if (!format->fallback_note().empty())
    std::fprintf(stderr, "hqekv chat-template: %s\n", format->fallback_note().c_str());
  in->add_generation_prompt = !a.no_generation_prompt;
  auto text = RenderChat(*format, *in);
  if (!text.ok()) {
    std::fprintf(stderr, "hqekv chat-template: error: %s\n", text.message().c_str());
    return 1;
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}

const CommandRegistrar kRegister(12, [](CLI::App& app, int* rc) {
  auto a = std::make_shared<ChatTemplateArgs>();
  CLI::App* cmd =
      app.add_subcommand("chat-template", "Print a conversation rendered by a chat format");
  cmd->add_option("--chat-template", a->format,
                  "Format name (" + SupportedChatFormatNames() + ") or a Jinja template file")
      ->required();
  cmd->add_option(
         "--messages", a->messages_file,
         "JSON file: [{\"role\":..., \"content\":...}] or {\"messages\": [...], \"tools\": [...]}")
      ->required();
  cmd->add_option("--bos-token", a->bos_token, "bos_token text a template sees")
      ->capture_default_str();
  cmd->add_option("--eos-token", a->eos_token, "eos_token text a template sees")
      ->capture_default_str();
  cmd->add_flag("--no-generation-prompt", a->no_generation_prompt,
                "Leave out the opening of the assistant's turn");
  cmd->callback([a, rc] { *rc = Render(*a); });
});

}  // namespace
}  // namespace hqekv::cli::cmd_chat_template
