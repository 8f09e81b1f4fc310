#include "eval/runner.h"

#include <chrono>
#include <cstring>

namespace hqekv::eval {
namespace {
double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

PreparedInstance Prepare(const EvalModel& model, const TaskInstance& task) {
  PreparedInstance p;
  p.task = task;
  p.prompt = model.Encode(task.prefill, /*add_bos=*/true);
  if (task.scoring == Scoring::kTeacherForced) p.continuation = model.Encode(task.continuation, false);
  return p;
}

int RequiredContext(const PreparedInstance& inst) {
  const int extra = inst.task.scoring == Scoring::kTeacherForced
                        ? static_cast<int>(inst.continuation.size())
                        : inst.task.max_new_tokens;
  return static_cast<int>(inst.prompt.size()) + extra;
}

Result<InstanceResult> RunInstance(EvalModel& model, KvCache& cache, PreparedInstance* inst,
                                   bool record_ref) {
  const int V = model.VocabSize();
  const TaskInstance& t = inst->task;
  if (inst->prompt.empty()) return MakeError("task " + t.task + ": empty prompt");
  if (RequiredContext(*inst) > cache.geometry().max_ctx)
    return MakeError("task " + t.task + ": needs " + std::to_string(RequiredContext(*inst)) +
                     " positions, the cache holds " + std::to_string(cache.geometry().max_ctx));
  cache.Reset();
  InstanceResult r;
  std::vector<float> logits;
  const int np = static_cast<int>(inst->prompt.size());
  auto t0 = std::chrono::steady_clock::now();
  HQEKV_RETURN_IF_ERROR(model.Forward(cache, inst->prompt.data(), np, 0, true, &logits));
  r.prefill_seconds = Since(t0);
  r.prefill_tokens = np;
  if (static_cast<int>(logits.size()) != V) return MakeError("model returned logits of the wrong size");
  if (record_ref) inst->ref_logits.clear();
  const bool have_ref = !record_ref && !inst->ref_logits.empty();

  t0 = std::chrono::steady_clock::now();
  if (t.scoring == Scoring::kTeacherForced) {
    const int nc = static_cast<int>(inst->continuation.size());
    int scored = 0;
    for (int i = 0; i < nc; ++i) {
      if (i > 0) {  // feed the previous continuation token
        const int32_t tok = inst->continuation[i - 1];
        HQEKV_RETURN_IF_ERROR(model.Forward(cache, &tok, 1, np + i - 1, false, &logits));
        ++r.decode_tokens;
      }
      if (i < t.score_from) continue;
      const float* ref = nullptr;
      if (record_ref) {
        inst->ref_logits.insert(inst->ref_logits.end(), logits.begin(), logits.end());
      } else if (have_ref) {
        if (static_cast<size_t>(scored + 1) * V > inst->ref_logits.size())
          return MakeError("reference logits do not match the instance");
        ref = inst->ref_logits.data() + static_cast<size_t>(scored) * V;
      }
      r.tf.Add(logits.data(), ref, V, inst->continuation[i]);
      ++scored;
    }
  } else {
    std::vector<int32_t> gen;
    for (int i = 0; i < t.max_new_tokens; ++i) {
      if (i == 0) {
        if (record_ref) inst->ref_logits = logits;
        if (have_ref) {
          r.first_kl = KlFromLogits(inst->ref_logits.data(), logits.data(), V);
          r.first_agree = Argmax(logits.data(), V) == Argmax(inst->ref_logits.data(), V);
        }
      }
      const int32_t tok = Argmax(logits.data(), V);
      if (model.IsEndOfGeneration(tok)) break;
      gen.push_back(tok);
      if (model.Decode({tok}).find('\n') != std::string::npos) break;
      if (i + 1 == t.max_new_tokens) break;
      HQEKV_RETURN_IF_ERROR(model.Forward(cache, &tok, 1, np + i, false, &logits));
      ++r.decode_tokens;
    }
    r.generated = model.Decode(gen);
    r.correct = ExactMatch(r.generated, t.answers);
  }
  r.decode_seconds = Since(t0);
  r.stats = cache.Stats();
  return r;
}

}  // namespace hqekv::eval
