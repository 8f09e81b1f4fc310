// Values of the chat-template Jinja engine (tokenizer/jinja.h). The engine
// follows @huggingface/jinja, the engine transformers.js uses, where the two
// Jinja flavours differ: true prints "true", none and undefined print "",
// lists and dicts print as JSON with ", " / ": " separators, an integral
// float prints with ".0", dicts keep their insertion order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace hqekv::jinja {

struct Value;
using Array = std::vector<Value>;
// Insertion-ordered; chat-template dicts hold a handful of keys, so lookup is
// a linear scan.
using Object = std::vector<std::pair<std::string, Value>>;

// Arguments of a call: positional, then keyword (name, value).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* Keyword(std::string_view name) const;
};
using Function = std::function<Result<Value>(const CallArgs&)>;

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  // Shared: a list or dict is one object however many names refer to it
  // (`set ns.x = ...` on a namespace changes it for every holder).
  std::shared_ptr<Array> arr;
  std::shared_ptr<Object> obj;
  std::shared_ptr<Function> fn;
  bool is_namespace = false;

  static Value None() { return Make(Kind::kNone); }
  static Value Bool(bool v) {
    Value x = Make(Kind::kBool);
    x.b = v;
    return x;
  }
  static Value Int(int64_t v) {
    Value x = Make(Kind::kInt);
    x.i = v;
    return x;
  }
  static Value Float(double v) {
    Value x = Make(Kind::kFloat);
    x.f = v;
    return x;
  }
  static Value Str(std::string v) {
    Value x = Make(Kind::kString);
    x.s = std::move(v);
    return x;
  }
  static Value List(Array v = {}) {
    Value x = Make(Kind::kArray);
    x.arr = std::make_shared<Array>(std::move(v));
    return x;
  }
  static Value Dict(Object v = {}) {
    Value x = Make(Kind::kObject);
    x.obj = std::make_shared<Object>(std::move(v));
    return x;
  }
  static Value Func(Function f) {
    Value x = Make(Kind::kFunction);
    x.fn = std::make_shared<Function>(std::move(f));
    return x;
  }

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  bool is_array() const { return kind == Kind::kArray; }
  bool is_object() const { return kind == Kind::kObject; }
  double number() const { return kind == Kind::kInt ? static_cast<double>(i) : f; }

  // Dict lookup; nullptr when absent or not a dict.
  const Value* Find(std::string_view key) const;
  void Set(const std::string& key, Value v);  // dicts only

 private:
  static Value Make(Kind k) {
    Value x;
    x.kind = k;
    return x;
  }
};

const char* KindName(Value::Kind k);
bool Truthy(const Value& v);
bool Equal(const Value& a, const Value& b);
// The text `{{ v }}` writes; `~` and `+` with a string write an integral
// float without ".0" (JavaScript's number-to-string), float_point false.
std::string ToText(const Value& v, bool float_point = true);
// JSON text as the engine's tojson filter writes it: ", " and ": " between
// items when indent < 0, else one item per line indented by `indent`
// spaces; non-ASCII characters as they are.
std::string ToJson(const Value& v, int indent);
// JSON input (messages, tools): an integral number becomes an int, as a
// JavaScript number does in @huggingface/jinja.
Value FromJson(const nlohmann::ordered_json& j);

// Text helpers shared by the builtins: UTF-8 code points of a string (a
// malformed byte is one item), and whitespace stripped from either end.
std::vector<std::string> CodePoints(const std::string& s);
std::string StripSpace(std::string_view s, bool left, bool right);

}  // namespace hqekv::jinja
