// A Jinja interpreter for chat templates (tokenizer.chat_template in GGUF,
// chat_template in tokenizer_config.json). It covers the subset real chat
// templates use: output, `set` (names, tuples, namespace attributes, blocks),
// if/elif/else, for (loop.*, `for x in y if c`, else, break/continue),
// macros and `call`, filters, tests, string/dict/list methods,
// raise_exception, namespace(), range(), strftime_now(). Whitespace follows
// Hugging Face's settings (trim_blocks and lstrip_blocks on, see
// jinja_lex.h); value printing follows @huggingface/jinja (jinja_value.h),
// which tests/tokenizer checks it against byte for byte.
//
// Errors (syntax, unknown filter, raise_exception, type errors) are values
// whose message starts "template line L, column C:".
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hqekv::jinja {

struct Node;

class Template {
 public:
  static Result<Template> Parse(std::string_view source);

  // Renders with `context` (a JSON object: messages, tools, bos_token, ...)
  // as the template's variables, next to the global functions.
  Result<std::string> Render(const nlohmann::ordered_json& context) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Node>>> body_;
};

}  // namespace hqekv::jinja
