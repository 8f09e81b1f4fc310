// `hqekv chat-template`: prints a conversation (a JSON array of
// {"role", "content"} objects) as a chat format renders it, the text `chat`
// and `run --chat` feed the tokenizer. For checking the renderings against a
// Jinja engine (tests/tokenizer/chat_template_ref.sh).
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
  bool no_generation_prompt = false;
};

Result<std::vector<ChatMessage>> ReadMessages(const std::string& path) {
  HQEKV_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return MakeError(path + ": not a JSON array of messages");
  std::vector<ChatMessage> out;
  for (const auto& m : j) {
    if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m["role"].is_string() ||
        !m["content"].is_string()) {
      return MakeError(path + ": every message needs string \"role\" and \"content\"");
    }
    out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return out;
}

int Render(const ChatTemplateArgs& a) {
  auto format = ResolveChatFormat("", a.format);
  auto messages = format.ok() ? ReadMessages(a.messages_file)
                              : Result<std::vector<ChatMessage>>(format.error());
  if (!messages.ok()) {
    std::fprintf(stderr, "hqekv chat-template: error: %s\n", messages.message().c_str());
    return 1;
  }
  const std::string text = RenderChat(*format, *messages, !a.no_generation_prompt);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

const CommandRegistrar kRegister(12, [](CLI::App& app, int* rc) {
  auto a = std::make_shared<ChatTemplateArgs>();
  CLI::App* cmd =
      app.add_subcommand("chat-template", "Print a conversation rendered by a chat format");
  cmd->add_option("--chat-template", a->format,
                  "Format name (" + SupportedChatFormatNames() + ") or a Jinja template file")
      ->required();
  cmd->add_option("--messages", a->messages_file, "JSON file: [{\"role\":..., \"content\":...}]")
      ->required();
  cmd->add_flag("--no-generation-prompt", a->no_generation_prompt,
                "Leave out the opening of the assistant's turn");
  cmd->callback([a, rc] { *rc = Render(*a); });
});

}  // namespace
}  // namespace hqekv::cli::cmd_chat_template
