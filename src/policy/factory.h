// Builds a KV cache from a policy spec string (the `--kv SPEC` option).
//
// SPEC = NAME[:key=value,...], parsed by policy/spec.h (ParseSpec); the
// policies and their parameters are listed by `hqekv policies` (PoliciesHelp)
// and documented in docs/policies.md:
//   fp16, fp32                       uncompressed (cache/plain_cache.h)
//   fp8, int8, kivi                  quantization (policy/quant_cache.h)
//   streaming, h2o, snapkv, pyramid  eviction (policy/evict_cache.h)
//   hqekv                            hybrid (policy/hqekv_cache.h)
#pragma once

#include <memory>
#include <string>

#include "cache/kv_cache.h"
#include "core/status.h"

namespace hqekv {

// Errors name the part at fault: unknown policy or key, out-of-range value,
// a budget or format that the geometry cannot hold, an unreadable profile.
Result<std::unique_ptr<KvCache>> MakeKvCache(const std::string& spec, const KvGeometry& g);

}  // namespace hqekv
