#include "tokenizer/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace hqekv::jinja {

const Value* CallArgs::Keyword(std::string_view name) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

const Value* Value::Find(std::string_view key) const {
  if (kind != Kind::kObject) return nullptr;
  for (const auto& [k, v] : *obj)
    if (k == key) return &v;
  return nullptr;
}

void Value::Set(const std::string& key, Value v) {
  for (auto& [k, old] : *obj) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  obj->emplace_back(key, std::move(v));
}

const char* KindName(Value::Kind k) {
  switch (k) {
    case Value::Kind::kUndefined:
      return "undefined";
    case Value::Kind::kNone:
      return "none";
    case Value::Kind::kBool:
      return "boolean";
    case Value::Kind::kInt:
      return "integer";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "string";
    case Value::Kind::kArray:
      return "list";
    case Value::Kind::kObject:
      return "dict";
    case Value::Kind::kFunction:
      return "function";
  }
  return "?";
}

bool Truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.b;
    case Value::Kind::kInt:
      return v.i != 0;
    case Value::Kind::kFloat:
      return v.f != 0;
    case Value::Kind::kString:
      return !v.s.empty();
    case Value::Kind::kArray:
      return !v.arr->empty();
    case Value::Kind::kObject:
      return !v.obj->empty();
    case Value::Kind::kFunction:
      return true;
  }
  return false;
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.number() == b.number();
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kBool:
      return a.b == b.b;
    case Value::Kind::kString:
      return a.s == b.s;
    case Value::Kind::kArray:
      if (a.arr->size() != b.arr->size()) return false;
      for (size_t k = 0; k < a.arr->size(); ++k)
        if (!Equal((*a.arr)[k], (*b.arr)[k])) return false;
      return true;
    case Value::Kind::kObject:
      if (a.obj->size() != b.obj->size()) return false;
      for (const auto& [k, v] : *a.obj) {
        const Value* o = b.Find(k);
        if (!o || !Equal(v, *o)) return false;
      }
      return true;
    default:
      return a.fn == b.fn;
  }
}

namespace {

// Shortest text that reads back as the same double (JavaScript's
// Number.prototype.toString for the magnitudes chat templates meet).
std::string JinjaFloatText(double f, bool integral_with_point) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, f);
  std::string s(buf, r.ptr);
  if (integral_with_point && s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

void AppendJsonString(std::string* out, const std::string& s) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

void AppendJson(std::string* out, const Value& v, int indent, int depth) {
  auto newline = [&](int d) {
    *out += '\n';
    out->append(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
    case Value::Kind::kFunction:
      *out += "null";
      return;
    case Value::Kind::kBool:
      *out += v.b ? "true" : "false";
      return;
    case Value::Kind::kInt:
      *out += std::to_string(v.i);
      return;
    case Value::Kind::kFloat:
      *out += JinjaFloatText(v.f, /*integral_with_point=*/false);
      return;
    case Value::Kind::kString:
      AppendJsonString(out, v.s);
      return;
    case Value::Kind::kArray:
    case Value::Kind::kObject: {
      const bool is_arr = v.is_array();
      const size_t n = is_arr ? v.arr->size() : v.obj->size();
      *out += is_arr ? '[' : '{';
      for (size_t k = 0; k < n; ++k) {
        if (k > 0) *out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        if (is_arr) {
          AppendJson(out, (*v.arr)[k], indent, depth + 1);
        } else {
          AppendJsonString(out, (*v.obj)[k].first);
          *out += ": ";
          AppendJson(out, (*v.obj)[k].second, indent, depth + 1);
        }
      }
      if (indent >= 0 && n > 0) newline(depth);
      *out += is_arr ? ']' : '}';
      return;
    }
  }
}

}  // namespace

std::string ToText(const Value& v, bool float_point) {
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return "";
    case Value::Kind::kBool:
      return v.b ? "true" : "false";
    case Value::Kind::kInt:
      return std::to_string(v.i);
    case Value::Kind::kFloat:
      return JinjaFloatText(v.f, float_point);
    case Value::Kind::kString:
      return v.s;
    case Value::Kind::kFunction:
      return "<function>";
    default:
      return ToJson(v, -1);
  }
}

std::string ToJson(const Value& v, int indent) {
  std::string out;
  AppendJson(&out, v, indent, 0);
  return out;
}

Value FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::Int(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = j.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)
        return Value::Int(static_cast<int64_t>(d));
      return Value::Float(d);
    }
    case nlohmann::ordered_json::value_t::string:
      return Value::Str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(FromJson(e));
      return Value::List(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (const auto& [k, e] : j.items()) o.emplace_back(k, FromJson(e));
      return Value::Dict(std::move(o));
    }
    default:
      return Value();
  }
}

std::vector<std::string> CodePoints(const std::string& s) {
  std::vector<std::string> out;
  for (size_t k = 0; k < s.size();) {
    const auto c = static_cast<unsigned char>(s[k]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    if (k + n > s.size()) n = 1;
    out.push_back(s.substr(k, n));
    k += n;
  }
  return out;
}

std::string StripSpace(std::string_view s, bool left, bool right) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && space(s[b])) ++b;
  if (right)
    while (e > b && space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace hqekv::jinja
