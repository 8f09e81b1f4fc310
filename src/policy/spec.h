// The `--kv SPEC` grammar, parsed in one place: NAME[:key=value,...].
//
// Every policy, its parameters, their defaults, ranges and help text live in
// one table (PolicyTable); ParseSpec checks a spec against it and returns the
// normalized values (defaults filled in). `hqekv policies` prints the table.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace hqekv::policy {

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
};

struct PolicyInfo {
  std::string name;
  std::string help;
  std::vector<ParamInfo> params;
  // Groups of keys of which at most one may be given (e.g. the budget forms
  // keep / bits / window of an eviction policy).
  std::vector<std::vector<std::string>> exclusive;
};

// All policies, in the order `hqekv policies` lists them.
const std::vector<PolicyInfo>& PolicyTable();
const PolicyInfo* FindPolicy(const std::string& name);

// A parsed spec. `values` holds every key that was given or has a default;
// `given` only those the user wrote.
struct PolicySpec {
  std::string name;
  std::map<std::string, std::string> values;
  std::map<std::string, std::string> given;

  bool Has(const std::string& key) const { return values.count(key) != 0; }
  bool Given(const std::string& key) const { return given.count(key) != 0; }
  double Num(const std::string& key) const;       // 0 if absent
  int Int(const std::string& key) const;          // 0 if absent
  std::string Text(const std::string& key) const;  // "" if absent
  // NAME[:key=value,...] with the given keys in table order (for Describe()).
  std::string Canonical() const;
};

// Parses "NAME[:key=value,...]". Errors name the part at fault: unknown
// policy (with the list of known ones), unknown key (with the policy's keys),
// malformed or repeated pair, non-numeric or out-of-range value, two keys of
// one exclusive group.
Result<PolicySpec> ParseSpec(const std::string& text);

// Human-readable listing of the table (for `hqekv policies`).
std::string PoliciesHelp();

}  // namespace hqekv::policy
