// A shared KV tier (docs/scale-out.md): compressed cache states of token
// prefixes, stored outside the server process so that every replica can load
// a prefix another one computed instead of running its prefill.
//
// A tier is a bounded byte store: Get / Put of opaque entries under keys this
// module derives (kvtier/entry.h: model, KV spec, format version and a hash
// chain of the token blocks; a client never names a key). Backends:
//   dir:PATH                     files PATH/<key>.kv, written atomically, the
//                                oldest (by mtime, touched on a hit) removed
//                                past max_bytes
//   redis://HOST:PORT[/prefix]   Redis or Valkey through hiredis; keys are
//                                "<prefix>:<key>", TTL by SET ... EX, reads
//                                bounded by GETRANGE, every call bounded by
//                                the timeout
// A backend that fails (store down, timeout, full) answers an error value;
// the caller computes instead. After a failure the tier stays away for
// `backoff_ms` (no timeout per request while the store is down).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/status.h"

namespace hqekv::kvtier {

inline constexpr int kMaxBlockTokens = 1 << 16;  // largest tokens per block (--kv-store-block)

struct TierOptions {
  int64_t max_bytes = int64_t{1} << 30;          // dir: bytes of entries kept (LRU by mtime)
  int64_t max_entry_bytes = int64_t{256} << 20;  // larger entries are neither stored nor read
  int ttl_s = 0;                                 // redis: EXPIRE of each entry (0 = none)
  int timeout_ms = 200;                          // redis: connect / read / write bound
  int backoff_ms = 1000;                         // after a failure, calls fail fast this long
};

// Counters of one tier (for /metrics), all since the tier was opened.
struct TierStats {
  int64_t hits = 0, misses = 0, errors = 0;  // Get outcomes (a corrupt entry is counted by the
                                             // caller as a miss through NoteRejected)
  int64_t rejected = 0;                      // entries found but refused (corrupt, foreign)
  int64_t bytes_in = 0, bytes_out = 0;       // fetched / stored
  int64_t puts = 0, put_errors = 0;
  double fetch_seconds = 0;  // wall time of every Get
  int64_t fetches = 0;
};

// One store. Thread-safe: the server calls Get from HTTP threads and Put
// from its publisher thread.
class KvTier {
 public:
  virtual ~KvTier() = default;
  // The entry, nullopt when absent (or larger than max_entry_bytes), an error
  // when the store failed. Counts hits / misses / errors / latency.
  Result<std::optional<std::string>> Get(const std::string& key);
  // Stores (replaces) an entry; errors when the store failed or refused it.
  Status Put(const std::string& key, std::string_view bytes);
  // An entry that was fetched but failed its checks: counted, a miss for the caller.
  void NoteRejected();
  TierStats Stats() const;
  const TierOptions& options() const { return o_; }
  virtual std::string Describe() const = 0;  // "dir:/path", "redis://host:port/prefix"

 protected:
  explicit KvTier(const TierOptions& o) : o_(o) {}
  virtual Result<std::optional<std::string>> DoGet(const std::string& key) = 0;
  virtual Status DoPut(const std::string& key, std::string_view bytes) = 0;
  // A backend whose store is unreachable (connect failed, timed out) calls
  // this: Get and Put then fail fast for backoff_ms. An error answer of a
  // live store (full, refused) does not.
  void MarkDown();
  TierOptions o_;

 private:
  bool BackingOff();
  mutable std::mutex mu_;
  TierStats s_;
  int64_t backoff_until_ns_ = 0;  // steady clock
};

// Opens "dir:PATH" (creates the directory) or "redis://HOST:PORT[/prefix]"
// (connects lazily: a store that is down at start is a miss per request, not
// a failed start). Errors name the URL and what is wrong with it; a build
// without hiredis says so for redis:// URLs.
Result<std::unique_ptr<KvTier>> OpenKvTier(const std::string& url, const TierOptions& o);

// Keys are lowercase hex, 1-64 characters: what the backends accept.
bool ValidKey(const std::string& key);

}  // namespace hqekv::kvtier
