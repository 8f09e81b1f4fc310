// Tokens of a chat template (tokenizer/jinja.h). The lexer applies the
// whitespace rules Hugging Face renders chat templates with: `{%-` / `{{-` /
// `{#-` strip all whitespace before the tag, `-%}` / `-}}` / `-#}` all
// whitespace after it; trim_blocks drops the first newline after a block tag
// or comment; lstrip_blocks drops the spaces and tabs between the start of a
// line and a block tag or comment that begins it (`{%+` keeps them).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hqekv::jinja {

struct Token {
  enum class Kind {
    kText,         // raw text between tags
    kOutputOpen,   // {{
    kOutputClose,  // }}
    kBlockOpen,    // {%
    kBlockClose,   // %}
    kName,
    kString,  // text holds the unescaped string
    kInt,
    kFloat,
    kOp,  // text holds the operator: + - * / // % ** ~ == != < > <= >= = ( ) [ ] { } , . : |
    kEnd,
  };
  Kind kind;
  std::string text;
  int line = 0, col = 0;
};

Result<std::vector<Token>> LexJinja(std::string_view source);

}  // namespace hqekv::jinja
