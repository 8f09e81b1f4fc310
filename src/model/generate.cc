#include "model/generate.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "model/generate_step.h"

namespace hqekv {

Result<GenerateResult> Generate(LlamaModel& model, KvCache& cache,
                                const std::vector<int32_t>& prompt, Sampler& sampler,
                                const GenerateOptions& opt,
                                const std::function<void(int32_t)>& on_token) {
  using Clock = std::chrono::steady_clock;
  const int ctx = cache.geometry().max_ctx;
  if (prompt.empty()) return MakeError("generate: empty prompt (it needs at least the BOS token)");
  if (static_cast<int>(prompt.size()) >= ctx) {
    return MakeError("prompt of " + std::to_string(prompt.size()) +
                     " tokens does not fit the context of " + std::to_string(ctx) +
                     " tokens (it must leave room for one generated token)");
  }
  GenerateResult r;
  r.prompt_tokens = static_cast<int>(prompt.size());
  // A restored prompt cache (opt.n_past): the cache already holds
  // prompt[0, n_past); only the rest is decoded.
  const size_t past = static_cast<size_t>(std::max(0, opt.n_past));
  if (past > prompt.size() ||
      (past == prompt.size() &&
       (!opt.past_logits || opt.past_logits->size() != size_t(model.vocab_size())))) {
    return MakeError("generate: the cached prefix is longer than the prompt or has no logits");
  }
  Sequence seq;
  seq.window.assign(prompt.begin(), prompt.begin() + past);
  seq.history = seq.window;
  auto t0 = Clock::now();
  if (past == prompt.size()) {
    seq.logits = *opt.past_logits;
    seq.has_logits = true;
  } else {
    HQEKV_RETURN_IF_ERROR(DecodeTokens(model, cache, seq, prompt.data() + past,
                                       static_cast<int>(prompt.size() - past)));
  }
  if (opt.on_prefilled) opt.on_prefilled(seq.logits);
  auto t1 = Clock::now();
  r.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
  StepOptions step;
  step.stop_at_eog = opt.stop_at_eog;
  step.is_eog = opt.is_eog ? opt.is_eog : [eos = opt.eos](int32_t t) { return t == eos; };
  step.context_shift = opt.context_shift;
  step.n_keep = opt.n_keep;
  for (int i = 0; i < opt.max_new; ++i) {
    step.decode = i + 1 < opt.max_new;
    HQEKV_ASSIGN_OR_RETURN(StepResult s, GenerateStep(model, cache, sampler, seq, step, on_token));
    if (s.end == StepEnd::kEndOfGeneration) break;
    r.tokens.push_back(s.token);
    if (s.end == StepEnd::kContextFull) {
      r.hit_context_end = true;
      break;
    }
  }
  r.context_shifts = seq.context_shifts;
  r.decode_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return r;
}

}  // namespace hqekv
