// The tree-walking evaluator of the chat-template engine.
#include <cmath>
#include <memory>

#include "tokenizer/jinja.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_builtins.h"

namespace hqekv::jinja {
namespace {

// Variables of one level: the template, a loop iteration, a macro call. A
// name set inside a loop body is not seen after the loop, as in Jinja.
struct Scope;
using ScopePtr = std::shared_ptr<Scope>;
struct Scope {
  Object vars;
  ScopePtr parent;

  const Value* Lookup(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get())
      for (const auto& [k, v] : s->vars)
        if (k == name) return &v;
    return nullptr;
  }
  void Set(const std::string& name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
};

enum class Flow { kNormal, kBreak, kContinue };

constexpr int kMaxCallDepth = 200;  // macro recursion
// A template from a model file is untrusted input: nested loops over
// range() or a growing string must end in an error, not hang or exhaust
// memory. Chat templates execute a few thousand statements and write a few
// KiB per conversation.
constexpr int64_t kMaxSteps = 2'000'000;       // statements and loop iterations
constexpr size_t kMaxOutputBytes = 64u << 20;  // rendered text

Error AtPosition(int line, int col, const std::string& what) {
  if (what.rfind("template line ", 0) == 0) return MakeError(what);  // already placed
  return MakeError("template line " + std::to_string(line) + ", column " + std::to_string(col) +
                   ": " + what);
}

class Renderer {
 public:
  Result<Flow> Exec(const Body& body, const ScopePtr& scope, std::string* out) {
    for (const NodePtr& n : body) {
      HQEKV_ASSIGN_OR_RETURN(Flow f, ExecNode(*n, scope, out));
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  // A scope lives while a render step or a macro defined in it needs it
  // (loop iterations free theirs as they end).
  static ScopePtr NewScope(ScopePtr parent) {
    auto s = std::make_shared<Scope>();
    s->parent = std::move(parent);
    return s;
  }

 private:
  Result<Flow> ExecNode(const Node& n, const ScopePtr& scope, std::string* out) {
    if (++steps_ > kMaxSteps)
      return AtPosition(n.line, n.col, "template ran more than 2M steps (a runaway loop?)");
    if (out->size() > kMaxOutputBytes)
      return AtPosition(n.line, n.col, "template output exceeds 64 MiB");
    switch (n.kind) {
      case Node::Kind::kText:
        *out += n.text;
        return Flow::kNormal;
      case Node::Kind::kOutput: {
        HQEKV_ASSIGN_OR_RETURN(Value v, Eval(*n.expr, scope));
        *out += ToText(v);
        return Flow::kNormal;
      }
      case Node::Kind::kIf: {
        HQEKV_ASSIGN_OR_RETURN(Value c, Eval(*n.expr, scope));
        return Exec(Truthy(c) ? n.body : n.else_body, scope, out);
      }
      case Node::Kind::kFor:
        return ExecFor(n, scope, out);
      case Node::Kind::kSet:
        return ExecSet(n, scope);
      case Node::Kind::kMacro:
        scope->Set(n.name, MakeMacro(n, scope));
        return Flow::kNormal;
      case Node::Kind::kCallBlock:
        return ExecCallBlock(n, scope, out);
      case Node::Kind::kFilterBlock: {
        std::string text;
        HQEKV_ASSIGN_OR_RETURN(Flow f, Exec(n.body, scope, &text));
        (void)f;
        HQEKV_ASSIGN_OR_RETURN(Value v, EvalFilterChain(*n.expr, scope, Value::Str(text)));
        *out += ToText(v);
        return Flow::kNormal;
      }
      case Node::Kind::kBreak:
        return Flow::kBreak;
      case Node::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  Status Bind(const std::vector<std::string>& targets, const Value& item, const ScopePtr& scope,
              int line, int col) {
    if (targets.size() == 1) {
      scope->Set(targets[0], item);
      return Status::Ok();
    }
    if (!item.is_array() || item.arr->size() != targets.size()) {
      return AtPosition(line, col,
                        "cannot unpack " + std::string(KindName(item.kind)) + " into " +
                            std::to_string(targets.size()) + " names");
    }
    for (size_t k = 0; k < targets.size(); ++k) scope->Set(targets[k], (*item.arr)[k]);
    return Status::Ok();
  }

  Result<Flow> ExecFor(const Node& n, const ScopePtr& scope, std::string* out) {
    HQEKV_ASSIGN_OR_RETURN(Value seq, Eval(*n.expr, scope));
    auto items_or = Iterate(seq);
    if (!items_or.ok()) return AtPosition(n.line, n.col, items_or.message());
    Array items = std::move(*items_or);
    if (n.cond) {  // `for x in y if c`: the loop sees only the items that pass
      Array kept;
      for (const Value& item : items) {
        ScopePtr s = NewScope(scope);
        HQEKV_RETURN_IF_ERROR(Bind(n.targets, item, s, n.line, n.col));
        HQEKV_ASSIGN_OR_RETURN(Value c, Eval(*n.cond, s));
        if (Truthy(c)) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return Exec(n.else_body, scope, out);
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < len; ++k) {
      if (++steps_ > kMaxSteps)
        return AtPosition(n.line, n.col, "template ran more than 2M steps (a runaway loop?)");
      ScopePtr s = NewScope(scope);
      HQEKV_RETURN_IF_ERROR(Bind(n.targets, items[static_cast<size_t>(k)], s, n.line, n.col));
      Value loop = Value::Dict();
      loop.Set("index", Value::Int(k + 1));
      loop.Set("index0", Value::Int(k));
      loop.Set("revindex", Value::Int(len - k));
      loop.Set("revindex0", Value::Int(len - k - 1));
      loop.Set("first", Value::Bool(k == 0));
      loop.Set("last", Value::Bool(k == len - 1));
      loop.Set("length", Value::Int(len));
      loop.Set("previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value());
      loop.Set("nextitem", k + 1 < len ? items[static_cast<size_t>(k + 1)] : Value());
      s->Set("loop", std::move(loop));
      HQEKV_ASSIGN_OR_RETURN(Flow f, Exec(n.body, s, out));
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  Result<Flow> ExecSet(const Node& n, const ScopePtr& scope) {
    Value v;
    if (n.expr) {
      HQEKV_ASSIGN_OR_RETURN(v, Eval(*n.expr, scope));
    } else {
      std::string text;
      HQEKV_ASSIGN_OR_RETURN(Flow f, Exec(n.body, scope, &text));
      (void)f;
      v = Value::Str(std::move(text));
    }
    if (!n.attr.empty()) {
      const Value* target = scope->Lookup(n.targets[0]);
      if (!target || !target->is_object())
        return AtPosition(n.line, n.col, "'" + n.targets[0] + "' is not a namespace");
      Value shared = *target;  // the same dict: the change is seen by every holder
      shared.Set(n.attr, std::move(v));
      return Flow::kNormal;
    }
    HQEKV_RETURN_IF_ERROR(Bind(n.targets, v, scope, n.line, n.col));
    return Flow::kNormal;
  }

  Value MakeMacro(const Node& n, const ScopePtr& def_scope) {
    const Node* node = &n;
    // Weak: the macro is stored in the scope it captures.
    std::weak_ptr<Scope> weak_def = def_scope;
    return Value::Func([this, node, weak_def](const CallArgs& a) -> Result<Value> {
      ScopePtr def_scope = weak_def.lock();
      if (!def_scope)
        return AtPosition(node->line, node->col, "macro called after its scope ended");
      if (++depth_ > kMaxCallDepth) {
        --depth_;
        return AtPosition(node->line, node->col, "macro calls nested too deeply");
      }
      ScopePtr s = NewScope(def_scope);
      const auto& params = node->params;
      for (size_t k = 0; k < params.size(); ++k) {
        const Value* kw = a.Keyword(params[k].first);
        if (k < a.positional.size()) {
          s->Set(params[k].first, a.positional[k]);
        } else if (kw) {
          s->Set(params[k].first, *kw);
        } else if (params[k].second) {
          auto d = Eval(*params[k].second, s);
          if (!d.ok()) {
            --depth_;
            return d.error();
          }
          s->Set(params[k].first, std::move(*d));
        } else {
          s->Set(params[k].first, Value());
        }
      }
      if (const Value* caller = a.Keyword("caller")) s->Set("caller", *caller);
      std::string text;
      auto f = Exec(node->body, s, &text);
      --depth_;
      if (!f.ok()) return f.error();
      return Value::Str(std::move(text));
    });
  }

  Result<Flow> ExecCallBlock(const Node& n, const ScopePtr& scope, std::string* out) {
    const Node* node = &n;
    std::weak_ptr<Scope> weak_scope = scope;
    Value caller = Value::Func([this, node, weak_scope](const CallArgs& a) -> Result<Value> {
      ScopePtr outer = weak_scope.lock();
      if (!outer) return AtPosition(node->line, node->col, "caller() after its scope ended");
      ScopePtr s = NewScope(outer);
      for (size_t k = 0; k < node->params.size(); ++k)
        s->Set(node->params[k].first, k < a.positional.size() ? a.positional[k] : Value());
      std::string text;
      HQEKV_ASSIGN_OR_RETURN(Flow f, Exec(node->body, s, &text));
      (void)f;
      return Value::Str(std::move(text));
    });
    const Expr& call = *n.expr;
    HQEKV_ASSIGN_OR_RETURN(Value callee, Eval(*call.args[0], scope));
    HQEKV_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call, scope, 1));
    args.keyword.emplace_back("caller", std::move(caller));
    HQEKV_ASSIGN_OR_RETURN(Value v, Call(callee, args, call));
    *out += ToText(v);
    return Flow::kNormal;
  }

  Result<CallArgs> EvalArgs(const Expr& e, const ScopePtr& scope, size_t first) {
    CallArgs a;
    for (size_t k = first; k < e.args.size(); ++k) {
      HQEKV_ASSIGN_OR_RETURN(Value v, Eval(*e.args[k], scope));
      a.positional.push_back(std::move(v));
    }
    for (const auto& [name, x] : e.kwargs) {
      HQEKV_ASSIGN_OR_RETURN(Value v, Eval(*x, scope));
      a.keyword.emplace_back(name, std::move(v));
    }
    return a;
  }

  Result<Value> Call(const Value& callee, const CallArgs& args, const Expr& at) {
    if (callee.kind != Value::Kind::kFunction) {
      std::string what = at.args[0]->kind == Expr::Kind::kName   ? "'" + at.args[0]->name + "'"
                         : at.args[0]->kind == Expr::Kind::kAttr ? "'." + at.args[0]->name + "'"
                                                                 : "the callee";
      return AtPosition(at.line, at.col, what + " is not callable (" + KindName(callee.kind) + ")");
    }
    auto r = (*callee.fn)(args);
    if (!r.ok()) return AtPosition(at.line, at.col, r.message());
    return r;
  }

  // A filter block's chain: the innermost filter's input is `input`.
  Result<Value> EvalFilterChain(const Expr& f, const ScopePtr& scope, Value input) {
    Value in = std::move(input);
    if (f.args[0]) {
      HQEKV_ASSIGN_OR_RETURN(in, EvalFilterChain(*f.args[0], scope, std::move(in)));
    }
    HQEKV_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(f, scope, 1));
    auto r = ApplyFilter(f.name, in, args);
    if (!r.ok()) return AtPosition(f.line, f.col, r.message());
    return r;
  }

  Result<Value> Eval(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName: {
        const Value* v = scope->Lookup(e.name);
        return v ? *v : Value();
      }
      case Expr::Kind::kList: {
        Array a;
        for (const auto& x : e.args) {
          HQEKV_ASSIGN_OR_RETURN(Value v, Eval(*x, scope));
          a.push_back(std::move(v));
        }
        return Value::List(std::move(a));
      }
      case Expr::Kind::kDict: {
        Value d = Value::Dict();
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          HQEKV_ASSIGN_OR_RETURN(Value key, Eval(*e.args[k], scope));
          HQEKV_ASSIGN_OR_RETURN(Value v, Eval(*e.args[k + 1], scope));
          if (!key.is_string()) return AtPosition(e.line, e.col, "dict keys must be strings");
          d.Set(key.s, std::move(v));
        }
        return d;
      }
      case Expr::Kind::kAttr: {
        HQEKV_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
        return GetMember(obj, e.name);
      }
      case Expr::Kind::kIndex: {
        HQEKV_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
        HQEKV_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1], scope));
        if (obj.is_undefined() || obj.is_none())
          return AtPosition(
              e.line, e.col,
              std::string("cannot index ") + KindName(obj.kind) +
                  (e.args[0]->kind == Expr::Kind::kName ? " '" + e.args[0]->name + "'" : ""));
        return GetItem(obj, key);
      }
      case Expr::Kind::kSlice: {
        HQEKV_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
        Value parts[3];
        for (int k = 0; k < 3; ++k) {
          if (e.args[1 + k]) {
            HQEKV_ASSIGN_OR_RETURN(parts[k], Eval(*e.args[1 + k], scope));
          }
        }
        auto r = Slice(obj, e.args[1] ? &parts[0] : nullptr, e.args[2] ? &parts[1] : nullptr,
                       e.args[3] ? &parts[2] : nullptr);
        if (!r.ok()) return AtPosition(e.line, e.col, r.message());
        return r;
      }
      case Expr::Kind::kCall: {
        HQEKV_ASSIGN_OR_RETURN(Value callee, Eval(*e.args[0], scope));
        HQEKV_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, scope, 1));
        return Call(callee, args, e);
      }
      case Expr::Kind::kFilter: {
        HQEKV_ASSIGN_OR_RETURN(Value in, Eval(*e.args[0], scope));
        HQEKV_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, scope, 1));
        auto r = ApplyFilter(e.name, in, args);
        if (!r.ok()) return AtPosition(e.line, e.col, r.message());
        return r;
      }
      case Expr::Kind::kTest: {
        HQEKV_ASSIGN_OR_RETURN(Value in, Eval(*e.args[0], scope));
        HQEKV_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, scope, 1));
        auto r = ApplyTest(e.name, in, args);
        if (!r.ok()) return AtPosition(e.line, e.col, r.message());
        return Value::Bool(*r != e.negated);
      }
      case Expr::Kind::kUnary: {
        HQEKV_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
        if (e.name == "not") return Value::Bool(!Truthy(v));
        if (v.kind == Value::Kind::kInt) return Value::Int(e.name == "-" ? -v.i : v.i);
        if (v.kind == Value::Kind::kFloat) return Value::Float(e.name == "-" ? -v.f : v.f);
        return AtPosition(e.line, e.col, "unary '" + e.name + "' on a " + KindName(v.kind));
      }
      case Expr::Kind::kBinary:
        return EvalBinary(e, scope);
      case Expr::Kind::kTernary: {
        HQEKV_ASSIGN_OR_RETURN(Value c, Eval(*e.args[1], scope));
        if (Truthy(c)) return Eval(*e.args[0], scope);
        if (e.args[2]) return Eval(*e.args[2], scope);
        return Value();
      }
    }
    return Value();
  }

  Result<Value> EvalBinary(const Expr& e, const ScopePtr& scope) {
    const std::string& op = e.name;
    HQEKV_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], scope));
    if (op == "and") return Truthy(a) ? Eval(*e.args[1], scope) : a;
    if (op == "or") return Truthy(a) ? a : Eval(*e.args[1], scope);
    HQEKV_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1], scope));
    if (op == "==") return Value::Bool(Equal(a, b));
    if (op == "!=") return Value::Bool(!Equal(a, b));
    if (op == "in" || op == "not in") {
      CallArgs c;
      c.positional.push_back(b);
      auto r = ApplyTest("in", a, c);
      if (!r.ok()) return AtPosition(e.line, e.col, r.message());
      return Value::Bool(*r == (op == "in"));
    }
    if (op == "~") return Value::Str(ToText(a, false) + ToText(b, false));
    auto type_error = [&]() {
      return AtPosition(e.line, e.col,
                        std::string("cannot apply '") + op + "' to " + KindName(a.kind) + " and " +
                            KindName(b.kind));
    };
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int cmp;
      if (a.is_number() && b.is_number()) {
        cmp = a.number() < b.number() ? -1 : a.number() > b.number() ? 1 : 0;
      } else if (a.is_string() && b.is_string()) {
        cmp = a.s.compare(b.s);
      } else {
        return type_error();
      }
      const bool r = op == "<" ? cmp < 0 : op == ">" ? cmp > 0 : op == "<=" ? cmp <= 0 : cmp >= 0;
      return Value::Bool(r);
    }
    if (op == "+") {
      if (a.is_array() && b.is_array()) {
        Array out = *a.arr;
        out.insert(out.end(), b.arr->begin(), b.arr->end());
        return Value::List(std::move(out));
      }
      if (a.is_string() || b.is_string()) {
        if (a.is_undefined() || b.is_undefined() || a.is_none() || b.is_none()) return type_error();
        return Value::Str(ToText(a, false) + ToText(b, false));
      }
    }
    if (op == "*" && a.is_string() && b.kind == Value::Kind::kInt) {
      std::string out;
      for (int64_t k = 0; k < b.i && out.size() < (1u << 24); ++k) out += a.s;
      return Value::Str(std::move(out));
    }
    if (!a.is_number() || !b.is_number() || a.kind == Value::Kind::kBool) return type_error();
    const bool ints = a.kind == Value::Kind::kInt && b.kind == Value::Kind::kInt;
    if (op == "+") return ints ? Value::Int(a.i + b.i) : Value::Float(a.number() + b.number());
    if (op == "-") return ints ? Value::Int(a.i - b.i) : Value::Float(a.number() - b.number());
    if (op == "*") return ints ? Value::Int(a.i * b.i) : Value::Float(a.number() * b.number());
    if (op == "**") {
      if (ints && b.i >= 0) return Value::Int(static_cast<int64_t>(std::pow(a.i, b.i)));
      return Value::Float(std::pow(a.number(), b.number()));
    }
    if (b.number() == 0) return AtPosition(e.line, e.col, "division by zero");
    if (op == "/") return Value::Float(a.number() / b.number());
    if (op == "//") {
      if (ints) {
        int64_t q = a.i / b.i;
        if ((a.i % b.i != 0) && ((a.i < 0) != (b.i < 0))) --q;
        return Value::Int(q);
      }
      return Value::Float(std::floor(a.number() / b.number()));
    }
    if (op == "%") {
      if (ints) {
        int64_t r = a.i % b.i;
        if (r != 0 && ((r < 0) != (b.i < 0))) r += b.i;
        return Value::Int(r);
      }
      const double r = std::fmod(a.number(), b.number());
      return Value::Float(r != 0 && ((r < 0) != (b.number() < 0)) ? r + b.number() : r);
    }
    return type_error();
  }

  int depth_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

Result<Template> Template::Parse(std::string_view source) {
  HQEKV_ASSIGN_OR_RETURN(Body body, ParseJinja(source));
  Template t;
  t.body_ = std::make_shared<const Body>(std::move(body));
  return t;
}

Result<std::string> Template::Render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) return MakeError("template context must be a JSON object");
  Renderer r;
  ScopePtr globals = Renderer::NewScope(nullptr);
  globals->vars = GlobalFunctions();
  ScopePtr vars = Renderer::NewScope(globals);
  for (const auto& [k, v] : context.items()) vars->Set(k, FromJson(v));
  std::string out;
  HQEKV_ASSIGN_OR_RETURN(Flow f, r.Exec(*body_, vars, &out));
  (void)f;
  return out;
}

}  // namespace hqekv::jinja
