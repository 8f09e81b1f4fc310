// Runs one task instance through a model with one KV cache.
//
// Protocol (lm/protocol.h, the prefill-then-teacher-force protocol of
// `hqekv ppl --kv` and calibration):
//   1. the prompt (BOS + prefill text) is run as one prefill batch; the cache
//      compresses at the end of it as its policy says;
//   2. kExactMatch: greedy decoding of up to max_new_tokens tokens (stops at
//      end of generation or a newline), scored by ExactMatch;
//      kTeacherForced: the continuation tokens are fed one by one (decode
//      path, so policies may compress further); the logits before each
//      continuation token from index score_from on are scored.
// The reference run (fp16 cache) records its logits so that the runs of
// other caches report KL(ref || test) and top-1 agreement at the same steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "eval/run/eval_model.h"
#include "eval/run/scoring.h"
#include "eval/run/tasks.h"

namespace hqekv::eval {

// An instance with its tokens, plus what the reference cache produced.
struct PreparedInstance {
  TaskInstance task;
  std::vector<int32_t> prompt;        // BOS + prefill
  std::vector<int32_t> continuation;  // kTeacherForced only
  // Reference logits, [scored step][vocab]: for kTeacherForced one row per
  // scored continuation token; for kExactMatch one row (the first generated
  // token). Empty until the reference has run.
  std::vector<float> ref_logits;
};

PreparedInstance Prepare(const EvalModel& model, const TaskInstance& task);

struct InstanceResult {
  bool correct = false;   // kExactMatch
  std::string generated;  // kExactMatch: decoded greedy text
  TeacherForcedStats tf;  // kTeacherForced (kl/agree when ref_logits exist)
  double first_kl = -1;   // kExactMatch: KL(ref || test) of the first answer token, -1 without ref
  bool first_agree = false;  // kExactMatch: same first answer token as the reference
  KvStats stats;             // cache state at the end
  int64_t prefill_tokens = 0, decode_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
};

// Runs `inst` with `cache` (Reset first). record_ref: store this run's logits
// into inst->ref_logits (the reference run); otherwise compare against them
// when present. The total length must fit in cache.geometry().max_ctx.
Result<InstanceResult> RunInstance(EvalModel& model, KvCache& cache, PreparedInstance* inst,
                                   bool record_ref);

// Tokens the instance needs in the cache (prompt + continuation or answer).
int RequiredContext(const PreparedInstance& inst);

}  // namespace hqekv::eval
