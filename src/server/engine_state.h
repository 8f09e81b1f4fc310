// The server engine's private state, shared by engine.cc (admission,
// prefill, the decode loop) and engine_slots.cc (slot save / restore /
// erase, metrics): a request being served (Job), a slot (Slot) and the
// measured bytes-per-position line of a policy (Probe).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "model/sampler.h"
#include "server/engine.h"
#include "tokenizer/stop_text.h"

namespace hqekv::server {

struct Engine::Job {
  CompletionRequest req;
  std::string spec;  // canonical policy spec
  std::vector<int32_t> prompt;
  int max_new = 0;
  int64_t reserve = 0;
  std::shared_ptr<RequestChannel> ch;
  std::chrono::steady_clock::time_point started, prefilled;  // the prefill's start and end
  // The shared KV tier: keys of the prompt's whole blocks, and the entry
  // TierLookup fetched (the state of the first tier_tokens prompt tokens).
  std::vector<std::string> tier_keys;
  std::string tier_entry;
  size_t tier_tokens = 0;
  int64_t tier_bytes = 0;  // fetched for this request
};

struct Engine::Slot {
  int id = 0;
  std::unique_ptr<KvCache> cache;  // kept after a request (save, prefix reuse) until needed
  std::string spec;
  std::vector<int32_t> history;  // every token in the cache, in order
  std::vector<float> logits;     // next-token logits after history (when has_logits)
  bool has_logits = false;
  // The request being served (null: idle).
  std::shared_ptr<Job> job;
  std::optional<Sampler> sampler;
  std::optional<StopText> stop;
  bool prefilled = false;
  int generated = 0;
  int cached = 0;        // tokens of history in the cache
  int reused = 0;        // prompt tokens of this request found in the cache
  int32_t pending = -1;  // sampled token still to run through the model
};

// Bytes a policy holds for n positions, an upper bound measured on caches
// filled with random K/V: the line through half and full context (+10%),
// plus the bytes of a short sequence (t0 tokens), which covers the page and
// residual granularity the line misses.
struct Engine::Probe {
  std::string spec;
  int t0 = 0, t1 = 0, t2 = 0;
  int64_t b0 = 0, b1 = 0, b2 = 0;
  int64_t Bytes(int n) const {
    const double slope = t2 > t1 ? double(b2 - b1) / (t2 - t1) : 0.0;
    const double line = std::max(0.0, b1 + slope * (n - t1));
    return static_cast<int64_t>(std::ceil(1.1 * line)) + b0;
  }
};

}  // namespace hqekv::server
