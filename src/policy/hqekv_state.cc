// HqekvCache's own state in a KV state file (StoreBackedCache::SavePolicy /
// LoadPolicy): what a restored cache needs to continue exactly as the
// uninterrupted one: the tier ratios (bits= solves them at every event), the
// budget flags, the chunks compressed so far, the pool-table bytes the
// bits= solver measured at the last event, and per unit the K/V tier of
// every live chunk, Range(V) of every compressed token and the open
// importance windows (sums and query positions) and, with select=token, the
// residual tokens' fp32 sums, each with its capacity.
#include <memory>

#include "policy/hqekv_cache.h"

namespace hqekv::policy {

void HqekvCache::SavePolicy(cache::StateWriter& w) const {
  for (const TierRatios& t : ratios_) {
    for (double x : {t.r4, t.r2, t.r1, t.r0}) w.Put(x);
  }
  w.Put<uint8_t>(budget_below_ ? 1 : 0);
  w.Put<uint8_t>(budget_above_ ? 1 : 0);
  w.PutArray(compressed_chunks_.data(), compressed_chunks_.size());
  w.PutArray(table_bytes_.data(), table_bytes_.size());
  for (const auto& layer : units_) {
    for (const Unit& u : layer) {
      w.PutVector(u.tk);
      w.PutVector(u.tv);
      w.PutVector(u.range);
      w.PutVector(u.range_max);
      w.PutVector(u.cur);
      w.PutVector(u.next);
      w.PutVector(u.cur_q);
      w.PutVector(u.next_q);
      w.PutVector(u.rsum);
    }
  }
}

Result<StoreBackedCache::Commit> HqekvCache::LoadPolicy(cache::StateReader& r,
                                                        const cache::KvStore& store) {
  struct Staged {
    std::vector<TierRatios> ratios;
    bool below = false, above = false;
    std::vector<int64_t> compressed, table;
    std::vector<std::vector<Unit>> units;
  };
  auto st = std::make_shared<Staged>();
  st->ratios.resize(g_.n_layers);
  for (TierRatios& t : st->ratios) {
    if (!r.Get(&t.r4) || !r.Get(&t.r2) || !r.Get(&t.r1) || !r.Get(&t.r0))
      return MakeError("HqeKV state: truncated ratios");
  }
  uint8_t below = 0, above = 0;
  st->compressed.resize(g_.n_layers);
  if (!r.Get(&below) || !r.Get(&above) || below > 1 || above > 1 ||
      !r.GetArray(st->compressed.data(), st->compressed.size()))
    return MakeError("HqeKV state: truncated budget flags");
  st->table.resize(g_.n_layers);
  if (!r.GetArray(st->table.data(), st->table.size()))
    return MakeError("HqeKV state: truncated pool-table sizes");
  for (int64_t t : st->table) {
    if (t < 0) return MakeError("HqeKV state: negative pool-table size");
  }
  st->below = below != 0;
  st->above = above != 0;
  for (int l = 0; l < g_.n_layers; ++l) {
    st->units.emplace_back();
    const uint64_t appended = static_cast<uint64_t>(store.AppendedTokens(l));
    for (int u = 0; u < o_.units_per_layer; ++u) {
      const std::string where =
          "HqeKV state: layer " + std::to_string(l) + ", unit " + std::to_string(u) + ": ";
      const int h0 = o_.per_head ? u : 0, h1 = o_.per_head ? u + 1 : g_.n_kv_heads;
      // Between events every live chunk is a full, hole-free 32-token chunk
      // (Compress seals whole chunks, evicts whole chunks and compacts).
      const int live = store.NumChunks(l, h0);
      for (int h = h0; h < h1; ++h) {
        if (store.NumChunks(l, h) != live) return MakeError(where + "heads disagree");
        for (int c = 0; c < live; ++c) {
          const cache::ChunkView v = store.Chunk(l, h, c);
          if (v.T != kHqekvChunk || v.kept != (uint64_t{1} << kHqekvChunk) - 1)
            return MakeError(where + "a chunk is not a whole 32-token chunk");
        }
      }
      const uint64_t kept = static_cast<uint64_t>(store.KeptTokens(l, h0));
      Unit U(StateAlloc<char>(l));
      const uint64_t cap_chunks = 2 * static_cast<uint64_t>(live) + 64;
      const uint64_t cap_tokens = 2 * appended + 2 * kHqekvChunk + 64;
      if (!r.GetVector(&U.tk, cap_chunks) || !r.GetVector(&U.tv, cap_chunks) ||
          !r.GetVector(&U.range, cap_tokens) || !r.GetVector(&U.range_max, cap_chunks) ||
          !r.GetVector(&U.cur, cap_tokens) || !r.GetVector(&U.next, cap_tokens) ||
          !r.GetVector(&U.cur_q, cap_tokens) || !r.GetVector(&U.next_q, cap_tokens) ||
          !r.GetVector(&U.rsum, cap_tokens * static_cast<uint64_t>(g_.n_kv_heads)))
        return MakeError(where + "truncated or oversized");
      bool ok = static_cast<int>(U.tk.size()) == live && U.tv.size() == U.tk.size() &&
                U.range_max.size() == U.tk.size() &&
                U.range.size() == static_cast<size_t>(live) * kHqekvChunk && U.cur.size() <= kept &&
                U.next.size() <= kept && live <= st->compressed[l] &&
                U.rsum.size() <= static_cast<size_t>(store.ResidualSize(l, h0)) * g_.n_kv_heads;
      for (size_t c = 0; ok && c < U.tk.size(); ++c)
        ok = U.tk[c] <= Tier::kLow && U.tv[c] <= Tier::kLow;
      if (!ok) return MakeError(where + "tiers, ranges or windows do not match the store");
      st->units.back().push_back(std::move(U));
    }
  }
  return Commit([this, st] {
    ratios_ = std::move(st->ratios);
    budget_below_ = st->below;
    budget_above_ = st->above;
    compressed_chunks_ = std::move(st->compressed);
    table_bytes_ = std::move(st->table);
    units_ = std::move(st->units);
  });
}

}  // namespace hqekv::policy
