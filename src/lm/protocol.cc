#include "lm/protocol.h"

#include "core/check.h"

namespace hqekv::lm {

Status LlamaStep::Forward(KvCache& cache, const int32_t* tokens, int n, int pos0, bool is_prefill,
                          float* logits) {
  pos_.resize(n);
  for (int i = 0; i < n; ++i) pos_[i] = pos0 + i;
  return model_.Forward(tokens, pos_.data(), n, cache, logits ? Logits::kLast : Logits::kNone,
                        logits, is_prefill);
}

Status RunWindow(StepModel& model, KvCache& cache, const Window& w, const WindowHooks& hooks) {
  HQEKV_DCHECK(w.prefill >= 1 && w.prefill <= w.n && w.first_scored >= w.prefill - 1);
  cache.Reset();
  std::vector<float> logits(model.vocab());
  const bool score_prefill = w.first_scored == w.prefill - 1;
  HQEKV_RETURN_IF_ERROR(model.Forward(cache, w.tokens, w.prefill, 0, /*is_prefill=*/true,
                                      score_prefill ? logits.data() : nullptr));
  if (hooks.after_prefill) hooks.after_prefill();
  if (score_prefill && hooks.on_logits)
    HQEKV_RETURN_IF_ERROR(hooks.on_logits(w.prefill - 1, logits.data()));
  for (int i = w.prefill; i < w.n; ++i) {
    const bool scored = i >= w.first_scored;
    HQEKV_RETURN_IF_ERROR(model.Forward(cache, &w.tokens[i], 1, i, /*is_prefill=*/false,
                                        scored ? logits.data() : nullptr));
    if (scored && hooks.on_logits) HQEKV_RETURN_IF_ERROR(hooks.on_logits(i, logits.data()));
  }
  return Status::Ok();
}

}  // namespace hqekv::lm
