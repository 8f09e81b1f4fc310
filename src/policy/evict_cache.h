// The shared base of the eviction policies over the KvStore: every kept token
// stays fp16 (sealed in raw 32-token chunks that the store repacks after
// token evictions). One file per policy derives from it:
//
//   streaming  (streaming_cache.h) the first `sink` tokens + the newest
//              tokens; evicts after every batch.
//   h2o        (h2o_cache.h) cumulative attention of every query so far
//              (prefill included), summed over the query heads of each KV
//              head; after every batch the newest `recent` tokens stay and
//              the `heavy` highest scores among the rest.
//   snapkv     (snapkv_cache.h) once, at the end of prefill, the last
//              `window` prompt queries vote; decode tokens are appended
//              unchanged.
//   pyramid    (pyramid_cache.h) snapkv with per-layer budgets shrinking
//              linearly with depth, same total.
//
// The base holds what they share: the token budget (policy/budget.h) and its
// per-layer outcome, the eviction of chosen tokens from the store (EvictHead
// over the policy's ChooseVictims), the sealing of full fp16 chunks (Tidy),
// the byte fit of bits=B (FitBytes), the budget note, the attention scores
// per kept token of the policies that record attention rows, and the default
// compression event (EndBatch: every batch, every layer down to its budget).
//
// Budgets: keep=f keeps floor(f * n_seen) tokens per (layer, KV head);
// bits=B keeps what fits in the true bytes of a B-bit cache (checked against
// the store's exact count, evicting further until it fits); streaming
// window=W and h2o heavy=,recent= are fixed token counts. No budget evicts
// below MinKeep; when a layer cannot meet its budget, BudgetNote() says so
// (library code prints nothing; the CLI shows the note).
// Store layout: no fp16 residual reserve, 256-byte pages (see the
// constructor in evict_cache.cc), so that the bytes held follow the kept
// tokens closely and grow monotonically with the budget.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "policy/budget.h"
#include "policy/spec.h"
#include "policy/store_cache.h"

namespace hqekv::policy {

class EvictCache : public StoreBackedCache {
 public:
  // The default compression event (streaming, H2O): after every batch, each
  // (layer, KV head) keeps max(budget, MinKeep) tokens; bits=B then fits the
  // layer's exact bytes (FitBytes).
  Status EndBatch(int n, bool is_prefill) override;
  // Non-empty when the last compression event could not meet the budget in
  // some layer: the policy kept its structural minimum (MinKeep) instead of
  // evicting below it.
  std::string BudgetNote() const override;

 protected:
  // Describe() is the spec's canonical form; the budget comes from its
  // keep= / bits= (a policy with a fixed size sets budget_ itself).
  EvictCache(const KvGeometry& g, const PolicySpec& spec);

  // ---- What each policy defines ----
  // Walk indices (ascending) of the kept tokens of (layer, head) to evict so
  // that at most `keep` stay, by the policy's rule; pos: the kept positions in
  // walk order. Leaving out_idx empty evicts nothing.
  virtual Status ChooseVictims(int layer, int head, const std::vector<int32_t>& pos, int64_t keep,
                               std::vector<int32_t>* out_idx) = 0;
  // After the chosen tokens left the store (H2O drops their scores).
  virtual void OnEvicted(int layer, int head, const std::vector<int32_t>& out_idx) {}
  // Structural minimum per (layer, KV head), which no budget evicts below
  // (before capping at the tokens seen), and its description for the note.
  virtual int64_t StructuralMinimum() const = 0;
  virtual std::string MinimumText() const = 0;
  // Bytes of policy state per kept (head, token) that outlive a compression
  // event (H2O: its float score), for the budget's token estimate.
  virtual int64_t PerTokenStateBytes() const { return 0; }
  // Bytes of policy state of a layer that outlive an event (FitBytes counts
  // them with the store's): H2O's scores; SnapKV's votes are freed right
  // after the selection.
  virtual int64_t PersistentStateBytes(int layer) const { return 0; }

  // ---- Shared machinery ----
  void ResetPolicy() override;
  // Adds every attention row to scores_ (H2O, SnapKV record rows).
  void OnRow(int layer, const cache::AttentionRow& row) override;
  // The same sums from the tiled prefill path (one call per KV head).
  bool RecordsSumsOnly() const override { return true; }
  void OnColumns(int layer, const cache::AttentionColumns& columns) override;
  int64_t StateBytes(int layer) const override;

  // Evicts (layer, head) down to at most `keep` tokens by ChooseVictims.
  Status EvictHead(int layer, int head, int64_t keep);
  // Seals full fp16 chunks of the residual and drops tombstones.
  Status Tidy(int layer);
  // bits=B: evicts further until the layer's exact bytes fit `target`, never
  // below `floor_keep` tokens per head; records the outcome in status_.
  Status FitBytes(int layer, double target, int64_t floor_keep, std::vector<int64_t>* keep);
  // StructuralMinimum() capped at n_seen.
  int64_t MinKeep(int64_t n_seen) const;
  // Grows the scores of every KV head of a layer by n zeros (new tokens).
  void GrowScores(int layer, int n);
  // Frees the scores (not the budget status).
  void FreeScores();
  // The budget outcome and the scores (evict_state.cc); each score list
  // holds one float per kept token, or none.
  void SavePolicy(cache::StateWriter& w) const override;
  Result<Commit> LoadPolicy(cache::StateReader& r, const cache::KvStore& store) override;

  // Outcome of the last compression event of one layer.
  struct LayerBudget {
    bool met = true;  // held <= target (bits=) / the token budget was >= the minimum
    bool at_minimum = false;
    int64_t held = 0;    // bytes held after the event (bits= only)
    double target = -1;  // byte budget (bits= only)
  };
  std::vector<LayerBudget> status_;
  EvictionBudget budget_;
  // [layer][kv head] -> one float per kept token, walk order: H2O's
  // cumulative scores, or SnapKV's votes (prefill only). Empty for
  // policies that record no attention rows.
  // Allocated through StateAlloc(layer) (counted).
  std::vector<std::vector<cache::CountedVector<float>>> scores_;

 private:
  // Held bytes of a layer as FitBytes counts them (store + persistent state).
  int64_t FitHeldBytes(int layer) const;
};

}  // namespace hqekv::policy
