// Evaluation suites and the matrix of cells they expand to.
//
// A cell is one (task configuration, KV policy spec) pair, or one (speed
// configuration, policy spec) pair, with a config hash that keys its cached
// result (DIR/cells/<hash>.json). Eviction and hybrid policies are run at
// every memory budget of --bits (spec gets "bits=B": the bytes of a B-bit
// cache); quantization policies at their natural bits, once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "eval/run/tasks.h"

namespace hqekv::eval {

struct QualityTask {
  TaskSpec spec;
  std::string corpus;  // bundled text name: "tinystories", "wiki", "pg11"
  int seeds = 4;       // instances (seed 0..seeds-1, mixed with the base seed)
};

struct SpeedConfig {
  std::vector<int> contexts;  // prompt tokens prefilled before decoding
  int decode_tokens = 32;     // greedy tokens decoded after the prompt
  std::string corpus = "tinystories";
};

struct PolicyPoint {
  std::string spec;    // passed to MakeKvCache, e.g. "snapkv:bits=3.2"
  std::string family;  // name before ':', e.g. "snapkv"
  double budget = -1;  // the bits=B asked for; -1 for natural-bit policies
};

struct Suite {
  std::string name;
  std::vector<QualityTask> tasks;
  SpeedConfig speed;
  std::vector<PolicyPoint> policies;
  uint64_t base_seed = 1234;
  // false (default): instance i of a task configuration is seeded from the
  // base seed, i AND the configuration (task key + corpus), so N seeds give N
  // distinct instances in every cell and different cells (depths, contexts)
  // get independent instances. true: the paired design -- instance i uses
  // the same seed in every configuration (the same key at every depth).
  bool paired_seeds = false;
};

// The seed of instance i of `qt` in `suite` (see Suite::paired_seeds).
uint64_t InstanceSeed(const Suite& suite, const QualityTask& qt, int i);

// Policy families that take a memory budget (bits=B).
bool IsBudgetedFamily(const std::string& family);

// Expands policy specs over budgets: a budgeted family without a budget key
// (bits=, ratio=, ratios=, profile=, heavy=, window= for streaming...) is run
// at every budget; anything else is used as given. Duplicates are removed,
// order kept.
std::vector<PolicyPoint> ExpandPolicies(const std::vector<std::string>& specs,
                                        const std::vector<double>& budgets);

// The built-in suites. trained_ctx caps the context lengths (the stories
// model was trained on 512 positions); kv_specs / budgets override the
// suite's defaults when non-empty; seeds > 0 overrides the instance count.
Result<Suite> MakeSuite(const std::string& name, int trained_ctx,
                        const std::vector<std::string>& kv_specs,
                        const std::vector<double>& budgets, int seeds);

// Parses "2,3.2,4" (each in (0, 32]).
Result<std::vector<double>> ParseBudgets(const std::string& list);

}  // namespace hqekv::eval
