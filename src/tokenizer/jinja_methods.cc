// Member access, indexing, slicing, iteration and the global functions of
// the chat-template engine.
#include <algorithm>
#include <cctype>
#include <ctime>

#include "tokenizer/jinja_builtins.h"

namespace hqekv::jinja {
namespace {

const Value* MethodArg(const CallArgs& a, size_t k, std::string_view name) {
  if (k < a.positional.size()) return &a.positional[k];
  return a.Keyword(name);
}

bool StartsOrEnds(const std::string& s, const Value& what, bool start) {
  auto one = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return start ? s.compare(0, p.size(), p) == 0
                 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (what.is_string()) return one(what.s);
  if (what.is_array())
    for (const Value& v : *what.arr)
      if (v.is_string() && one(v.s)) return true;
  return false;
}

Value Split(const std::string& s, const Value* sep, const Value* maxsplit) {
  int64_t limit = maxsplit && maxsplit->kind == Value::Kind::kInt ? maxsplit->i : -1;
  Array out;
  if (!sep || sep->is_none() || sep->is_undefined()) {
    size_t k = 0;
    while (true) {
      while (k < s.size() && std::isspace(static_cast<unsigned char>(s[k]))) ++k;
      if (k >= s.size()) break;
      if (limit == 0) {
        std::string rest = s.substr(k);
        while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.back())))
          rest.pop_back();
        out.push_back(Value::Str(rest));
        break;
      }
      size_t e = k;
      while (e < s.size() && !std::isspace(static_cast<unsigned char>(s[e]))) ++e;
      out.push_back(Value::Str(s.substr(k, e - k)));
      k = e;
      --limit;
    }
    return Value::List(std::move(out));
  }
  const std::string& d = sep->s;
  size_t k = 0;
  while (true) {
    const size_t e = (limit == 0 || d.empty()) ? std::string::npos : s.find(d, k);
    if (e == std::string::npos) {
      out.push_back(Value::Str(s.substr(k)));
      break;
    }
    out.push_back(Value::Str(s.substr(k, e - k)));
    k = e + d.size();
    --limit;
  }
  return Value::List(std::move(out));
}

std::string ReplaceAll(const std::string& s, const std::string& from, const std::string& to,
                       int64_t count) {
  if (from.empty()) return s;
  std::string out;
  size_t k = 0;
  while (count != 0) {
    const size_t e = s.find(from, k);
    if (e == std::string::npos) break;
    out.append(s, k, e - k);
    out += to;
    k = e + from.size();
    --count;
  }
  out.append(s, k);
  return out;
}

Value StringMethod(const std::string& s, const std::string& name) {
  auto bind = [](Function f) { return Value::Func(std::move(f)); };
  if (name == "startswith" || name == "endswith") {
    const bool start = name == "startswith";
    return bind([s, start](const CallArgs& a) -> Result<Value> {
      if (a.positional.empty()) return MakeError("str.startswith/endswith needs an argument");
      return Value::Bool(StartsOrEnds(s, a.positional[0], start));
    });
  }
  // @huggingface/jinja strips whitespace whatever characters are named.
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return bind([s, left, right](const CallArgs&) -> Result<Value> {
      return Value::Str(StripSpace(s, left, right));
    });
  }
  if (name == "split") {
    return bind([s](const CallArgs& a) -> Result<Value> {
      return Split(s, MethodArg(a, 0, "sep"), MethodArg(a, 1, "maxsplit"));
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    const std::string filter = name;
    return bind([s, filter](const CallArgs&) -> Result<Value> {
      return ApplyFilter(filter, Value::Str(s), CallArgs{});
    });
  }
  if (name == "replace") {
    return bind([s](const CallArgs& a) -> Result<Value> {
      const Value* from = MethodArg(a, 0, "old");
      const Value* to = MethodArg(a, 1, "new");
      const Value* count = MethodArg(a, 2, "count");
      if (!from || !to || !from->is_string() || !to->is_string())
        return MakeError("str.replace needs two strings");
      return Value::Str(
          ReplaceAll(s, from->s, to->s, count && count->kind == Value::Kind::kInt ? count->i : -1));
    });
  }
  if (name == "join") {
    return bind([s](const CallArgs& a) -> Result<Value> {
      if (a.positional.empty()) return MakeError("str.join needs a list");
      CallArgs fa;
      fa.positional.push_back(Value::Str(s));
      return ApplyFilter("join", a.positional[0], fa);
    });
  }
  return Value();
}

Value DictMethod(const Value& d, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    return Value::Func([d, name](const CallArgs&) -> Result<Value> {
      Array out;
      for (const auto& [k, v] : *d.obj) {
        if (name == "items") out.push_back(Value::List({Value::Str(k), v}));
        if (name == "keys") out.push_back(Value::Str(k));
        if (name == "values") out.push_back(v);
      }
      return Value::List(std::move(out));
    });
  }
  if (name == "get") {
    return Value::Func([d](const CallArgs& a) -> Result<Value> {
      if (a.positional.empty() || !a.positional[0].is_string())
        return MakeError("dict.get needs a key string");
      if (const Value* v = d.Find(a.positional[0].s)) return *v;
      return a.positional.size() > 1 ? a.positional[1] : Value::None();
    });
  }
  return Value();
}

// Python's slice bounds for a sequence of n items.
void SliceBounds(int64_t n, const Value* start, const Value* stop, int64_t step, int64_t* b,
                 int64_t* e) {
  auto clamp = [&](const Value* v, int64_t def) {
    if (!v || v->kind != Value::Kind::kInt) return def;
    int64_t x = v->i;
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  *b = clamp(start, step > 0 ? 0 : n - 1);
  *e = clamp(stop, step > 0 ? n : -1);
}

}  // namespace

Value GetMember(const Value& obj, const std::string& name) {
  if (obj.is_object()) {
    if (const Value* v = obj.Find(name)) return *v;
    if (obj.is_namespace) return Value();
    return DictMethod(obj, name);
  }
  if (obj.is_string()) return StringMethod(obj.s, name);
  if (obj.is_array() && name == "append") {
    auto arr = obj.arr;
    return Value::Func([arr](const CallArgs& a) -> Result<Value> {
      if (a.positional.size() != 1) return MakeError("list.append needs one value");
      arr->push_back(a.positional[0]);
      return Value::None();
    });
  }
  return Value();
}

Value GetItem(const Value& obj, const Value& key) {
  if (obj.is_object()) {
    if (key.is_string()) return GetMember(obj, key.s);
    if (key.kind == Value::Kind::kInt) {
      if (const Value* v = obj.Find(std::to_string(key.i))) return *v;
    }
    return Value();
  }
  if (key.kind != Value::Kind::kInt) return Value();
  if (obj.is_array()) {
    int64_t k = key.i < 0 ? key.i + static_cast<int64_t>(obj.arr->size()) : key.i;
    if (k < 0 || k >= static_cast<int64_t>(obj.arr->size())) return Value();
    return (*obj.arr)[static_cast<size_t>(k)];
  }
  if (obj.is_string()) {
    const auto cps = CodePoints(obj.s);
    int64_t k = key.i < 0 ? key.i + static_cast<int64_t>(cps.size()) : key.i;
    if (k < 0 || k >= static_cast<int64_t>(cps.size())) return Value();
    return Value::Str(cps[static_cast<size_t>(k)]);
  }
  return Value();
}

Result<Value> Slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  const int64_t st = step && step->kind == Value::Kind::kInt ? step->i : 1;
  if (st == 0) return MakeError("slice step cannot be zero");
  std::vector<std::string> cps;
  if (obj.is_string())
    cps = CodePoints(obj.s);
  else if (!obj.is_array())
    return MakeError(std::string("cannot slice a ") + KindName(obj.kind));
  const int64_t n =
      obj.is_string() ? static_cast<int64_t>(cps.size()) : static_cast<int64_t>(obj.arr->size());
  int64_t b, e;
  SliceBounds(n, start, stop, st, &b, &e);
  std::string s;
  Array a;
  for (int64_t k = b; st > 0 ? k < e : k > e; k += st) {
    if (obj.is_string())
      s += cps[static_cast<size_t>(k)];
    else
      a.push_back((*obj.arr)[static_cast<size_t>(k)]);
  }
  return obj.is_string() ? Value::Str(std::move(s)) : Value::List(std::move(a));
}

Result<Array> Iterate(const Value& v) {
  if (v.is_array()) return *v.arr;
  if (v.is_object()) {
    Array keys;
    for (const auto& [k, x] : *v.obj) keys.push_back(Value::Str(k));
    return keys;
  }
  if (v.is_string()) {
    Array chars;
    for (auto& c : CodePoints(v.s)) chars.push_back(Value::Str(std::move(c)));
    return chars;
  }
  if (v.is_undefined() || v.is_none()) return Array{};
  return MakeError(std::string("cannot iterate over a ") + KindName(v.kind));
}

Object GlobalFunctions() {
  Object g;
  g.emplace_back(
      "raise_exception", Value::Func([](const CallArgs& a) -> Result<Value> {
        return MakeError("raise_exception: " +
                         (a.positional.empty() ? std::string() : ToText(a.positional[0])));
      }));
  g.emplace_back("namespace", Value::Func([](const CallArgs& a) -> Result<Value> {
                   Value ns = Value::Dict();
                   ns.is_namespace = true;
                   if (!a.positional.empty() && a.positional[0].is_object())
                     for (const auto& [k, v] : *a.positional[0].obj) ns.Set(k, v);
                   for (const auto& [k, v] : a.keyword) ns.Set(k, v);
                   return ns;
                 }));
  g.emplace_back("dict", Value::Func([](const CallArgs& a) -> Result<Value> {
                   Value d = Value::Dict();
                   for (const auto& [k, v] : a.keyword) d.Set(k, v);
                   return d;
                 }));
  g.emplace_back("range", Value::Func([](const CallArgs& a) -> Result<Value> {
                   int64_t r[3] = {0, 0, 1};
                   const size_t n = a.positional.size();
                   if (n < 1 || n > 3) return MakeError("range takes 1 to 3 integers");
                   for (size_t k = 0; k < n; ++k) {
                     if (a.positional[k].kind != Value::Kind::kInt)
                       return MakeError("range takes integers");
                   }
                   if (n == 1) r[1] = a.positional[0].i;
                   for (size_t k = 0; n > 1 && k < n; ++k) r[k] = a.positional[k].i;
                   if (r[2] == 0) return MakeError("range step cannot be zero");
                   Array out;
                   for (int64_t x = r[0]; r[2] > 0 ? x < r[1] : x > r[1]; x += r[2]) {
                     out.push_back(Value::Int(x));
                     if (out.size() > (1u << 17))
                       return MakeError("range longer than 131072 items");
                   }
                   return Value::List(std::move(out));
                 }));
  g.emplace_back("strftime_now", Value::Func([](const CallArgs& a) -> Result<Value> {
                   if (a.positional.empty() || !a.positional[0].is_string())
                     return MakeError("strftime_now needs a format string");
                   const std::time_t now = std::time(nullptr);
                   std::tm tm{};
                   localtime_r(&now, &tm);
                   char buf[256];
                   const size_t len =
                       std::strftime(buf, sizeof buf, a.positional[0].s.c_str(), &tm);
                   return Value::Str(std::string(buf, len));
                 }));
  return g;
}

}  // namespace hqekv::jinja
