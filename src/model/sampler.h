// Next-token sampling: greedy, temperature, top-k, top-p (nucleus), min-p,
// repetition / presence / frequency penalties, logit bias; seeded with its own PRNG (xoshiro256**,
// seeded through splitmix64), so a (seed, logits sequence) pair always gives the same tokens on
// every platform.
//
// Order of operations on the logits of one step:
//   0. logit bias: bias[id] added to the token's logit (OpenAI logit_bias;
//      kLogitBan bans a token);
//   1. repetition penalty on every token among the last repeat_last_n of the
//      history (logit > 0: divided by the penalty, else multiplied — the
//      CTRL / llama.cpp rule); then, over the same window, presence and
//      frequency penalties: logit -= count * frequency + (count > 0) * presence
//      (OpenAI's formula; the window as llama.cpp's penalty_last_n);
//   2. temperature == 0: argmax (lowest id on ties), done;
//   3. logits / temperature; keep the top_k largest (0 = all);
//   4. softmax; keep the smallest prefix (by probability) whose mass reaches
//      top_p; drop tokens whose probability is below min_p × the largest;
//   5. renormalize and draw one token.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/xoshiro.h"

namespace hqekv {

struct SamplerConfig {
  float temperature = 0.0f;     // 0 = greedy
  int top_k = 0;                // 0 = off
  float top_p = 1.0f;           // 1 = off; (0, 1]
  float min_p = 0.0f;           // 0 = off; [0, 1)
  float repeat_penalty = 1.0f;  // 1 = off; > 0
  int repeat_last_n = 64;       // tokens of history the penalty looks at
  uint64_t seed = 0;
  float presence_penalty = 0.0f;   // 0 = off; OpenAI's range [-2, 2]
  float frequency_penalty = 0.0f;  // 0 = off; OpenAI's range [-2, 2]
  // (token id, added logit), applied before everything else; finite.
  std::vector<std::pair<int32_t, float>> logit_bias;
};

// A logit bias that bans a token: finite, so a step where every token is
// banned still draws (the largest biased logit) instead of a NaN.
inline constexpr float kLogitBan = -1e20f;

// The sampling of `hqekv run` when no flag is given (and of the C API's
// hqekv_sampler_default_params): temperature 0.8, top-k 40, top-p 0.95,
// min-p 0.05, no repetition penalty.
inline const SamplerConfig kRunSamplerDefaults = [] {
  SamplerConfig c;
  c.temperature = 0.8f;
  c.top_k = 40;
  c.top_p = 0.95f;
  c.min_p = 0.05f;
  return c;
}();

// Error naming the bad option (e.g. "--top-p must be in (0, 1], got 1.5").
Status ValidateSamplerConfig(const SamplerConfig& c);

using Rng = Xoshiro256;  // core/xoshiro.h

class Sampler {
 public:
  static Result<Sampler> Create(const SamplerConfig& c);

  // Picks the next token from logits[vocab]; history = tokens so far (prompt
  // and generated), used by the repetition penalty.
  int32_t Sample(const float* logits, int vocab, const std::vector<int32_t>& history);

  const SamplerConfig& config() const { return c_; }

 private:
  explicit Sampler(const SamplerConfig& c) : c_(c), rng_(c.seed) {}
  SamplerConfig c_;
  Rng rng_;
  std::vector<float> work_;
  std::vector<std::pair<float, int32_t>> cand_;
};

}  // namespace hqekv
