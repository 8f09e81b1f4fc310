// Entries of the shared KV tier (kvtier/tier.h): the compressed cache state
// of a prompt's first k·block tokens, under a content-derived key.
//
// Key: 128 bits as 32 hex digits, two FNV-1a 64 hash chains (different
// starting values) over  "model identity \0 KV spec \0 format version"  and
// then each block of `block` token ids in turn, so the key of k blocks
// extends the key of k-1 (vLLM's prefix-caching block hashes work the same
// way). A client sends tokens, never keys. FNV is not collision-resistant:
// an entry's token list is therefore compared with the prompt before its
// state is used, so a colliding entry is a miss, never another prompt's
// cache.
//
// Entry layout (little-endian):
//   "HQEKVTR1"         8 bytes
//   uint32 version     kTierEntryVersion
//   uint32 header      bytes of the JSON header that follows:
//                      {"model_identity","spec","n_tokens","key"}
//   uint64 FNV-1a 64   of every byte before it (the envelope)
//   ...    state       a KV state (cache/kv_state.h: its own header, the
//                      tokens, the logits after them, the cache as held,
//                      and its own FNV-1a 64 of all of that)
// The state's bytes are hashed once, by the state's own checksum: a second
// pass over megabytes per entry costs the writer's prefill time.
// An entry whose magic, version, checksum, model, spec, token count, key or
// token list disagrees with what the reader expects is refused with a
// message; the server logs it and computes the prefix instead.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/kv_cache.h"
#include "cache/kv_state.h"
#include "core/status.h"
#include "kvtier/tier.h"

namespace hqekv::kvtier {

inline constexpr uint32_t kTierEntryVersion = 1;

struct EntryIdentity {
  std::string model_identity;  // ModelSource::identity
  std::string spec;            // canonical KV policy spec
};

// keys[k-1] is the key of tokens[0, k·block), k = 1 .. n / block.
std::vector<std::string> PrefixKeys(const EntryIdentity& id, const int32_t* tokens, size_t n,
                                    int block);

// Whether the state after whole block k (1-based) of a prompt with k_max
// whole blocks is stored: the last two blocks (the longest prefix a repeat
// with another question of up to one block can use) and every power of two
// (shorter shared prefixes), so a prompt stores O(log n) entries of at most
// 2·k_max blocks together, not k_max entries of k_max²/2 blocks.
inline bool PublishBlock(size_t k, size_t k_max) { return k + 1 >= k_max || (k & (k - 1)) == 0; }

// The entry of `cache` holding meta.tokens (meta as EncodeKvState takes it).
Result<std::string> EncodeEntry(const KvCache& cache, const KvStateMeta& meta,
                                const std::string& key);

// The KV state inside an entry, after every envelope check (magic, version,
// checksum, model, spec, key, token count).
Result<std::string_view> UnwrapEntry(std::string_view entry, const EntryIdentity& expect,
                                     const std::string& key, size_t n_tokens);

// UnwrapEntry, then LoadKvState into `cache` (fresh, made for expect.spec and
// `geometry`), then checks that the entry's tokens are prompt[0, n_tokens).
// On error the cache must be discarded.
Result<KvStateMeta> LoadEntry(std::string_view entry, const EntryIdentity& expect,
                              const KvGeometry& geometry, const std::string& key,
                              const int32_t* prompt, size_t n_tokens, KvCache& cache);

}  // namespace hqekv::kvtier
