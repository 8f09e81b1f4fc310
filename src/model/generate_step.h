// One step of text generation, shared by `hqekv run` (model/generate.cc) and
// the C API (capi/context.cc): the state of one sequence between calls, a
// batch decode, llama.cpp-style context shift, and sample-then-decode.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "cache/kv_cache.h"
#include "core/status.h"
#include "model/llama.h"
#include "model/sampler.h"

namespace hqekv {

// One sequence being decoded into a cache.
struct Sequence {
  // Every token decoded so far, prompt included (the sampler's penalty
  // history). Grows for ever, also across context shifts.
  std::vector<int32_t> history;
  // The tokens the cache holds: window[i] sits at position i. Equals history
  // until a context shift drops tokens from it.
  std::vector<int32_t> window;
  std::vector<float> logits;  // [vocab] after the last decoded token
  bool has_logits = false;
  int context_shifts = 0;  // shifts done so far

  void Clear();  // an empty sequence (call cache.Reset() too)
};

// Decodes tokens[0..n) at positions window.size().. (the first batch of an
// empty sequence is the prompt: the cache's prefill event). The caller
// checked ids and room. On error the sequence is unchanged except
// has_logits = false; the cache may hold part of the batch (see
// RecomputeWindow). embeddings (optional): [n][d_model] final hidden states.
Status DecodeTokens(LlamaModel& model, KvCache& cache, Sequence& seq, const int32_t* tokens, int n,
                    float* embeddings = nullptr);

// Clears the cache and decodes seq.window again as one prompt batch at
// positions 0.. (logits of its last token in seq.logits). Used after a
// context shift and to restore a cache a failed batch left half-written.
Status RecomputeWindow(LlamaModel& model, KvCache& cache, Sequence& seq);

// llama.cpp's context shift, by recomputation: keeps window[0..n_keep) and
// the newer half of the rest, drops the older half, and recomputes the kept
// tokens at positions 0.. (llama.cpp re-rotates the cached keys instead; a
// recompute works for every policy, compressed or evicting, because it only
// uses Reset/Append, at a cost of one prefill of ~half the context per
// shift). Error when n_keep leaves nothing to drop.
Status ShiftContext(LlamaModel& model, KvCache& cache, Sequence& seq, int n_keep);

struct StepOptions {
  std::function<bool(int32_t)> is_eog;  // true: the sampled token ends generation
  bool stop_at_eog = true;
  bool decode = true;          // false on the last step: the token is not decoded
  bool context_shift = false;  // shift instead of stopping when the cache is full
  int n_keep = 0;              // with context_shift: first window tokens always kept
};

enum class StepEnd {
  kToken,            // a token was emitted (and decoded when options.decode)
  kEndOfGeneration,  // the sampled token ends generation (not emitted)
  kContextFull,      // a token was emitted; the cache is full and shifting is off
};

struct StepResult {
  int32_t token = -1;
  StepEnd end = StepEnd::kToken;
};

// The sampling half of a step, for callers that decode elsewhere (the
// server batches the decode of every slot in one ForwardMany): a token drawn
// from `logits` [vocab] with `history` as the penalty window, and
// kEndOfGeneration when options.stop_at_eog and options.is_eog say it ends
// generation (is_eog runs on every token). kToken otherwise.
StepResult SampleNext(Sampler& sampler, const std::vector<float>& logits,
                      const std::vector<int32_t>& history, const StepOptions& options);

// Samples the next token from seq.logits; unless it ends generation, calls
// on_token (optional) with it, then decodes it (shifting the context first
// when the cache is full and options allow).
Result<StepResult> GenerateStep(LlamaModel& model, KvCache& cache, Sampler& sampler, Sequence& seq,
                                const StepOptions& options,
                                const std::function<void(int32_t)>& on_token = nullptr);

}  // namespace hqekv
