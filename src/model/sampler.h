// Next-token sampling: greedy, temperature, top-k, top-p (nucleus), min-p,
// repetition penalty; seeded with its own PRNG (xoshiro256**, seeded through
// splitmix64), so a (seed, logits sequence) pair always gives the same tokens
// on every platform.
//
// Order of operations on the logits of one step:
//   1. repetition penalty on every token among the last repeat_last_n of the
//      history (logit > 0: divided by the penalty, else multiplied — the
//      CTRL / llama.cpp rule);
//   2. temperature == 0: argmax (lowest id on ties), done;
//   3. logits / temperature; keep the top_k largest (0 = all);
//   4. softmax; keep the smallest prefix (by probability) whose mass reaches
//      top_p; drop tokens whose probability is below min_p × the largest;
//   5. renormalize and draw one token.
#pragma once

#include <cstdint>
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
};

// The sampling of `hqekv run` when no flag is given (and of the C API's
// hqekv_sampler_default_params): temperature 0.8, top-k 40, top-p 0.95,
// min-p 0.05, no repetition penalty.
inline constexpr SamplerConfig kRunSamplerDefaults{0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 0};

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
