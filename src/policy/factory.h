// Builds a KV cache from a policy spec (the `--kv SPEC` option).
//
// SPEC = NAME[:key=value,...], parsed by policy/spec.h (ParseSpec); the
// policies and their parameters are listed by `hqekv policies` (PoliciesHelp)
// and documented in docs/policies.md. Each policy's row in the table
// (policy/policy_table.cc) names its create function:
//   fp16, fp32                       uncompressed (cache/plain_cache.h)
//   fp8, int8, kivi                  quantization (policy/quant_cache.h)
//   streaming, h2o, snapkv, pyramid  eviction (policy/evict_cache.h and one
//                                    file per policy)
//   hqekv                            hybrid (policy/hqekv_cache.h)
#pragma once

#include <memory>
#include <string>

#include "cache/kv_cache.h"
#include "core/status.h"
#include "policy/cache_context.h"
#include "policy/spec.h"

namespace hqekv {

namespace policy {

// The factory: the cache of a parsed spec, created by its table row's
// function with the context (the model a profile must match, force, in-memory
// tier ratios). Errors name the part at fault: a budget or format that the
// geometry cannot hold, an unreadable profile, a profile made for another
// model.
Result<std::unique_ptr<KvCache>> CreateCache(const PolicySpec& spec, const KvGeometry& g,
                                             const CacheContext& ctx);

// What creation checks without a geometry: a profile the spec names is
// readable and made for ctx's model. For callers that check every spec
// before creating any cache (`eval` before its first cell).
Status CheckSpecForModel(const PolicySpec& spec, const CacheContext& ctx);

// The context of a cache created for a loaded model (ModelSource's
// config.name, identity, config.n_layers), with the bundled profiles folder
// found as core/file.h's FindBundled finds it, not from the working directory.
CacheContext ForModel(std::string name, std::string identity, int n_layers);

}  // namespace policy

// ParseSpec + CreateCache with no context (no model to check a profile
// against): tests, benchmarks, reference caches.
Result<std::unique_ptr<KvCache>> MakeKvCache(const std::string& spec, const KvGeometry& g);

}  // namespace hqekv
