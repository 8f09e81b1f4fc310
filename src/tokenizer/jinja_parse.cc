// Recursive-descent parser of chat templates. Operator precedence, loosest
// first, as in Jinja: `a if c else b`; or; and; not; comparisons and
// `in` / `not in`; + -; ~; * / // %; **; unary - +; then postfix
// (.attr, [index], [a:b:c], call) with filters `|f` and tests `is t` binding
// tightest (`x|length - 1` is `(x|length) - 1`).
#include <cstdlib>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_lex.h"

namespace hqekv::jinja {
namespace {

using TK = Token::Kind;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Result<Body> Run() {
    Body body;
    std::string stop;
    HQEKV_RETURN_IF_ERROR(ParseBody(&body, {}, &stop));
    return body;
  }

 private:
  const Token& Peek(size_t ahead = 0) const { return t_[std::min(p_ + ahead, t_.size() - 1)]; }
  const Token& Next() { return t_[std::min(p_++, t_.size() - 1)]; }
  bool IsOp(const char* op, size_t ahead = 0) const {
    return Peek(ahead).kind == TK::kOp && Peek(ahead).text == op;
  }
  bool IsName(const char* n, size_t ahead = 0) const {
    return Peek(ahead).kind == TK::kName && Peek(ahead).text == n;
  }
  Error Fail(const Token& at, const std::string& what) const {
    return MakeError("template line " + std::to_string(at.line) + ", column " +
                     std::to_string(at.col) + ": " + what);
  }
  static std::string Describe(const Token& t) {
    switch (t.kind) {
      case TK::kEnd:
        return "end of template";
      case TK::kBlockClose:
        return "'%}'";
      case TK::kOutputClose:
        return "'}}'";
      case TK::kString:
        return "a string";
      default:
        return "'" + t.text + "'";
    }
  }
  Status Expect(const char* op) {
    if (!IsOp(op))
      return Fail(Peek(), std::string("expected '") + op + "', got " + Describe(Peek()));
    ++p_;
    return Status::Ok();
  }
  Status ExpectBlockClose() {
    if (Peek().kind != TK::kBlockClose)
      return Fail(Peek(), "expected '%}', got " + Describe(Peek()));
    ++p_;
    return Status::Ok();
  }
  Result<std::string> ExpectName() {
    if (Peek().kind != TK::kName) return Fail(Peek(), "expected a name, got " + Describe(Peek()));
    return Next().text;
  }

  // Statements until one of `stops` opens a block; *stop gets its keyword
  // (the `{%` and keyword are consumed, the rest of the tag is not).
  Status ParseBody(Body* out, std::initializer_list<const char*> stops, std::string* stop) {
    while (true) {
      const Token& t = Peek();
      if (t.kind == TK::kEnd) {
        if (stops.size() == 0) return Status::Ok();
        return Fail(t, std::string("missing '{% ") + *stops.begin() + " %}'");
      }
      if (t.kind == TK::kText) {
        auto n = NewNode(Node::Kind::kText, t);
        n->text = t.text;
        out->push_back(std::move(n));
        ++p_;
        continue;
      }
      if (t.kind == TK::kOutputOpen) {
        ++p_;
        auto n = NewNode(Node::Kind::kOutput, t);
        HQEKV_ASSIGN_OR_RETURN(n->expr, ParseExpr());
        if (Peek().kind != TK::kOutputClose)
          return Fail(Peek(), "expected '}}', got " + Describe(Peek()));
        ++p_;
        out->push_back(std::move(n));
        continue;
      }
      if (t.kind != TK::kBlockOpen) return Fail(t, "unexpected " + Describe(t));
      const Token& kw = Peek(1);
      if (kw.kind != TK::kName) return Fail(kw, "expected a statement, got " + Describe(kw));
      for (const char* s : stops) {
        if (kw.text == s) {
          p_ += 2;
          *stop = kw.text;
          return Status::Ok();
        }
      }
      p_ += 2;
      HQEKV_ASSIGN_OR_RETURN(NodePtr n, ParseStatement(kw));
      out->push_back(std::move(n));
    }
  }

  static NodePtr NewNode(Node::Kind k, const Token& at) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->line = at.line;
    n->col = at.col;
    return n;
  }

  Result<NodePtr> ParseStatement(const Token& kw) {
    const std::string& k = kw.text;
    if (k == "if") return ParseIf(kw);
    if (k == "for") return ParseFor(kw);
    if (k == "set") return ParseSet(kw);
    if (k == "macro") return ParseMacro(kw);
    if (k == "call") return ParseCallBlock(kw);
    if (k == "filter") return ParseFilterBlock(kw);
    if (k == "generation") {  // transformers' marker of assistant text: renders its body
      HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
      auto n = NewNode(Node::Kind::kIf, kw);
      n->expr = Literal(Value::Bool(true), kw);
      std::string stop;
      HQEKV_RETURN_IF_ERROR(ParseBody(&n->body, {"endgeneration"}, &stop));
      HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
      return n;
    }
    if (k == "break" || k == "continue") {
      HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
      return NewNode(k == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, kw);
    }
    return Fail(kw, "unknown statement '" + k + "'");
  }

  Result<NodePtr> ParseIf(const Token& kw) {
    auto n = NewNode(Node::Kind::kIf, kw);
    HQEKV_ASSIGN_OR_RETURN(n->expr, ParseExpr());
    HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
    std::string stop;
    HQEKV_RETURN_IF_ERROR(ParseBody(&n->body, {"endif", "elif", "else"}, &stop));
    if (stop == "elif") {
      HQEKV_ASSIGN_OR_RETURN(NodePtr elif, ParseIf(t_[p_ - 1]));
      n->else_body.push_back(std::move(elif));
      return n;  // the nested if consumed endif
    }
    if (stop == "else") {
      HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
      HQEKV_RETURN_IF_ERROR(ParseBody(&n->else_body, {"endif"}, &stop));
    }
    HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
    return n;
  }

  Result<NodePtr> ParseFor(const Token& kw) {
    auto n = NewNode(Node::Kind::kFor, kw);
    do {
      HQEKV_ASSIGN_OR_RETURN(std::string name, ExpectName());
      n->targets.push_back(name);
    } while (IsOp(",") && (++p_, true));
    if (!IsName("in")) return Fail(Peek(), "expected 'in' in for, got " + Describe(Peek()));
    ++p_;
    // The iterable stops before a loop filter's `if` (no ternary here).
    HQEKV_ASSIGN_OR_RETURN(n->expr, ParseOr());
    if (IsName("if")) {
      ++p_;
      HQEKV_ASSIGN_OR_RETURN(n->cond, ParseExpr());
    }
    HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
    std::string stop;
    HQEKV_RETURN_IF_ERROR(ParseBody(&n->body, {"endfor", "else"}, &stop));
    if (stop == "else") {
      HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
      HQEKV_RETURN_IF_ERROR(ParseBody(&n->else_body, {"endfor"}, &stop));
    }
    HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
    return n;
  }

  Result<NodePtr> ParseSet(const Token& kw) {
    auto n = NewNode(Node::Kind::kSet, kw);
    HQEKV_ASSIGN_OR_RETURN(std::string name, ExpectName());
    n->targets.push_back(name);
    if (IsOp(".")) {
      ++p_;
      HQEKV_ASSIGN_OR_RETURN(n->attr, ExpectName());
    } else {
      while (IsOp(",")) {
        ++p_;
        HQEKV_ASSIGN_OR_RETURN(std::string more, ExpectName());
        n->targets.push_back(more);
      }
    }
    if (Peek().kind == TK::kBlockClose) {  // block set: the body's text is the value
      ++p_;
      std::string stop;
      HQEKV_RETURN_IF_ERROR(ParseBody(&n->body, {"endset"}, &stop));
      HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
      return n;
    }
    HQEKV_RETURN_IF_ERROR(Expect("="));
    HQEKV_ASSIGN_OR_RETURN(n->expr, ParseTupleOrExpr());
    HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
    return n;
  }

  // `(a, b=default, ...)`
  Status ParseParams(KeywordArgs* out) {
    HQEKV_RETURN_IF_ERROR(Expect("("));
    while (!IsOp(")")) {
      HQEKV_ASSIGN_OR_RETURN(std::string name, ExpectName());
      ExprPtr def;
      if (IsOp("=")) {
        ++p_;
        HQEKV_ASSIGN_OR_RETURN(def, ParseExpr());
      }
      out->emplace_back(name, std::move(def));
      if (!IsOp(",")) break;
      ++p_;
    }
    return Expect(")");
  }

  Result<NodePtr> ParseMacro(const Token& kw) {
    auto n = NewNode(Node::Kind::kMacro, kw);
    HQEKV_ASSIGN_OR_RETURN(n->name, ExpectName());
    HQEKV_RETURN_IF_ERROR(ParseParams(&n->params));
    HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
    std::string stop;
    HQEKV_RETURN_IF_ERROR(ParseBody(&n->body, {"endmacro"}, &stop));
    HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
    return n;
  }

  Result<NodePtr> ParseCallBlock(const Token& kw) {
    auto n = NewNode(Node::Kind::kCallBlock, kw);
    if (IsOp("(")) HQEKV_RETURN_IF_ERROR(ParseParams(&n->params));
    HQEKV_ASSIGN_OR_RETURN(n->expr, ParseExpr());
    if (n->expr->kind != Expr::Kind::kCall) return Fail(kw, "'{% call %}' needs a macro call");
    HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
    std::string stop;
    HQEKV_RETURN_IF_ERROR(ParseBody(&n->body, {"endcall"}, &stop));
    HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
    return n;
  }

  Result<NodePtr> ParseFilterBlock(const Token& kw) {
    auto n = NewNode(Node::Kind::kFilterBlock, kw);
    ExprPtr input;  // null: the body's text
    HQEKV_ASSIGN_OR_RETURN(n->expr, ParseFilterCall(std::move(input), kw));
    while (IsOp("|")) {
      const Token& bar = Next();
      HQEKV_ASSIGN_OR_RETURN(n->expr, ParseFilterCall(std::move(n->expr), bar));
    }
    HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
    std::string stop;
    HQEKV_RETURN_IF_ERROR(ParseBody(&n->body, {"endfilter"}, &stop));
    HQEKV_RETURN_IF_ERROR(ExpectBlockClose());
    return n;
  }

  // ---- expressions ----

  static ExprPtr NewExpr(Expr::Kind k, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = at.line;
    e->col = at.col;
    return e;
  }
  static ExprPtr Literal(Value v, const Token& at) {
    auto e = NewExpr(Expr::Kind::kLiteral, at);
    e->literal = std::move(v);
    return e;
  }
  static ExprPtr Binary(std::string op, ExprPtr a, ExprPtr b, const Token& at) {
    auto e = NewExpr(Expr::Kind::kBinary, at);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  // `a, b` (a tuple, as a list) where a set statement allows one.
  Result<ExprPtr> ParseTupleOrExpr() {
    const Token& at = Peek();
    HQEKV_ASSIGN_OR_RETURN(ExprPtr first, ParseExpr());
    if (!IsOp(",")) return first;
    auto list = NewExpr(Expr::Kind::kList, at);
    list->args.push_back(std::move(first));
    while (IsOp(",")) {
      ++p_;
      HQEKV_ASSIGN_OR_RETURN(ExprPtr more, ParseExpr());
      list->args.push_back(std::move(more));
    }
    return list;
  }

  Result<ExprPtr> ParseExpr() {
    HQEKV_ASSIGN_OR_RETURN(ExprPtr value, ParseOr());
    while (IsName("if")) {
      const Token& at = Next();
      HQEKV_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
      ExprPtr otherwise;
      if (IsName("else")) {
        ++p_;
        HQEKV_ASSIGN_OR_RETURN(otherwise, ParseOr());
      }
      auto e = NewExpr(Expr::Kind::kTernary, at);
      e->args.push_back(std::move(value));
      e->args.push_back(std::move(cond));
      e->args.push_back(std::move(otherwise));
      value = std::move(e);
    }
    return value;
  }

  Result<ExprPtr> ParseOr() {
    HQEKV_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (IsName("or")) {
      const Token& at = Next();
      HQEKV_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      left = Binary("or", std::move(left), std::move(right), at);
    }
    return left;
  }

  Result<ExprPtr> ParseAnd() {
    HQEKV_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (IsName("and")) {
      const Token& at = Next();
      HQEKV_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      left = Binary("and", std::move(left), std::move(right), at);
    }
    return left;
  }

  Result<ExprPtr> ParseNot() {
    if (IsName("not")) {
      const Token& at = Next();
      HQEKV_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      auto e = NewExpr(Expr::Kind::kUnary, at);
      e->name = "not";
      e->args.push_back(std::move(operand));
      return e;
    }
    return ParseCompare();
  }

  Result<ExprPtr> ParseCompare() {
    HQEKV_ASSIGN_OR_RETURN(ExprPtr left, ParseAdd());
    while (true) {
      std::string op;
      if (Peek().kind == TK::kOp &&
          (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp(">") || IsOp("<=") || IsOp(">="))) {
        op = Peek().text;
      } else if (IsName("in")) {
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        op = "not in";
        ++p_;
      } else {
        return left;
      }
      const Token& at = Next();
      HQEKV_ASSIGN_OR_RETURN(ExprPtr right, ParseAdd());
      left = Binary(op, std::move(left), std::move(right), at);
    }
  }

  Result<ExprPtr> ParseAdd() {
    HQEKV_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      const Token& at = Next();
      HQEKV_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      left = Binary(at.text, std::move(left), std::move(right), at);
    }
    return left;
  }

  Result<ExprPtr> ParseConcat() {
    HQEKV_ASSIGN_OR_RETURN(ExprPtr left, ParseMul());
    while (IsOp("~")) {
      const Token& at = Next();
      HQEKV_ASSIGN_OR_RETURN(ExprPtr right, ParseMul());
      left = Binary("~", std::move(left), std::move(right), at);
    }
    return left;
  }

  Result<ExprPtr> ParseMul() {
    HQEKV_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& at = Next();
      HQEKV_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      left = Binary(at.text, std::move(left), std::move(right), at);
    }
    return left;
  }

  Result<ExprPtr> ParsePow() {
    HQEKV_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary());
    while (IsOp("**")) {
      const Token& at = Next();
      HQEKV_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary());
      left = Binary("**", std::move(left), std::move(right), at);
    }
    return left;
  }

  Result<ExprPtr> ParseUnary() {
    if (IsOp("-") || IsOp("+")) {
      const Token& at = Next();
      HQEKV_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary());
      auto e = NewExpr(Expr::Kind::kUnary, at);
      e->name = at.text;
      e->args.push_back(std::move(operand));
      return e;
    }
    HQEKV_ASSIGN_OR_RETURN(ExprPtr e, ParsePrimary());
    return ParsePostfix(std::move(e));
  }

  // Call arguments after '(': positional, then name=value.
  Status ParseArgs(Expr* e) {
    while (!IsOp(")")) {
      if (Peek().kind == TK::kName && IsOp("=", 1)) {
        std::string name = Next().text;
        ++p_;
        HQEKV_ASSIGN_OR_RETURN(ExprPtr v, ParseExpr());
        e->kwargs.emplace_back(std::move(name), std::move(v));
      } else {
        HQEKV_ASSIGN_OR_RETURN(ExprPtr v, ParseExpr());
        e->args.push_back(std::move(v));
      }
      if (!IsOp(",")) break;
      ++p_;
    }
    return Expect(")");
  }

  Result<ExprPtr> ParseFilterCall(ExprPtr input, const Token& at) {
    auto f = NewExpr(Expr::Kind::kFilter, at);
    HQEKV_ASSIGN_OR_RETURN(f->name, ExpectName());
    f->args.push_back(std::move(input));
    if (IsOp("(")) {
      ++p_;
      HQEKV_RETURN_IF_ERROR(ParseArgs(f.get()));
    }
    return f;
  }

  Result<ExprPtr> ParsePostfix(ExprPtr e) {
    while (true) {
      if (IsOp(".")) {
        const Token& at = Next();
        auto a = NewExpr(Expr::Kind::kAttr, at);
        HQEKV_ASSIGN_OR_RETURN(a->name, ExpectName());
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (IsOp("[")) {
        const Token& at = Next();
        HQEKV_ASSIGN_OR_RETURN(e, ParseSubscript(std::move(e), at));
      } else if (IsOp("(")) {
        const Token& at = Next();
        auto c = NewExpr(Expr::Kind::kCall, at);
        c->args.push_back(std::move(e));
        HQEKV_RETURN_IF_ERROR(ParseArgs(c.get()));
        e = std::move(c);
      } else if (IsOp("|")) {
        const Token& at = Next();
        HQEKV_ASSIGN_OR_RETURN(e, ParseFilterCall(std::move(e), at));
      } else if (IsName("is")) {
        const Token& at = Next();
        auto t = NewExpr(Expr::Kind::kTest, at);
        if (IsName("not")) {
          ++p_;
          t->negated = true;
        }
        // `is none` / `is true`: keywords as test names.
        if (Peek().kind != TK::kName) return Fail(Peek(), "expected a test name after 'is'");
        t->name = Next().text;
        t->args.push_back(std::move(e));
        if (IsOp("(")) {
          ++p_;
          HQEKV_RETURN_IF_ERROR(ParseArgs(t.get()));
        } else if (Peek().kind == TK::kInt || Peek().kind == TK::kString ||
                   Peek().kind == TK::kFloat) {
          HQEKV_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());  // `is divisibleby 3`
          t->args.push_back(std::move(arg));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> ParseSubscript(ExprPtr obj, const Token& at) {
    ExprPtr parts[3];
    int n = 0;
    bool slice = false;
    while (true) {
      if (IsOp(":")) {
        slice = true;
        if (++n > 2) return Fail(Peek(), "too many ':' in a slice");
        ++p_;
        continue;
      }
      if (IsOp("]")) break;
      if (parts[n]) return Fail(Peek(), "expected ']' or ':', got " + Describe(Peek()));
      HQEKV_ASSIGN_OR_RETURN(parts[n], ParseExpr());
    }
    ++p_;
    if (!slice) {
      if (!parts[0]) return Fail(at, "empty subscript");
      auto e = NewExpr(Expr::Kind::kIndex, at);
      e->args.push_back(std::move(obj));
      e->args.push_back(std::move(parts[0]));
      return e;
    }
    auto e = NewExpr(Expr::Kind::kSlice, at);
    e->args.push_back(std::move(obj));
    for (auto& part : parts) e->args.push_back(std::move(part));
    return e;
  }

  Result<ExprPtr> ParsePrimary() {
    const Token& t = Next();
    switch (t.kind) {
      case TK::kString: {
        std::string s = t.text;
        while (Peek().kind == TK::kString) s += Next().text;  // 'a' 'b' is 'ab'
        return Literal(Value::Str(std::move(s)), t);
      }
      case TK::kInt:
        return Literal(Value::Int(std::strtoll(t.text.c_str(), nullptr, 10)), t);
      case TK::kFloat:
        return Literal(Value::Float(std::strtod(t.text.c_str(), nullptr)), t);
      case TK::kName: {
        if (t.text == "true" || t.text == "True") return Literal(Value::Bool(true), t);
        if (t.text == "false" || t.text == "False") return Literal(Value::Bool(false), t);
        if (t.text == "none" || t.text == "None") return Literal(Value::None(), t);
        auto e = NewExpr(Expr::Kind::kName, t);
        e->name = t.text;
        return e;
      }
      case TK::kOp:
        if (t.text == "(") {
          HQEKV_ASSIGN_OR_RETURN(ExprPtr inner, ParseExpr());
          if (IsOp(",")) {  // a tuple: a list here
            auto list = NewExpr(Expr::Kind::kList, t);
            list->args.push_back(std::move(inner));
            while (IsOp(",")) {
              ++p_;
              if (IsOp(")")) break;
              HQEKV_ASSIGN_OR_RETURN(ExprPtr more, ParseExpr());
              list->args.push_back(std::move(more));
            }
            inner = std::move(list);
          }
          HQEKV_RETURN_IF_ERROR(Expect(")"));
          return inner;
        }
        if (t.text == "[") {
          auto list = NewExpr(Expr::Kind::kList, t);
          while (!IsOp("]")) {
            HQEKV_ASSIGN_OR_RETURN(ExprPtr v, ParseExpr());
            list->args.push_back(std::move(v));
            if (!IsOp(",")) break;
            ++p_;
          }
          HQEKV_RETURN_IF_ERROR(Expect("]"));
          return list;
        }
        if (t.text == "{") {
          auto dict = NewExpr(Expr::Kind::kDict, t);
          while (!IsOp("}")) {
            HQEKV_ASSIGN_OR_RETURN(ExprPtr k, ParseExpr());
            HQEKV_RETURN_IF_ERROR(Expect(":"));
            HQEKV_ASSIGN_OR_RETURN(ExprPtr v, ParseExpr());
            dict->args.push_back(std::move(k));
            dict->args.push_back(std::move(v));
            if (!IsOp(",")) break;
            ++p_;
          }
          HQEKV_RETURN_IF_ERROR(Expect("}"));
          return dict;
        }
        break;
      default:
        break;
    }
    return Fail(t, "expected an expression, got " + Describe(t));
  }

  std::vector<Token> t_;
  size_t p_ = 0;
};

}  // namespace

Result<Body> ParseJinja(std::string_view source) {
  HQEKV_ASSIGN_OR_RETURN(std::vector<Token> tokens, LexJinja(source));
  return Parser(std::move(tokens)).Run();
}

}  // namespace hqekv::jinja
