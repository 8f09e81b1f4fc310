// A KV cache's state in a file (`hqekv serve` slot save/restore, `hqekv run
// --prompt-cache`): compress a prompt once, answer from it many times.
//
// Layout (little-endian):
//   "HQEKVKV1"                 8 bytes, format name
//   uint32 version             kKvStateVersion
//   uint32 header_bytes        then a JSON header: model identity, policy
//                              spec, geometry, token and vocabulary counts
//   int32  tokens[n_tokens]    the sequence the cache holds
//   float  logits[n_vocab]     next-token logits after it (no re-run needed)
//   ...    cache state         KvCache::SaveState, as held in memory
//   uint64 FNV-1a 64           of every byte before it
// The cache state of a compressing policy (policy/store_cache.h) is its
// KvStore as held (pages, chunk records, fp16 residual, with capacities) and
// the policy's own state (scores, tiers, importance windows), so a restored
// cache holds the same bytes and continues bit-identically. So a file is the
// cache's true bytes plus ~300 bytes of header, the tokens (4 B each), the
// logits (4 B × vocabulary) and a few bytes of array sizes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/kv_cache.h"
#include "core/status.h"

namespace hqekv {

inline constexpr uint32_t kKvStateVersion = 2;  // 2: 24-byte store chunk records

struct KvStateMeta {
  std::string model_identity;  // ModelSource::identity of the model that filled the cache
  std::string spec;            // policy spec the cache was created with
  KvGeometry geometry;
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

// The file's bytes for `cache` (its SaveState: an error for kinds that
// cannot be saved).
Result<std::string> EncodeKvState(const KvCache& cache, const KvStateMeta& meta);

// Checks format, version, size and checksum; returns the header (tokens and
// logits filled in). Errors say which check failed.
Result<KvStateMeta> ReadKvStateHeader(std::string_view file);

// ReadKvStateHeader, then checks the file against `expect` (model identity,
// geometry, and the policy spec when expect.spec is not empty) and loads the cache state into
// `cache` (created by the caller from the header's spec). On error `cache` is unchanged, or reset
// when its loaded contents disagree with the token list. Token ids must lie in [0, logits.size()),
// logits must be finite.
Result<KvStateMeta> LoadKvState(std::string_view file, const KvStateMeta& expect, KvCache& cache);

}  // namespace hqekv
