#include "eval/run/runner.h"

#include <algorithm>
#include <chrono>

#include "lm/logprob.h"
#include "lm/protocol.h"

namespace hqekv::eval {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// EvalModel as the protocol's lm::StepModel.
class EvalStep final : public lm::StepModel {
 public:
  explicit EvalStep(EvalModel& model) : model_(model) {}
  int vocab() const override { return model_.VocabSize(); }
  Status Forward(KvCache& cache, const int32_t* tokens, int n, int pos0, bool is_prefill,
                 float* logits) override {
    HQEKV_RETURN_IF_ERROR(model_.Forward(cache, tokens, n, pos0, is_prefill, &buf_));
    if (static_cast<int>(buf_.size()) != vocab())
      return MakeError("model returned logits of the wrong size");
    if (logits) std::copy(buf_.begin(), buf_.end(), logits);
    return Status::Ok();
  }

 private:
  EvalModel& model_;
  std::vector<float> buf_;
};

// kTeacherForced: prompt + continuation through lm::RunWindow (prefill =
// the prompt); the logits predicting continuation[c] are scored for
// c >= score_from.
Status RunTeacherForced(EvalModel& model, KvCache& cache, PreparedInstance* inst, bool record_ref,
                        InstanceResult* r) {
  const int V = model.VocabSize();
  const int np = static_cast<int>(inst->prompt.size());
  const int nc = static_cast<int>(inst->continuation.size());
  // The last continuation token is only predicted, never fed.
  std::vector<int32_t> tokens = inst->prompt;
  if (nc > 1) tokens.insert(tokens.end(), inst->continuation.begin(), inst->continuation.end() - 1);
  if (record_ref) inst->ref_logits.clear();
  const bool have_ref = !record_ref && !inst->ref_logits.empty();
  int scored = 0;
  lm::WindowHooks hooks;
  hooks.on_logits = [&](int pos, float* logits) -> Status {
    const int c = pos - (np - 1);  // the logits after `pos` predict continuation[c]
    if (c >= nc)
      return Status::Ok();  // no continuation: the prompt's logits predict nothing scored
    const float* ref = nullptr;
    if (record_ref) {
      inst->ref_logits.insert(inst->ref_logits.end(), logits, logits + V);
    } else if (have_ref) {
      if (static_cast<size_t>(scored + 1) * V > inst->ref_logits.size())
        return MakeError("reference logits do not match the instance");
      ref = inst->ref_logits.data() + static_cast<size_t>(scored) * V;
    }
    r->tf.Add(logits, ref, V, inst->continuation[c]);
    ++scored;
    return Status::Ok();
  };
  auto t0 = std::chrono::steady_clock::now();
  hooks.after_prefill = [&] {
    r->prefill_seconds = SecondsSince(t0);
    t0 = std::chrono::steady_clock::now();
  };
  EvalStep step(model);
  const lm::Window w{tokens.data(), static_cast<int>(tokens.size()), np,
                     np - 1 + std::max(inst->task.score_from, 0)};
  HQEKV_RETURN_IF_ERROR(lm::RunWindow(step, cache, w, hooks));
  r->decode_seconds = SecondsSince(t0);
  r->prefill_tokens = np;
  r->decode_tokens = w.n - np;
  return Status::Ok();
}

}  // namespace

PreparedInstance Prepare(const EvalModel& model, const TaskInstance& task) {
  PreparedInstance p;
  p.task = task;
  p.prompt = model.Encode(task.prefill, /*add_bos=*/true);
  if (task.scoring == Scoring::kTeacherForced)
    p.continuation = model.Encode(task.continuation, false);
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
  InstanceResult r;
  if (t.scoring == Scoring::kTeacherForced) {
    HQEKV_RETURN_IF_ERROR(RunTeacherForced(model, cache, inst, record_ref, &r));
    r.stats = cache.Stats();
    return r;
  }

  // kExactMatch: prefill, then greedy decoding.
  cache.Reset();
  std::vector<float> logits;
  const int np = static_cast<int>(inst->prompt.size());
  auto t0 = std::chrono::steady_clock::now();
  HQEKV_RETURN_IF_ERROR(model.Forward(cache, inst->prompt.data(), np, 0, true, &logits));
  r.prefill_seconds = SecondsSince(t0);
  r.prefill_tokens = np;
  if (static_cast<int>(logits.size()) != V)
    return MakeError("model returned logits of the wrong size");
  if (record_ref) inst->ref_logits.clear();
  const bool have_ref = !record_ref && !inst->ref_logits.empty();

  t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> gen;
  for (int i = 0; i < t.max_new_tokens; ++i) {
    if (i == 0) {
      if (record_ref) inst->ref_logits = logits;
      if (have_ref) {
        r.first_kl = lm::KlFromLogits(inst->ref_logits.data(), logits.data(), V);
        r.first_agree = lm::Argmax(logits.data(), V) == lm::Argmax(inst->ref_logits.data(), V);
      }
    }
    const int32_t tok = lm::Argmax(logits.data(), V);
    if (model.IsEndOfGeneration(tok)) break;
    gen.push_back(tok);
    if (model.Decode({tok}).find('\n') != std::string::npos) break;
    if (i + 1 == t.max_new_tokens) break;
    HQEKV_RETURN_IF_ERROR(model.Forward(cache, &tok, 1, np + i, false, &logits));
    ++r.decode_tokens;
  }
  r.generated = model.Decode(gen);
  r.correct = ExactMatch(r.generated, t.answers);
  r.decode_seconds = SecondsSince(t0);
  r.stats = cache.Stats();
  return r;
}

}  // namespace hqekv::eval
