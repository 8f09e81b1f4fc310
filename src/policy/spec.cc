#include "policy/spec.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

#include "core/closest_name.h"
#include "core/number.h"

namespace hqekv::policy {
namespace {

std::string Trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

// Spec values go through the one checked parser (core/number.h): decimal and
// finite only, so `bits=0x2`, `bits=inf` and `bits=1e999` are refused.
bool ParseDouble(const std::string& s, double* out) {
  Result<double> r = ParseReal(s, "");
  if (!r.ok()) return false;
  *out = *r;
  return true;
}

std::string KnownNames() {
  std::string s;
  for (const auto& p : PolicyTable()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

// "did you mean 'x'? " for a mistyped policy name or key (empty when none is
// close), put before the list of known ones.
std::string DidYouMean(const std::string& word, const std::vector<std::string>& names) {
  const std::string near = ClosestName(word, names);
  return near.empty() ? std::string() : "did you mean '" + near + "'? ";
}

std::string KnownKeys(const PolicyInfo& p) {
  if (p.params.empty()) return "it takes no parameters";
  std::string s = "known: ";
  for (size_t i = 0; i < p.params.size(); ++i) s += (i ? ", " : "") + p.params[i].key;
  return s;
}

std::string RangeText(const ParamInfo& pi) {
  std::ostringstream o;
  o.precision(12);
  if (pi.type == ParamType::kChoice) {
    for (size_t i = 0; i < pi.choices.size(); ++i) o << (i ? "|" : "") << pi.choices[i];
  } else if (pi.type == ParamType::kText) {
    o << "text";
  } else {
    o << "[" << pi.min << ", " << pi.max << "]" << (pi.type == ParamType::kInt ? " integer" : "");
  }
  return o.str();
}

Status CheckValue(const std::string& policy, const ParamInfo& pi, const std::string& v) {
  const std::string where = "KV policy '" + policy + "': " + pi.key + "=" + v;
  switch (pi.type) {
    case ParamType::kText:
      if (v.empty()) return MakeError(where + ": empty value");
      return Status::Ok();
    case ParamType::kChoice:
      for (const auto& c : pi.choices) {
        if (c == v) return Status::Ok();
      }
      return MakeError(where + ": must be one of " + RangeText(pi));
    case ParamType::kInt:
    case ParamType::kReal: {
      double d;
      if (!ParseDouble(v, &d)) return MakeError(where + ": not a number (decimal and finite)");
      if (pi.type == ParamType::kInt && d != std::floor(d)) {
        return MakeError(where + ": must be an integer");
      }
      if (d < pi.min || d > pi.max) return MakeError(where + ": out of range " + RangeText(pi));
      return Status::Ok();
    }
  }
  return Status::Ok();
}

}  // namespace

bool TakesBudget(const PolicyInfo& p) {
  for (const auto& pi : p.params) {
    if (pi.budget) return true;
  }
  return false;
}

bool HasBudgetKey(const PolicySpec& spec) {
  const PolicyInfo* p = FindPolicy(spec.name);
  if (!p) return false;
  for (const auto& pi : p->params) {
    if (pi.budget && spec.Given(pi.key)) return true;
  }
  return false;
}

double PolicySpec::Num(const std::string& key) const {
  auto it = values.find(key);
  if (it == values.end()) return 0.0;
  double d = 0;
  ParseDouble(it->second, &d);
  return d;
}

int PolicySpec::Int(const std::string& key) const {
  return static_cast<int>(std::lround(Num(key)));
}

std::string PolicySpec::Text(const std::string& key) const {
  auto it = values.find(key);
  return it == values.end() ? std::string() : it->second;
}

std::string PolicySpec::Canonical() const {
  std::string s = name;
  const PolicyInfo* p = FindPolicy(name);
  if (!p) return s;
  bool first = true;
  for (const auto& pi : p->params) {
    auto it = given.find(pi.key);
    if (it == given.end()) continue;
    s += (first ? ":" : ",") + pi.key + "=" + it->second;
    first = false;
  }
  return s;
}

Result<PolicySpec> ParseSpec(const std::string& text) {
  std::string t = Trim(text);
  // Layer classes of models with sliding-window layers (cache/window_cache.h):
  // "global:SPEC[,local:fp16]" = SPEC for the global layers; window layers are
  // fp16 rings (the only local form so far). On models without window layers
  // every layer is global.
  if (t.rfind("global:", 0) == 0) {
    t = Trim(t.substr(7));
    const size_t local = t.find(",local:");
    if (local != std::string::npos) {
      const std::string lspec = Trim(t.substr(local + 7));
      if (lspec != "fp16")
        return MakeError("KV policy '" + Trim(text) + "': local:" + lspec +
                         " is not supported (window layers are fp16 rings; local:fp16)");
      t = Trim(t.substr(0, local));
    }
  } else if (t.rfind("local:", 0) == 0) {
    return MakeError("KV policy '" + t + "': write global:SPEC,local:fp16");
  }
  if (t.empty()) return MakeError("empty KV policy spec (known: " + KnownNames() + ")");
  const size_t colon = t.find(':');
  PolicySpec spec;
  spec.name = Trim(t.substr(0, colon));
  const PolicyInfo* p = FindPolicy(spec.name);
  if (!p) {
    std::vector<std::string> names;
    for (const auto& q : PolicyTable()) names.push_back(q.name);
    return MakeError("unknown KV policy '" + spec.name + "' in '" + t + "' (" +
                     DidYouMean(spec.name, names) + "known: " + KnownNames() + ")");
  }
  if (colon != std::string::npos) {
    const std::string rest = t.substr(colon + 1);
    if (Trim(rest).empty()) return MakeError("KV policy '" + t + "': nothing after ':'");
    std::stringstream ss(rest);
    std::string item;
    while (std::getline(ss, item, ',')) {
      const std::string kv = Trim(item);
      const size_t eq = kv.find('=');
      if (kv.empty() || eq == std::string::npos || eq == 0) {
        return MakeError("KV policy '" + t + "': expected key=value, got '" + kv + "'");
      }
      const std::string key = Trim(kv.substr(0, eq)), val = Trim(kv.substr(eq + 1));
      const ParamInfo* pi = nullptr;
      for (const auto& q : p->params) {
        if (q.key == key) pi = &q;
      }
      if (!pi) {
        std::vector<std::string> keys;
        for (const auto& q : p->params) keys.push_back(q.key);
        return MakeError("KV policy '" + spec.name + "': unknown key '" + key + "' (" +
                         DidYouMean(key, keys) + KnownKeys(*p) + ")");
      }
      if (spec.given.count(key)) {
        return MakeError("KV policy '" + spec.name + "': key '" + key + "' given twice");
      }
      HQEKV_RETURN_IF_ERROR(CheckValue(spec.name, *pi, val));
      spec.given[key] = val;
    }
    if (!rest.empty() && rest.back() == ',') {
      return MakeError("KV policy '" + t + "': trailing ','");
    }
  }
  for (const auto& group : p->exclusive) {
    std::vector<std::string> hit;
    for (const auto& k : group) {
      if (spec.given.count(k)) hit.push_back(k);
    }
    if (hit.size() > 1) {
      return MakeError("KV policy '" + spec.name + "': give at most one of " + hit[0] + " and " +
                       hit[1]);
    }
  }
  spec.values = spec.given;
  for (const auto& pi : p->params) {
    if (!pi.def.empty() && !spec.values.count(pi.key)) spec.values[pi.key] = pi.def;
  }
  return spec;
}

std::string PoliciesHelp() {
  std::ostringstream o;
  o << "KV policies: --kv NAME[:key=value,...]\n";
  for (const auto& p : PolicyTable()) {
    o << "\n" << p.name << "\n    " << p.help << "\n";
    for (const auto& pi : p.params) {
      o << "    " << pi.key << "  " << RangeText(pi)
        << (pi.def.empty() ? std::string() : "  default " + pi.def) << "\n        " << pi.help
        << "\n";
    }
    for (const auto& g : p.exclusive) {
      o << "    at most one of:";
      for (const auto& k : g) o << " " << k;
      o << "\n";
    }
  }
  return o.str();
}

}  // namespace hqekv::policy
