// Syntax tree of a parsed chat template (tokenizer/jinja.h). Positions are
// 1-based line and column of the construct in the template source.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace hqekv::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using KeywordArgs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  // Children by kind (args):
  //   kLiteral  -                    kName     -        (name)
  //   kList     elements             kDict     k0, v0, k1, v1, ...
  //   kAttr     object               (name = attribute)
  //   kIndex    object, index        kSlice    object, start, stop, step (each may be null)
  //   kCall     callee, positional...            (kwargs)
  //   kFilter   input, positional... (name = filter; kwargs)
  //   kTest     input, positional... (name = test; negated for `is not`)
  //   kUnary    operand              (name = "not", "-", "+")
  //   kBinary   left, right          (name = operator: "or", "and", "==", "in", "not in", "~", ...)
  //   kTernary  value, condition, otherwise (otherwise may be null)
  enum class Kind {
    kLiteral,
    kName,
    kList,
    kDict,
    kAttr,
    kIndex,
    kSlice,
    kCall,
    kFilter,
    kTest,
    kUnary,
    kBinary,
    kTernary
  };
  Kind kind;
  int line = 0, col = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  KeywordArgs kwargs;
  bool negated = false;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  // kText      text
  // kOutput    expr
  // kIf        expr (condition), body, else_body (an elif is an kIf alone in else_body)
  // kFor       targets (one name, or names to unpack), expr (iterable), cond (filter, may be
  //            null), body, else_body
  // kSet       targets[0] (name) or targets[0].attr when attr is not empty; expr; a block
  //            set (`{% set x %}...{% endset %}`) has no expr and a body
  // kMacro     name, params (name, default or null), body
  // kCallBlock expr (the call), params (caller's parameters), body (caller's body)
  // kFilterBlock  expr (a kFilter whose input is null), body
  // kBreak, kContinue
  enum class Kind {
    kText,
    kOutput,
    kIf,
    kFor,
    kSet,
    kMacro,
    kCallBlock,
    kFilterBlock,
    kBreak,
    kContinue
  };
  Kind kind;
  int line = 0, col = 0;
  std::string text;
  std::string name;
  std::string attr;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::string> targets;
  KeywordArgs params;
  Body body;
  Body else_body;
};

// The template source as a tree, or the first syntax error with its position.
Result<Body> ParseJinja(std::string_view source);

}  // namespace hqekv::jinja
