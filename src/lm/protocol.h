// The prefill-then-teacher-force protocol: how `hqekv ppl --kv`, calibration
// and the evaluation tasks run a window of tokens through a model with the
// KV cache under test, so that every prediction scored is made after the
// cache's compression event.
//
// On a window t[0..n) with prefill length P (1 <= P <= n):
//   1. Reset the cache; run t[0..P) as ONE batch (is_prefill = true: the
//      policy compresses at its EndBatch).
//   2. Teacher-force t[P..n) one token at a time (is_prefill = false; the
//      policy may compress again at decode events).
// The logits after position i (they predict t[i+1]) go to the caller for
// every i in [first_scored, n), first_scored >= P - 1:
//   - ppl and eval pass the window without its last token and
//     first_scored = P - 1 (every scored position has a true next token);
//   - calibration passes the whole window and first_scored = P (the loss is
//     the KL after each teacher-forced token).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "cache/kv_cache.h"
#include "core/status.h"
#include "model/llama.h"

namespace hqekv::lm {

// A model as the protocol drives it. Adapters: LlamaStep (below) and the
// evaluation's EvalModel (eval/run/runner.cc).
class StepModel {
 public:
  virtual ~StepModel() = default;
  virtual int vocab() const = 0;
  // Runs tokens[0..n) at positions pos0..pos0+n-1 through `cache` as one
  // batch (cache.EndBatch(n, is_prefill) once at the end). logits: null, or
  // [vocab] to receive the next-token logits of the last of the n tokens.
  virtual Status Forward(KvCache& cache, const int32_t* tokens, int n, int pos0, bool is_prefill,
                         float* logits) = 0;
};

// StepModel over the engine's LlamaModel (no logits computed when none are asked).
class LlamaStep final : public StepModel {
 public:
  explicit LlamaStep(LlamaModel& model) : model_(model) {}
  int vocab() const override { return model_.vocab_size(); }
  Status Forward(KvCache& cache, const int32_t* tokens, int n, int pos0, bool is_prefill,
                 float* logits) override;

 private:
  LlamaModel& model_;
  std::vector<int32_t> pos_;
};

struct Window {
  const int32_t* tokens = nullptr;  // t[0..n)
  int n = 0;
  int prefill = 0;       // P, 1 <= P <= n
  int first_scored = 0;  // first position whose logits are scored, >= P - 1
};

struct WindowHooks {
  // Called with (position i, logits[vocab] after i); the logits may be
  // modified in place (they are overwritten by the next step).
  std::function<Status(int pos, float* logits)> on_logits;
  // Called right after the prefill batch (before its logits are scored).
  std::function<void()> after_prefill;
};

// Runs the protocol on `w` with `cache` (Reset first). The caller checks that
// w.n fits the cache's max_ctx; errors of the model and of on_logits pass through.
Status RunWindow(StepModel& model, KvCache& cache, const Window& w, const WindowHooks& hooks);

}  // namespace hqekv::lm
