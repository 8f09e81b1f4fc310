// StoreBackedCache::SaveState / LoadState: every compressing policy's cache
// as bytes (cache/kv_state.h wraps them in a checked file).
#include "policy/store_cache.h"

namespace hqekv::policy {

Status StoreBackedCache::SaveState(std::string* out) const {
  out->clear();
  cache::StateWriter w(out);
  w.PutString(describe_);
  store_->SaveState(w);
  SavePolicy(w);
  return Status::Ok();
}

Status StoreBackedCache::LoadState(std::string_view in) {
  const std::string where = "KV state of '" + describe_ + "'";
  cache::StateReader r(in);
  std::string saved;
  if (!r.GetString(&saved, 4096)) return MakeError(where + ": truncated");
  if (saved != describe_)
    return MakeError(where + ": the state was saved from another cache, '" + saved + "'");
  auto store = cache::KvStore::LoadState(store_->config(), r);
  if (!store.ok()) return MakeError(where + ": " + store.message());
  auto commit = LoadPolicy(r, **store);
  if (!commit.ok()) return MakeError(where + ": " + commit.message());
  if (!r.done()) return MakeError(where + ": trailing bytes");
  store_ = std::move(*store);
  (*commit)();
  return Status::Ok();
}

}  // namespace hqekv::policy
