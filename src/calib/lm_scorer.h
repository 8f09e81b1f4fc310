// The calibration loss on a real model: mean KL(full || compressed) over the
// teacher-forced positions of a text, with the real KV cache of each trial
// (MakeKvCache: real eviction out of the softmax, real K and V tiers, fp16
// chunks and residual as deployed) — the objective the authors' search only
// approximated (the published calibration: V at 8 bits, eviction by zeroing,
// no fp16 chunks, labels off by one; docs/calibration.md).
//
// Protocol (lm/protocol.h, lm::RunWindow): the token stream is cut into
// windows of `window` tokens that fit the model's context (BOS + window - 1
// text tokens, at positions 0..window-1). Each window prefills its first
// `prefill` tokens in one batch (the policy's prefill compression event
// happens there), then teacher-forces the rest one token at a time (decode
// events every 32 tokens); the loss is measured at each teacher-forced
// position: the distribution of the token after it (lm::Kl over fp32
// lm::LogSoftmax tables). The reference distributions (the
// `reference` cache spec, fp16 by default) are computed once and reused by
// every trial. Windows are independent and run in parallel (core pool).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "calib/search.h"
#include "core/status.h"
#include "model/llama.h"
#include "io/model_source.h"

namespace hqekv::calib {

struct LmScorerOptions {
  int64_t tokens = 16384;  // calibration tokens (whole windows, BOS included)
  int window = 0;          // <= 0: min(512, model context)
  int prefill = 0;         // <= 0: window / 2
  std::string reference = "fp16";
  std::string kv_options;  // extra "key=value,..." appended to every hqekv spec
};

// The cache of a trial: a spec, and for per-layer choices the tier ratios of
// every layer, passed in memory to the factory (policy/cache_context.h).
struct TrialCache {
  std::string spec;
  std::vector<Ratios> layer_ratios;  // empty: the spec alone
};

// For a choice: "hqekv:ratios=r4/r2/r1/r0[,opts]" (the ratios as text, 6
// decimals), or, for per-layer ratios, "hqekv[:opts]" with the rows.
TrialCache HqeKvTrialCache(const CacheChoice& c, const std::string& kv_options);

class LmScorer : public TrialScorer {
 public:
  // Tokenizes `text`, builds the windows and runs the reference pass. Errors:
  // text too short for one window, window larger than the context, bad
  // prefill, reference spec unknown.
  static Result<std::unique_ptr<LmScorer>> Create(const ModelSource& src, const std::string& text,
                                                  const LmScorerOptions& opt);

  int n_layers() const override { return src_.config.n_layers; }
  Result<TrialScore> Score(const CacheChoice& choice) override;

  // Scores any cache spec (evaluation: kivi:nominal_bits=2, hqekv:nominal_bits=2, ...).
  Result<TrialScore> ScoreSpec(const std::string& spec);
  // Scores a spec with per-layer tier ratios in memory (calib/layer_bits.h's probes).
  Result<TrialScore> ScoreTrial(const TrialCache& trial) { return Run(trial, false); }

  int window() const { return window_; }
  int prefill() const { return prefill_; }
  int64_t tokens_used() const { return static_cast<int64_t>(windows_.size()) * window_; }
  int64_t scored_positions() const;

  // Per-trial cache builder (tests replace it to score plain caches).
  std::function<TrialCache(const CacheChoice&)> cache_of;

 private:
  explicit LmScorer(const ModelSource& src) : src_(src) {}
  // Runs every window with caches from `trial` (created for this model: a
  // profile it names must match it); record_reference: records the
  // reference log-probabilities instead of comparing.
  Result<TrialScore> Run(const TrialCache& trial, bool record_reference);

  const ModelSource& src_;
  int window_ = 0, prefill_ = 0;
  std::vector<std::vector<int32_t>> windows_;
  std::vector<float> ref_logp_;  // [window][teacher-forced position][vocab]
  LmScorerOptions opt_;
};

}  // namespace hqekv::calib
