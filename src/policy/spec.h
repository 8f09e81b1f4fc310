// The `--kv SPEC` grammar, parsed in one place: NAME[:key=value,...].
//
// Every policy, its parameters, their defaults, ranges and help text, and the
// function that creates its cache live in one table (PolicyTable, one row per
// policy in policy/policy_table.cc); ParseSpec checks a spec against it and
// returns the normalized values (defaults filled in). `hqekv policies` prints
// the table. Adding a policy: docs/checklists/add-policy.md.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "core/status.h"

namespace hqekv::policy {

struct CacheContext;  // policy/cache_context.h
struct PolicySpec;

enum class ParamType {
  kInt,     // integer in [min, max]
  kReal,    // real number in [min, max]
  kChoice,  // one of `choices` (still numeric text, e.g. kivi bits 2|4)
  kText,    // free text (file names, r4/r2/r1/r0 lists)
};

struct ParamInfo {
  std::string key;
  ParamType type = ParamType::kInt;
  std::string def;  // default as text; "" = no default (optional or budget key)
  double min = 0, max = 0;
  std::vector<std::string> choices;
  std::string help;
  // A key that fixes the cache's memory (keep=, bits= of an eviction policy,
  // hqekv's bits= / ratios= / profile=, a fixed window): `eval` runs a
  // policy without one at every --bits budget (eval/run/suite.h).
  bool budget = false;
};

// Creates the cache of a parsed spec (its name is this row's). Errors name
// the part at fault: a value the geometry cannot hold, an unreadable
// profile, a profile made for another model.
using CreateFn = Result<std::unique_ptr<KvCache>> (*)(const PolicySpec& spec, const KvGeometry& g,
                                                      const CacheContext& ctx);

struct PolicyInfo {
  std::string name;
  std::string help;
  std::vector<ParamInfo> params;
  // Groups of keys of which at most one may be given (e.g. the budget forms
  // keep / bits / window of an eviction policy).
  std::vector<std::vector<std::string>> exclusive;
  CreateFn create = nullptr;
};

// All policies, in the order `hqekv policies` lists them.
const std::vector<PolicyInfo>& PolicyTable();
const PolicyInfo* FindPolicy(const std::string& name);

struct LayerRangeSpec;

// A parsed spec. `values` holds every key that was given or has a default;
// `given` only those the user wrote.
struct PolicySpec {
  std::string name;
  std::map<std::string, std::string> values;
  std::map<std::string, std::string> given;

  bool Has(const std::string& key) const { return values.count(key) != 0; }
  bool Given(const std::string& key) const { return given.count(key) != 0; }
  double Num(const std::string& key) const;        // 0 if absent
  int Int(const std::string& key) const;           // 0 if absent
  std::string Text(const std::string& key) const;  // "" if absent
  // NAME[:key=value,...] with the given keys in table order (for Describe());
  // with ranges, "A-B:NAME[:...],C-:NAME[:...]".
  std::string Canonical() const;

  // Layer ranges (`0-3:fp16,4-:hqekv:bits=3`): one spec per range of model
  // layers; name, values and given are then those of the range that starts
  // last. Empty for a one-policy spec. policy::CreateCache checks the ranges
  // against the model (every global layer in exactly one range).
  std::vector<LayerRangeSpec> ranges;
};

struct LayerRangeSpec {
  int first = 0;
  int last = -1;     // -1: through the model's last layer ("4-")
  std::string text;  // as written, for messages ("4-")
  PolicySpec spec;   // never has ranges itself
};

// Parses "NAME[:key=value,...]", the layer classes "global:SPEC[,local:fp16]"
// and layer ranges "RANGE:SPEC[,RANGE:SPEC...][,local:fp16]" where RANGE is
// A, A-B or A- (model layer indices, 0-based). Errors name the part at fault: unknown
// policy (with the list of known ones), unknown key (with the policy's keys),
// malformed or repeated pair, non-numeric or out-of-range value, two keys of
// one exclusive group.
Result<PolicySpec> ParseSpec(const std::string& text);

// Whether a policy takes a memory budget (has a budget key), and whether a
// spec gives one.
bool TakesBudget(const PolicyInfo& p);
bool HasBudgetKey(const PolicySpec& spec);

// Human-readable listing of the table (for `hqekv policies`).
std::string PoliciesHelp();

}  // namespace hqekv::policy
