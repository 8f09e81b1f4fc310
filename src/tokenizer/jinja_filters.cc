// Filters and tests of the chat-template engine.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "tokenizer/jinja_builtins.h"

namespace hqekv::jinja {
namespace {

// Positional argument k, else keyword `name`, else null.
const Value* FilterArg(const CallArgs& a, size_t k, std::string_view name) {
  if (k < a.positional.size()) return &a.positional[k];
  return a.Keyword(name);
}

Error FilterError(const std::string& filter, const std::string& what) {
  return MakeError("filter '" + filter + "': " + what);
}

std::string UpperAscii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string LowerAscii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A word's first letter raised, the rest as it is (@huggingface/jinja's
// `title`; Python's also lowers the rest).
std::string TitleWords(std::string s) {
  bool start = true;
  for (char& c : s) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (start && !space) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    start = space;
  }
  return s;
}

Result<int64_t> Length(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString:
      return static_cast<int64_t>(CodePoints(v.s).size());
    case Value::Kind::kArray:
      return static_cast<int64_t>(v.arr->size());
    case Value::Kind::kObject:
      return static_cast<int64_t>(v.obj->size());
    default:
      return MakeError(std::string("length of a ") + KindName(v.kind));
  }
}

// selectattr / rejectattr: items whose attribute passes the test (truthy
// when no test is named).
Result<Value> SelectAttr(const std::string& filter, const Value& input, const CallArgs& args,
                         bool keep) {
  if (!input.is_array()) return FilterError(filter, "needs a list");
  if (args.positional.empty() || !args.positional[0].is_string())
    return FilterError(filter, "needs an attribute name");
  const std::string& attr = args.positional[0].s;
  CallArgs test_args;
  for (size_t k = 2; k < args.positional.size(); ++k)
    test_args.positional.push_back(args.positional[k]);
  Array out;
  for (const Value& item : *input.arr) {
    const Value field = GetMember(item, attr);
    bool pass;
    if (args.positional.size() >= 2) {
      if (!args.positional[1].is_string()) return FilterError(filter, "the test must be a name");
      HQEKV_ASSIGN_OR_RETURN(pass, ApplyTest(args.positional[1].s, field, test_args));
    } else {
      pass = Truthy(field);
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::List(std::move(out));
}

Result<Value> Indent(const Value& input, const CallArgs& args) {
  if (!input.is_string()) return FilterError("indent", "needs a string");
  int64_t width = 4;
  if (const Value* w = FilterArg(args, 0, "width"); w && w->kind == Value::Kind::kInt) width = w->i;
  const Value* first = FilterArg(args, 1, "first");
  const Value* blank = FilterArg(args, 2, "blank");
  const std::string pad(static_cast<size_t>(std::max<int64_t>(width, 0)), ' ');
  std::string out;
  size_t line_start = 0;
  bool first_line = true;
  const std::string& s = input.s;
  while (true) {
    size_t nl = s.find('\n', line_start);
    const std::string line = s.substr(line_start, nl == std::string::npos ? nl : nl - line_start);
    const bool indent =
        first_line ? (first && Truthy(*first)) : (!line.empty() || (blank && Truthy(*blank)));
    if (indent) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    line_start = nl + 1;
    first_line = false;
  }
  return Value::Str(std::move(out));
}

Result<Value> Join(const Value& input, const CallArgs& args) {
  HQEKV_ASSIGN_OR_RETURN(Array items, Iterate(input));
  const Value* sep = FilterArg(args, 0, "d");
  const std::string d = sep && sep->is_string() ? sep->s : "";
  const Value* attr = FilterArg(args, 1, "attribute");
  std::string out;
  for (size_t k = 0; k < items.size(); ++k) {
    if (k > 0) out += d;
    out += ToText(attr && attr->is_string() ? GetMember(items[k], attr->s) : items[k]);
  }
  return Value::Str(std::move(out));
}

Result<Value> Map(const Value& input, const CallArgs& args) {
  HQEKV_ASSIGN_OR_RETURN(Array items, Iterate(input));
  Array out;
  if (const Value* attr = args.Keyword("attribute")) {
    const Value* def = args.Keyword("default");
    for (const Value& item : items) {
      Value v = attr->is_string() ? GetMember(item, attr->s) : GetItem(item, *attr);
      if (v.is_undefined() && def) v = *def;
      out.push_back(std::move(v));
    }
    return Value::List(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string())
    return FilterError("map", "needs attribute= or a filter name");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  for (const Value& item : items) {
    HQEKV_ASSIGN_OR_RETURN(Value v, ApplyFilter(args.positional[0].s, item, rest));
    out.push_back(std::move(v));
  }
  return Value::List(std::move(out));
}

// Sort order for dictsort / sort: numbers, then strings (case-insensitive
// unless asked), then anything else by its text.
bool LessForSort(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_number() && b.is_number()) return a.number() < b.number();
  if (a.is_string() && b.is_string())
    return case_sensitive ? a.s < b.s : LowerAscii(a.s) < LowerAscii(b.s);
  return ToText(a) < ToText(b);
}

}  // namespace

Result<Value> ApplyFilter(const std::string& name, const Value& input, const CallArgs& args) {
  const std::string& n = name;
  if (n == "safe" || n == "e" || n == "escape" || n == "forceescape") {
    if (n != "safe") return FilterError(n, "HTML escaping is not supported");
    return input;
  }
  if (n == "tojson") {
    int indent = -1;
    if (const Value* i = FilterArg(args, 0, "indent"); i && i->kind == Value::Kind::kInt)
      indent = static_cast<int>(i->i);
    return Value::Str(ToJson(input, indent));
  }
  if (n == "string") return Value::Str(ToText(input));
  if (n == "length" || n == "count") {
    auto len = Length(input);
    if (!len.ok()) return FilterError(n, len.message());
    return Value::Int(*len);
  }
  if (n == "default" || n == "d") {
    const Value* def = FilterArg(args, 0, "default_value");
    const Value* boolean = FilterArg(args, 1, "boolean");
    const bool use_default =
        input.is_undefined() || (boolean && Truthy(*boolean) && !Truthy(input));
    return use_default ? (def ? *def : Value::Str("")) : input;
  }
  if (n == "join") return Join(input, args);
  if (n == "map") return Map(input, args);
  if (n == "selectattr") return SelectAttr(n, input, args, true);
  if (n == "rejectattr") return SelectAttr(n, input, args, false);
  if (n == "select" || n == "reject") {
    HQEKV_ASSIGN_OR_RETURN(Array items, Iterate(input));
    CallArgs rest;
    if (args.positional.size() > 1)
      rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    Array out;
    for (const Value& item : items) {
      bool pass = Truthy(item);
      if (!args.positional.empty() && args.positional[0].is_string()) {
        HQEKV_ASSIGN_OR_RETURN(pass, ApplyTest(args.positional[0].s, item, rest));
      }
      if (pass == (n == "select")) out.push_back(item);
    }
    return Value::List(std::move(out));
  }
  if (n == "list") {
    if (input.is_array()) return input;
    HQEKV_ASSIGN_OR_RETURN(Array items, Iterate(input));
    return Value::List(std::move(items));
  }
  if (n == "items" || n == "dictsort") {
    if (!input.is_object()) return FilterError(n, "needs a dict");
    Array out;
    for (const auto& [k, v] : *input.obj) out.push_back(Value::List({Value::Str(k), v}));
    if (n == "dictsort") {
      std::stable_sort(out.begin(), out.end(), [](const Value& a, const Value& b) {
        return LessForSort((*a.arr)[0], (*b.arr)[0], false);
      });
    }
    return Value::List(std::move(out));
  }
  if (n == "first" || n == "last") {
    if (!input.is_array()) return FilterError(n, "needs a list");
    if (input.arr->empty()) return Value();
    return n == "first" ? input.arr->front() : input.arr->back();
  }
  if (n == "reverse") {
    if (input.is_string()) {
      auto cps = CodePoints(input.s);
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return Value::Str(std::move(out));
    }
    HQEKV_ASSIGN_OR_RETURN(Array items, Iterate(input));
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items));
  }
  if (n == "sort") {
    HQEKV_ASSIGN_OR_RETURN(Array items, Iterate(input));
    const Value* rev = FilterArg(args, 0, "reverse");
    const Value* cs = FilterArg(args, 1, "case_sensitive");
    const Value* attr = FilterArg(args, 2, "attribute");
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      const Value ka = attr && attr->is_string() ? GetMember(a, attr->s) : a;
      const Value kb = attr && attr->is_string() ? GetMember(b, attr->s) : b;
      return LessForSort(ka, kb, cs && Truthy(*cs));
    });
    if (rev && Truthy(*rev)) std::reverse(items.begin(), items.end());
    return Value::List(std::move(items));
  }
  if (n == "unique") {
    HQEKV_ASSIGN_OR_RETURN(Array items, Iterate(input));
    Array out;
    for (const Value& v : items) {
      bool seen = false;
      for (const Value& o : out) seen = seen || Equal(o, v);
      if (!seen) out.push_back(v);
    }
    return Value::List(std::move(out));
  }
  if (n == "int") {
    if (input.kind == Value::Kind::kInt) return input;
    if (input.kind == Value::Kind::kFloat) return Value::Int(static_cast<int64_t>(input.f));
    if (input.kind == Value::Kind::kBool) return Value::Int(input.b ? 1 : 0);
    if (input.is_string()) {
      char* end = nullptr;
      const std::string t = StripSpace(input.s, true, true);
      const long long v = std::strtoll(t.c_str(), &end, 10);
      if (!t.empty() && end && *end == '\0') return Value::Int(v);
    }
    const Value* def = FilterArg(args, 0, "default");
    return def ? *def : Value::Int(0);
  }
  if (n == "float") {
    if (input.is_number()) return Value::Float(input.number());
    if (input.is_string()) {
      char* end = nullptr;
      const double v = std::strtod(input.s.c_str(), &end);
      if (!input.s.empty() && end && *end == '\0') return Value::Float(v);
    }
    const Value* def = FilterArg(args, 0, "default");
    return def ? *def : Value::Float(0);
  }
  if (n == "abs") {
    if (input.kind == Value::Kind::kInt) return Value::Int(input.i < 0 ? -input.i : input.i);
    if (input.kind == Value::Kind::kFloat) return Value::Float(std::fabs(input.f));
    return FilterError(n, "needs a number");
  }
  if (n == "indent") return Indent(input, args);
  // String filters.
  if (!input.is_string()) {
    static constexpr const char* kStringFilters[] = {"trim",       "upper",   "lower",    "title",
                                                     "capitalize", "replace", "wordcount"};
    for (const char* s : kStringFilters)
      if (n == s) return FilterError(n, std::string("needs a string, got ") + KindName(input.kind));
    return FilterError(n, "unknown filter");
  }
  if (n == "trim") return Value::Str(StripSpace(input.s, true, true));
  if (n == "upper") return Value::Str(UpperAscii(input.s));
  if (n == "lower") return Value::Str(LowerAscii(input.s));
  if (n == "title") return Value::Str(TitleWords(input.s));
  if (n == "capitalize") {
    std::string s = input.s;
    if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    return Value::Str(std::move(s));
  }
  if (n == "replace") {
    const Value* from = FilterArg(args, 0, "old");
    const Value* to = FilterArg(args, 1, "new");
    if (!from || !to || !from->is_string() || !to->is_string())
      return FilterError(n, "needs two strings");
    CallArgs margs;
    margs.positional = {*from, *to};
    if (const Value* c = FilterArg(args, 2, "count")) margs.positional.push_back(*c);
    return (*GetMember(input, "replace").fn)(margs);
  }
  if (n == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    for (char c : input.s) {
      const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
      if (!space && !in_word) ++words;
      in_word = !space;
    }
    return Value::Int(words);
  }
  return FilterError(n, "unknown filter");
}

Result<bool> ApplyTest(const std::string& n, const Value& v, const CallArgs& args) {
  using K = Value::Kind;
  if (n == "defined") return !v.is_undefined();
  if (n == "undefined") return v.is_undefined();
  if (n == "none") return v.is_none();
  if (n == "string") return v.is_string();
  if (n == "number") return v.is_number();
  if (n == "integer") return v.kind == K::kInt;
  if (n == "float") return v.kind == K::kFloat;
  if (n == "boolean") return v.kind == K::kBool;
  if (n == "true") return v.kind == K::kBool && v.b;
  if (n == "false") return v.kind == K::kBool && !v.b;
  if (n == "mapping") return v.is_object();
  if (n == "iterable") return v.is_array() || v.is_object() || v.is_string();
  if (n == "sequence") return v.is_array() || v.is_string();
  if (n == "callable") return v.kind == K::kFunction;
  if (n == "lower") return v.is_string() && LowerAscii(v.s) == v.s;
  if (n == "upper") return v.is_string() && UpperAscii(v.s) == v.s;
  if (n == "odd" || n == "even") {
    if (v.kind != K::kInt) return MakeError("test '" + n + "' needs an integer");
    return (std::abs(v.i) % 2 == 1) == (n == "odd");
  }
  if (n == "divisibleby") {
    if (v.kind != K::kInt || args.positional.empty() || args.positional[0].kind != K::kInt ||
        args.positional[0].i == 0)
      return MakeError("test 'divisibleby' needs integers");
    return v.i % args.positional[0].i == 0;
  }
  if (n == "equalto" || n == "eq" || n == "==" || n == "sameas") {
    if (args.positional.empty()) return MakeError("test '" + n + "' needs a value");
    return Equal(v, args.positional[0]);
  }
  if (n == "ne" || n == "!=") {
    if (args.positional.empty()) return MakeError("test '" + n + "' needs a value");
    return !Equal(v, args.positional[0]);
  }
  if (n == "in") {
    if (args.positional.empty()) return MakeError("test 'in' needs a container");
    const Value& c = args.positional[0];
    if (c.is_array()) {
      for (const Value& e : *c.arr)
        if (Equal(e, v)) return true;
      return false;
    }
    if (c.is_string() && v.is_string()) return c.s.find(v.s) != std::string::npos;
    if (c.is_object() && v.is_string()) return c.Find(v.s) != nullptr;
    return false;
  }
  return MakeError("unknown test '" + n + "'");
}

}  // namespace hqekv::jinja
