#include "model/generate_step.h"

#include <algorithm>
#include <string>

namespace hqekv {

void Sequence::Clear() {
  history.clear();
  window.clear();
  has_logits = false;
  context_shifts = 0;
}

Status DecodeTokens(LlamaModel& model, KvCache& cache, Sequence& seq, const int32_t* tokens, int n,
                    float* embeddings) {
  const int32_t start = static_cast<int32_t>(seq.window.size());
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = start + i;
  seq.logits.resize(model.vocab_size());
  seq.has_logits = false;
  HQEKV_RETURN_IF_ERROR(model.Forward(tokens, pos.data(), n, cache, Logits::kLast,
                                      seq.logits.data(), /*is_prefill=*/start == 0, embeddings));
  seq.window.insert(seq.window.end(), tokens, tokens + n);
  seq.history.insert(seq.history.end(), tokens, tokens + n);
  seq.has_logits = true;
  return Status::Ok();
}

Status RecomputeWindow(LlamaModel& model, KvCache& cache, Sequence& seq) {
  cache.Reset();
  seq.has_logits = false;
  if (seq.window.empty()) return Status::Ok();
  const int n = static_cast<int>(seq.window.size());
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = i;
  seq.logits.resize(model.vocab_size());
  HQEKV_RETURN_IF_ERROR(model.Forward(seq.window.data(), pos.data(), n, cache, Logits::kLast,
                                      seq.logits.data(), /*is_prefill=*/true));
  seq.has_logits = true;
  return Status::Ok();
}

Status ShiftContext(LlamaModel& model, KvCache& cache, Sequence& seq, int n_keep) {
  const int n = static_cast<int>(seq.window.size());
  const int keep = std::max(0, std::min(n_keep, n));
  const int discard = (n - keep) / 2;
  if (discard <= 0) {
    return MakeError("context shift: keeping the first " + std::to_string(n_keep) +
                     " tokens of a " + std::to_string(n) +
                     "-token context leaves nothing to discard (use a smaller --keep)");
  }
  seq.window.erase(seq.window.begin() + keep, seq.window.begin() + keep + discard);
  ++seq.context_shifts;
  return RecomputeWindow(model, cache, seq);
}

StepResult SampleNext(Sampler& sampler, const std::vector<float>& logits,
                      const std::vector<int32_t>& history, const StepOptions& options) {
  StepResult r;
  r.token = sampler.Sample(logits.data(), static_cast<int>(logits.size()), history);
  // is_eog runs on every token, also when not stopping: run's stop scanner
  // sees the text through it.
  const bool eog = options.is_eog && options.is_eog(r.token);
  if (options.stop_at_eog && eog) r.end = StepEnd::kEndOfGeneration;
  return r;
}

Result<StepResult> GenerateStep(LlamaModel& model, KvCache& cache, Sampler& sampler, Sequence& seq,
                                const StepOptions& options,
                                const std::function<void(int32_t)>& on_token) {
  if (!seq.has_logits) return MakeError("generate: no logits (decode the prompt first)");
  StepResult r = SampleNext(sampler, seq.logits, seq.history, options);
  if (r.end == StepEnd::kEndOfGeneration) return r;
  if (on_token) on_token(r.token);
  if (!options.decode) return r;
  if (seq.window.size() >= static_cast<size_t>(cache.geometry().max_ctx)) {
    if (!options.context_shift) {
      r.end = StepEnd::kContextFull;
      return r;
    }
    HQEKV_RETURN_IF_ERROR(ShiftContext(model, cache, seq, options.n_keep));
  }
  HQEKV_RETURN_IF_ERROR(DecodeTokens(model, cache, seq, &r.token, 1));
  return r;
}

}  // namespace hqekv
