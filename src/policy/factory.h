// Builds a KV cache from a policy spec string (the `--kv SPEC` option).
#pragma once

#include <memory>
#include <string>

#include "cache/kv_cache.h"
#include "core/status.h"

namespace hqekv {

// "fp16": uncompressed fp16 cache (the baseline); "fp32": uncompressed fp32
// (the reference). Anything else: error "unknown KV policy '<spec>'".
Result<std::unique_ptr<KvCache>> MakeKvCache(const std::string& spec, const KvGeometry& g);

}  // namespace hqekv
