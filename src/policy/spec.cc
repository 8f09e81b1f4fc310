#include "policy/spec.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
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
  if (!ranges.empty()) {
    std::string out;
    for (const LayerRangeSpec& r : ranges) {
      out += (out.empty() ? "" : ",") + std::to_string(r.first);
      if (r.last != r.first) out += "-" + (r.last < 0 ? std::string() : std::to_string(r.last));
      out += ":" + r.spec.Canonical();
    }
    return out;
  }
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

namespace {

// NAME[:key=value,...] or global:SPEC[,local:fp16] (no layer ranges).
Result<PolicySpec> ParseSinglePolicySpec(const std::string& text) {
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

// A part of a ranged spec starts with "RANGE:" (policy names never start
// with a digit or '-'), "global:" or "local:".
bool StartsLayerPart(const std::string& item, std::string* head) {
  const std::string t = Trim(item);
  const size_t colon = t.find(':');
  if (colon == std::string::npos) return false;
  *head = Trim(t.substr(0, colon));
  if (*head == "global" || *head == "local") return true;
  return !head->empty() &&
         (std::isdigit(static_cast<unsigned char>((*head)[0])) || (*head)[0] == '-');
}

bool IsRangeHead(const std::string& head) { return head != "global" && head != "local"; }

Result<int> ParseLayerIndex(const std::string& s, const std::string& range) {
  const std::string t = Trim(s);
  if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos)
    return MakeError("--kv layer range '" + range +
                     "': expected A, A-B or A- with 0-based layer numbers");
  return std::atoi(t.c_str());
}

Result<LayerRangeSpec> ParseLayerRange(const std::string& head, const std::string& spec_text) {
  LayerRangeSpec r;
  r.text = head;
  const size_t dash = head.find('-');
  HQEKV_ASSIGN_OR_RETURN(r.first, ParseLayerIndex(head.substr(0, dash), head));
  if (dash == std::string::npos) {
    r.last = r.first;
  } else if (Trim(head.substr(dash + 1)).empty()) {
    r.last = -1;
  } else {
    HQEKV_ASSIGN_OR_RETURN(r.last, ParseLayerIndex(head.substr(dash + 1), head));
    if (r.last < r.first)
      return MakeError("--kv layer range '" + head + "': the end comes before the start");
  }
  auto one = ParseSinglePolicySpec(spec_text);
  if (!one.ok()) return MakeError("--kv layer range '" + head + "': " + one.message());
  if (Trim(spec_text).rfind("global:", 0) == 0)
    return MakeError("--kv layer range '" + head + "': global: cannot be given inside a range");
  r.spec = std::move(*one);
  return r;
}

}  // namespace

Result<PolicySpec> ParseSpec(const std::string& text) {
  // Split at the commas that start a part; the others belong to a policy's
  // key=value list.
  std::vector<std::pair<std::string, std::string>> parts;  // head ("" for none), text
  std::stringstream ss(text);
  std::string item, head;
  bool ranged = false;
  while (std::getline(ss, item, ',')) {
    if (StartsLayerPart(item, &head)) {
      ranged = ranged || IsRangeHead(head);
      const std::string t = Trim(item);
      parts.emplace_back(head, t.substr(t.find(':') + 1));
    } else if (parts.empty()) {
      parts.emplace_back("", item);
    } else {
      parts.back().second += "," + item;
    }
  }
  if (!ranged) return ParseSinglePolicySpec(text);
  if (Trim(text).back() == ',') return MakeError("KV policy '" + Trim(text) + "': trailing ','");
  PolicySpec out;
  for (const auto& [h, body] : parts) {
    if (h.empty())
      return MakeError("KV policy '" + Trim(text) + "': '" + Trim(body) +
                       "' comes before any layer range (write RANGE:SPEC, e.g. 0-3:fp16)");
    if (h == "global")
      return MakeError("KV policy '" + Trim(text) +
                       "': global: cannot be combined with layer ranges (ranges apply to the "
                       "global layers; write 0-:SPEC for all of them)");
    if (h == "local") {
      if (Trim(body) != "fp16")
        return MakeError("KV policy '" + Trim(text) + "': local:" + Trim(body) +
                         " is not supported (window layers are fp16 rings; local:fp16)");
      continue;
    }
    HQEKV_ASSIGN_OR_RETURN(LayerRangeSpec r, ParseLayerRange(h, body));
    const int64_t end = r.last < 0 ? std::numeric_limits<int64_t>::max() : r.last;
    for (const LayerRangeSpec& o : out.ranges) {
      const int64_t oend = o.last < 0 ? std::numeric_limits<int64_t>::max() : o.last;
      if (r.first <= oend && o.first <= end)
        return MakeError("--kv layer ranges '" + o.text + "' and '" + r.text + "' overlap");
    }
    out.ranges.push_back(std::move(r));
  }
  const LayerRangeSpec* main = &out.ranges.front();
  for (const LayerRangeSpec& r : out.ranges) {
    if (r.first > main->first) main = &r;
  }
  out.name = main->spec.name;
  out.values = main->spec.values;
  out.given = main->spec.given;
  return out;
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
