// Text generation loop: prefill the prompt in one batch, then decode one
// token at a time with a Sampler (model/generate_step.h) until max_new
// tokens, an end-of-generation token, or the end of the cache's context
// (unless context_shift makes room, as llama.cpp does).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "cache/kv_cache.h"
#include "core/status.h"
#include "model/llama.h"
#include "model/sampler.h"

namespace hqekv {

struct GenerateOptions {
  int max_new = 256;                    // tokens to generate at most
  bool stop_at_eog = true;              // stop on EOS / EOT (the token is not emitted)
  int32_t eos = -1;                     // with stop_at_eog: the end tokens (-1 = none) ...
  std::function<bool(int32_t)> is_eog;  // ... or this predicate when set
  // When the cache is full: drop the older half of the tokens after the
  // first n_keep and go on (ShiftContext), instead of stopping.
  bool context_shift = false;
  int n_keep = 0;
  // A restored prompt cache (cache/kv_state.h): the cache already holds
  // prompt[0, n_past); only the rest is prefilled. When n_past equals the
  // prompt's length, past_logits (vocab values) are its next-token logits.
  int n_past = 0;
  const std::vector<float>* past_logits = nullptr;
  // Called once after the prefill with the prompt's next-token logits (to
  // save the prompt cache).
  std::function<void(const std::vector<float>&)> on_prefilled;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated tokens (prompt excluded)
  int prompt_tokens = 0;
  double prefill_seconds = 0;    // wall time of the prompt batch
  double decode_seconds = 0;     // wall time of every decode step (sampling included)
  bool hit_context_end = false;  // stopped early: the cache is full and shifting is off
  int context_shifts = 0;        // context shifts done
};

// The prompt (non-empty, shorter than the cache's max_ctx) starts at position
// 0 of an empty cache. on_token (optional) is called with each generated
// token as soon as it is sampled (streaming).
Result<GenerateResult> Generate(LlamaModel& model, KvCache& cache,
                                const std::vector<int32_t>& prompt, Sampler& sampler,
                                const GenerateOptions& opt,
                                const std::function<void(int32_t)>& on_token = nullptr);

}  // namespace hqekv
