// Deterministic evaluation tasks. Each instance is a pure function of
// (task spec, corpus, seed, token counter): prompt text, the text to teacher-
// force and score, or the accepted answers of a greedy generation.
//
// Tasks (see docs/evaluation.md for the protocol of each):
//   passkey  a 5-digit key (or a rare word) stated at depth d of a filler
//            haystack; the question comes after the haystack.
//   multikey RULER-style: n "special magic number for <name>" pairs spread in
//            the haystack, the asked one at depth d.
//   vartrack a chain VAR A = 12345, VAR B = VAR A, ... (plus distractor chains)
//            spread after depth d; asks the value of the chain's last variable.
//   copy     a passage at depth d, repeated at the end: teacher-forced top-1
//            accuracy of the second occurrence (induction / copying).
//   lm       a held-out window: prefill, then teacher-force the continuation
//            (perplexity, KL against the fp16 cache, top-1 agreement).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "eval/run/corpus.h"

namespace hqekv::eval {

// Tokens of `text` encoded alone without BOS (the model's tokenizer, or an
// approximation in tests). Used only to size contexts.
using TokenCounter = std::function<int(const std::string& text)>;

enum class TaskKind { kPasskey, kMultiKey, kVarTrack, kCopy, kLm };
enum class Scoring {
  kExactMatch,     // greedy generation, normalized exact match against `answers`
  kTeacherForced,  // continuation tokens fed one by one; top-1 / NLL / KL scored
};

const char* TaskName(TaskKind k);
Result<TaskKind> ParseTaskName(const std::string& name);

struct TaskSpec {
  TaskKind kind = TaskKind::kPasskey;
  int context_tokens = 256;  // total tokens: BOS + prefill + continuation (upper bound)
  double depth = 0.5;        // retrieval / copy: where the needle starts, in [0, 1]
  bool word_key = false;     // passkey: a rare word instead of 5 digits
  int n_keys = 4;            // multikey: pairs in the haystack (>= 1)
  int n_hops = 3;            // vartrack: assignments in the asked chain (>= 1)
  int n_chains = 3;          // vartrack: chains in all (asked one + distractors)
  int span_tokens = 48;      // copy: passage length; lm: continuation length (tokens)

  std::string Key() const;  // canonical text of every field, for hashes and tables
};

struct TaskInstance {
  std::string task;  // TaskName(kind)
  uint64_t seed = 0;
  int context_tokens = 0;
  double depth = -1;  // -1 when not applicable (lm)
  Scoring scoring = Scoring::kExactMatch;
  std::string prefill;               // encoded with BOS and prefilled at once
  std::string continuation;          // kTeacherForced: encoded without BOS, fed token by token
  int score_from = 0;                // kTeacherForced: first continuation token that is scored
  std::vector<std::string> answers;  // kExactMatch: any of these counts
  int max_new_tokens = 0;            // kExactMatch: greedy tokens generated
  double chance = 0;                 // accuracy of guessing (used to flag "model fails with fp16")
};

// Builds one instance. Errors: invalid spec, corpus too small, or a context
// too short for the fixed parts (the message says how many tokens they need).
Result<TaskInstance> MakeTask(const TaskSpec& spec, const Corpus& corpus, uint64_t seed,
                              const TokenCounter& count);

}  // namespace hqekv::eval
