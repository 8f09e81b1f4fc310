#include "model/generate.h"

#include <algorithm>
#include <chrono>
#include <string>

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
  std::vector<int32_t> history = prompt;
  const size_t past = static_cast<size_t>(std::max(0, opt.n_past));
  if (past > prompt.size() ||
      (past == prompt.size() &&
       (!opt.past_logits || opt.past_logits->size() != size_t(model.vocab_size())))) {
    return MakeError("generate: the cached prefix is longer than the prompt or has no logits");
  }
  std::vector<int32_t> pos(prompt.size() - past);
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(past + i);
  std::vector<float> logits(model.vocab_size());
  auto t0 = Clock::now();
  if (pos.empty()) {
    logits = *opt.past_logits;
  } else {
    HQEKV_RETURN_IF_ERROR(model.Forward(prompt.data() + past, pos.data(),
                                        static_cast<int>(pos.size()), cache, Logits::kLast,
                                        logits.data(), true));
  }
  if (opt.on_prefilled) opt.on_prefilled(logits);
  auto t1 = Clock::now();
  r.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
  for (int step = 0; step < opt.max_new; ++step) {
    const int32_t tok = sampler.Sample(logits.data(), model.vocab_size(), history);
    const bool eog = opt.is_eog ? opt.is_eog(tok) : tok == opt.eos;
    if (opt.stop_at_eog && eog) break;
    r.tokens.push_back(tok);
    history.push_back(tok);
    if (on_token) on_token(tok);
    if (step + 1 == opt.max_new) break;
    const int32_t p = static_cast<int32_t>(history.size() - 1);
    if (p >= ctx) {
      r.hit_context_end = true;
      break;
    }
    HQEKV_RETURN_IF_ERROR(model.Forward(&tok, &p, 1, cache, Logits::kLast, logits.data(), false));
  }
  r.decode_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return r;
}

}  // namespace hqekv
