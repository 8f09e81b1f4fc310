// llama.cpp's KV cache types as a policy (`--kv llama:ctk=q8_0,ctv=q4_0`):
// K and V each in one of llama.cpp's `-ctk` / `-ctv` types — f16, q8_0,
// q5_1, q5_0, q4_1, q4_0 (quant/format.h: blocks of 32 values along
// head_dim of one token, fp16 scale, fp16 minimum for the _1 types) — so
// users can compare hqekv with what they run today. `bits=B` (TRUE bits per
// original element) picks the widest pair whose every byte fits B at the
// cache's full context.
//
// Storage: a QuantCache (policy/quant_cache.h) sealing 32-token chunks; the
// newest < 32 tokens wait in the fp16 residual (llama.cpp quantizes every
// token at once), counted in the true bits like every byte.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "policy/cache_context.h"
#include "policy/spec.h"
#include "quant/format.h"

namespace hqekv::policy {

// The type names `ctk=` / `ctv=` accept, widest first.
const std::vector<std::string>& LlamaCacheTypes();

// The (K, V) formats a true-bits budget selects: of every pair of types, the
// one with the most true bits per element that still fits spec's bits= at
// g.max_ctx tokens (ties: the wider K); an error giving the achievable range
// when even q4_0/q4_0 does not fit.
Result<std::pair<quant::Format, quant::Format>> LlamaTypesForBudget(const PolicySpec& spec,
                                                                    const KvGeometry& g);

// The policy table's create function for `llama`.
Result<std::unique_ptr<KvCache>> CreateLlamaCache(const PolicySpec& spec, const KvGeometry& g,
                                                  const CacheContext& ctx);

}  // namespace hqekv::policy
