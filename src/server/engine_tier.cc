// The server's side of the shared KV tier (docs/scale-out.md, kvtier/):
// before a prompt's prefill, the longest stored block prefix of it is
// fetched (in Submit, on the HTTP thread, outside the engine's locks) and
// loaded into the slot; the rest of the prompt runs block by block (so the
// state after block k is a function of the first k blocks only, whatever
// the prompt's length), and the states after the blocks kvtier::PublishBlock
// picks go to a bounded queue that one publisher thread writes to the store.
// A cold run and a run from a stored prefix run the same blocks from the
// same states, so their answers are the same.
// A store that is down, slow, full or holds a bad entry costs a miss: the
// prompt is computed.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cache/kv_state.h"
#include "kvtier/entry.h"
#include "policy/factory.h"
#include "server/engine.h"
#include "server/engine_state.h"

namespace hqekv::server {

namespace {
// Entries waiting for the publisher: past these, new ones are dropped (the
// prompt was served; only its reuse by others is lost).
constexpr size_t kTierQueueEntries = 64;
constexpr int64_t kTierQueueBytes = int64_t{512} << 20;

void TierLog(const char* what, const std::string& key, const std::string& detail) {
  const nlohmann::json j = {
      {"event", "kv_store"}, {"what", what}, {"key", key}, {"detail", detail}};
  std::fprintf(stderr, "%s\n", j.dump().c_str());
}
}  // namespace

void Engine::TierLookup(Job& job) {
  const size_t block = static_cast<size_t>(o_.kv_store_block);
  const kvtier::EntryIdentity id{src_.identity, job.spec};
  job.tier_keys = kvtier::PrefixKeys(id, job.prompt.data(), job.prompt.size(), o_.kv_store_block);
  if (!job.tier_keys.empty()) job.ch->prefix_hash = job.tier_keys[0];
  if (!tier_) return;
  // Longest first: one hit ends the search; a store error ends it too (the
  // tier then backs off, and the prompt is computed).
  for (size_t k = job.tier_keys.size(); k >= 1; --k) {
    const std::string& key = job.tier_keys[k - 1];
    auto got = tier_->Get(key);
    if (!got.ok()) {
      TierLog("unavailable", key, got.message());
      return;
    }
    if (!got->has_value()) continue;
    job.tier_bytes += static_cast<int64_t>((*got)->size());
    // The envelope now (cheap), so that a bad entry lets a shorter one serve.
    if (auto st = kvtier::UnwrapEntry(**got, id, key, k * block); !st.ok()) {
      tier_->NoteRejected();
      TierLog("rejected", key, st.message());
      std::lock_guard<std::mutex> l(mu_);
      ++m_.tier_entries_rejected;
      continue;
    }
    job.tier_entry = std::move(**got);
    job.tier_tokens = k * block;
    return;
  }
}

size_t Engine::TierRestore(Slot& s) {
  Job& job = *s.job;
  const std::string& key = job.tier_keys[job.tier_tokens / o_.kv_store_block - 1];
  const ModelConfig& c = src_.config;
  auto spec = policy::ParseSpec(job.spec);
  Result<std::unique_ptr<KvCache>> cache =
      spec.ok() ? policy::CreateCache(*spec, model_->CacheGeometry(o_.ctx),
                                      policy::ForModel(c.name, src_.identity, c.n_layers))
                : Result<std::unique_ptr<KvCache>>(spec.error());
  Status st = cache.ok() ? Status::Ok() : Status(cache.error());
  KvStateMeta meta;
  if (st.ok()) {
    auto m =
        kvtier::LoadEntry(job.tier_entry, {src_.identity, job.spec}, model_->CacheGeometry(o_.ctx),
                          key, job.prompt.data(), job.tier_tokens, **cache);
    if (m.ok() && m->logits.size() != static_cast<size_t>(model_->vocab_size()))
      st = MakeError("the entry's logits do not match this model's vocabulary");
    else if (m.ok())
      meta = std::move(*m);
    else
      st = m.error();
  }
  job.tier_entry = std::string();  // the bytes are in the cache now, or useless
  if (!st.ok()) {
    tier_->NoteRejected();
    TierLog("rejected", key, st.message());
    std::lock_guard<std::mutex> l(mu_);
    ++m_.tier_entries_rejected;
    return 0;
  }
  const size_t t = job.tier_tokens;
  s.cache = std::move(*cache);
  s.spec = job.spec;
  s.history.assign(job.prompt.begin(), job.prompt.begin() + static_cast<ptrdiff_t>(t));
  s.cached = static_cast<int>(t);
  s.logits = std::move(meta.logits);
  s.has_logits = true;
  std::lock_guard<std::mutex> l(mu_);
  m_.tier_tokens_loaded += static_cast<int64_t>(t);
  return t;
}

Status Engine::TierForward(Slot& s, size_t reuse, bool publish) {
  Job& job = *s.job;
  const size_t n = job.prompt.size(), block = static_cast<size_t>(o_.kv_store_block);
  std::vector<int32_t> pos;
  for (size_t at = reuse; at < n;) {
    const size_t end = std::min(n, (at / block + 1) * block);
    pos.resize(end - at);
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(at + i);
    HQEKV_RETURN_IF_ERROR(model_->Forward(job.prompt.data() + at, pos.data(),
                                          static_cast<int>(pos.size()), *s.cache, Logits::kLast,
                                          s.logits.data(), /*is_prefill=*/true));
    at = end;
    if (!publish || !tier_ || end % block != 0 || !kvtier::PublishBlock(end / block, n / block))
      continue;
    KvStateMeta meta;
    meta.model_identity = src_.identity;
    meta.spec = job.spec;
    meta.geometry = s.cache->geometry();
    meta.tokens.assign(job.prompt.begin(), job.prompt.begin() + static_cast<ptrdiff_t>(end));
    meta.logits = s.logits;
    const std::string& key = job.tier_keys[end / block - 1];
    auto entry = kvtier::EncodeEntry(*s.cache, meta, key);
    if (!entry.ok()) {  // a cache kind that cannot be saved: nothing to publish
      TierLog("not_stored", key, entry.message());
      publish = false;
      continue;
    }
    bool queued = false;
    {
      std::lock_guard<std::mutex> l(tier_mu_);
      if (tier_queue_.size() < kTierQueueEntries &&
          tier_queue_bytes_ + static_cast<int64_t>(entry->size()) <= kTierQueueBytes) {
        tier_queue_bytes_ += static_cast<int64_t>(entry->size());
        tier_queue_.emplace_back(key, std::move(*entry));
        tier_cv_.notify_all();
        queued = true;
      }
    }
    std::lock_guard<std::mutex> l(mu_);
    ++(queued ? m_.tier_entries_queued : m_.tier_entries_dropped);
  }
  return Status::Ok();
}

void Engine::TierPublishLoop() {
  for (;;) {
    std::pair<std::string, std::string> item;
    {
      std::unique_lock<std::mutex> l(tier_mu_);
      tier_cv_.wait(l, [&] { return tier_stop_ || !tier_queue_.empty(); });
      if (tier_queue_.empty()) return;  // stopping, and everything queued was written
      item = std::move(tier_queue_.front());
      tier_queue_.pop_front();
      tier_queue_bytes_ -= static_cast<int64_t>(item.second.size());
    }
    if (Status st = tier_->Put(item.first, item.second); !st.ok())
      TierLog("not_stored", item.first, st.message());
  }
}

std::string Engine::TierMetricsText() const {
  const kvtier::TierStats t = tier_->Stats();
  std::ostringstream o;
  auto metric = [&](const char* name, const char* help, double v) {
    o << "# HELP hqekv_kv_store_" << name << " " << help << "\n# TYPE hqekv_kv_store_" << name
      << " counter\nhqekv_kv_store_" << name << " " << v << "\n";
  };
  metric("hits_total", "Shared KV tier lookups that found an entry.", double(t.hits));
  metric("misses_total", "Shared KV tier lookups that found none.", double(t.misses));
  metric("errors_total", "Shared KV tier calls that failed (store down, timeout).",
         double(t.errors));
  metric("rejected_total", "Entries fetched and refused (corrupt, foreign, truncated).",
         double(m_.tier_entries_rejected));
  metric("tokens_loaded_total", "Prompt tokens loaded from the tier instead of computed.",
         double(m_.tier_tokens_loaded));
  metric("bytes_in_total", "Bytes fetched from the tier.", double(t.bytes_in));
  metric("bytes_out_total", "Bytes stored in the tier.", double(t.bytes_out));
  metric("puts_total", "Entries written to the tier.", double(t.puts));
  metric("put_errors_total", "Entries the tier did not store (down, full, too large).",
         double(t.put_errors));
  metric("entries_dropped_total", "Entries not queued for the tier (publisher queue full).",
         double(m_.tier_entries_dropped));
  metric("fetch_seconds_total", "Wall time of tier lookups.", t.fetch_seconds);
  metric("fetches_total", "Tier lookups (one per probed block prefix).", double(t.fetches));
  return o.str();
}

}  // namespace hqekv::server
