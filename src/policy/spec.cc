#include "policy/spec.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>

namespace hqekv::policy {
namespace {

ParamInfo Int(std::string key, std::string def, double lo, double hi, std::string help) {
  return {std::move(key), ParamType::kInt, std::move(def), lo, hi, {}, std::move(help)};
}
ParamInfo Real(std::string key, std::string def, double lo, double hi, std::string help) {
  return {std::move(key), ParamType::kReal, std::move(def), lo, hi, {}, std::move(help)};
}
ParamInfo Choice(std::string key, std::string def, std::vector<std::string> c, std::string help) {
  return {std::move(key), ParamType::kChoice, std::move(def), 0, 0, std::move(c), std::move(help)};
}
ParamInfo Text(std::string key, std::string help) {
  return {std::move(key), ParamType::kText, "", 0, 0, {}, std::move(help)};
}

// Budget keys shared by every eviction policy. keep is a fraction of the
// tokens seen; bits is the memory of a B-bit cache, in true bytes (see
// policy/budget.h). Upper bound of bits: a 16-bit budget is the fp16 cache.
ParamInfo KeepParam() {
  return Real("keep", "", 1e-6, 1.0,
              "kept fraction of the tokens seen (default 0.5 when no budget key is given)");
}
ParamInfo BitsBudgetParam() {
  return Real("bits", "", 0.01, 15.99,
              "budget = the true bytes of a B-bit cache of the tokens seen (own bookkeeping included)");
}

std::vector<PolicyInfo> BuildTable() {
  std::vector<PolicyInfo> t;
  t.push_back({"fp16", "uncompressed fp16 cache (the baseline)", {}, {}});
  t.push_back({"fp32", "uncompressed fp32 cache (the oracle)", {}, {}});
  t.push_back({"fp8",
               "FP8 E4M3 codes, one fp16 scale per (layer, KV head, 32-token chunk); the newest "
               "tokens wait in an fp16 residual until a chunk fills",
               {},
               {}});
  t.push_back({"int8",
               "symmetric int8, one fp16 scale per token and KV head; sealed in 32-token chunks "
               "from an fp16 residual",
               {},
               {}});
  t.push_back({"kivi",
               "KIVI: K per-channel over 32-token groups, V per-token over groups of channels; "
               "the newest tokens stay fp16 until `residual` accumulate, then full groups are "
               "quantized",
               {Choice("bits", "2", {"2", "4"}, "bits per K and V code"),
                Int("group", "32", 1, 4096,
                    "V channels per group (clamped to head_dim; must divide it)"),
                Int("residual", "128", 32, 1 << 20,
                    "fp16 residual length R, a multiple of 32: quantize when R tokens wait")},
               {}});
  t.push_back({"streaming",
               "StreamingLLM: the first `sink` tokens plus the newest tokens (a window)",
               {Int("sink", "4", 0, 1 << 20, "attention-sink tokens kept from the start"),
                Int("window", "", 1, 1 << 24, "fixed recent window (tokens); or give keep/bits"),
                KeepParam(), BitsBudgetParam()},
               {{"window", "keep", "bits"}}});
  t.push_back({"h2o",
               "H2O: heavy hitters by cumulative attention of every past query (summed over the "
               "query heads of each KV head) plus a recent window, evicted every step",
               {Int("heavy", "", 0, 1 << 24, "fixed heavy-hitter count (with recent)"),
                Int("recent", "", 0, 1 << 24, "fixed recent-window count (with heavy)"),
                Real("recent_share", "0.5", 0.0, 1.0,
                     "share of a keep/bits budget given to the recent window"),
                KeepParam(), BitsBudgetParam()},
               {{"heavy", "keep", "bits"}, {"recent", "keep", "bits"}}});
  t.push_back({"snapkv",
               "SnapKV: once at the end of prefill, the last `window` prompt queries vote "
               "(attention summed over the window and the query heads of each KV head, 1-D max "
               "pooling) and each KV head keeps its top tokens plus the window; decode tokens "
               "are appended unchanged",
               {Int("window", "32", 1, 1 << 16, "observation window (last prompt queries)"),
                Int("kernel", "7", 1, 1025, "max-pooling width (odd)"), KeepParam(),
                BitsBudgetParam()},
               {{"keep", "bits"}}});
  t.push_back({"pyramid",
               "PyramidKV: SnapKV selection with per-layer budgets shrinking linearly with depth "
               "(first layer 2a - a/beta, last a/beta, a = mean budget beyond the window), same "
               "total",
               {Real("beta", "20", 1.0, 1e6, "ratio of the mean to the smallest layer budget"),
                Int("window", "32", 1, 1 << 16, "observation window (last prompt queries)"),
                Int("kernel", "7", 1, 1025, "max-pooling width (odd)"), KeepParam(),
                BitsBudgetParam()},
               {{"keep", "bits"}}});
  t.push_back(
      {"hqekv",
       "HqeKV hybrid: 32-token chunks ranked by attention (K) and attention x Range(V) (V), "
       "top chunks fp16, then uniform-4, uniform-2, normal-1, evicted by the tier ratios; "
       "re-ranked at prefill and every 32 tokens, downgrade only",
       {Real("bits", "", 0.01, 16.0,
             "target B_avg = 4 r4 + 2 r2 + r1; built-in Llama-3.1-8B ratios for 2, 2.8, 3.2, 3.25"),
        Text("ratios", "tier ratios r4/r2/r1/r0 (4-bit, 2-bit, 1-bit, evicted), sum 1"),
        Text("profile", "calibration profile JSON {\"ratios\": {\"r4\":..,\"r2\":..,\"r1\":..,\"r0\":..}}"),
        Int("m", "20", 1, 4096, "importance window: the last m queries"),
        Int("fp16_chunks", "2", 0, 1 << 20, "top chunks pinned in fp16"),
        Choice("per_head", "0", {"0", "1"}, "importance per KV head instead of per layer"),
        Choice("hadamard", "0", {"0", "1"}, "Walsh-Hadamard rotation before quantizing"),
        Choice("force", "0", {"0", "1"},
               "use a profile calibrated on another model (checked by the CLI, calib/profile.h)"),
        Choice("decouple", "0", {"0", "1"},
               "separate K and V eviction sets (not supported: the store evicts K and V together)")},
       {{"bits", "ratios", "profile"}}});
  return t;
}

std::string Trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

std::string KnownNames() {
  std::string s;
  for (const auto& p : PolicyTable()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
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
      if (!ParseDouble(v, &d)) return MakeError(where + ": not a number");
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

const std::vector<PolicyInfo>& PolicyTable() {
  static const std::vector<PolicyInfo> table = BuildTable();
  return table;
}

const PolicyInfo* FindPolicy(const std::string& name) {
  for (const auto& p : PolicyTable()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

double PolicySpec::Num(const std::string& key) const {
  auto it = values.find(key);
  if (it == values.end()) return 0.0;
  double d = 0;
  ParseDouble(it->second, &d);
  return d;
}

int PolicySpec::Int(const std::string& key) const { return static_cast<int>(std::lround(Num(key))); }

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
  const std::string t = Trim(text);
  if (t.empty()) return MakeError("empty KV policy spec (known: " + KnownNames() + ")");
  const size_t colon = t.find(':');
  PolicySpec spec;
  spec.name = Trim(t.substr(0, colon));
  const PolicyInfo* p = FindPolicy(spec.name);
  if (!p) {
    return MakeError("unknown KV policy '" + spec.name + "' in '" + t + "' (known: " + KnownNames() +
                     ")");
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
        return MakeError("KV policy '" + spec.name + "': unknown key '" + key + "' (" +
                         KnownKeys(*p) + ")");
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
