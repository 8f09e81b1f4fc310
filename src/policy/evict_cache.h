// Eviction policies over the KvStore: every kept token stays fp16 (sealed in
// raw 32-token chunks that the store repacks after token evictions).
//
//   streaming  the first `sink` tokens + the newest tokens; evicts after every
//              batch.
//   h2o        cumulative attention of every query so far (prefill included),
//              summed over the query heads of each KV head; after every batch
//              the newest `recent` tokens stay and the `heavy` highest scores
//              among the rest; the rest is evicted (per KV head).
//   snapkv     once, at the end of prefill: the last `window` prompt queries
//              vote (attention summed over them and the KV head's query
//              heads), votes are max-pooled with `kernel`, each KV head keeps
//              its top (budget - window) prefix tokens plus the window. Decode
//              tokens are appended unchanged.
//   pyramid    snapkv with per-layer budgets from PyramidBudgets (shrinking
//              linearly with depth, same total).
//
// Budgets (policy/budget.h): keep=f keeps floor(f * n_seen) tokens per
// (layer, KV head); bits=B keeps what fits in the true bytes of a B-bit cache
// (checked against the store's exact count, evicting further until it fits);
// streaming window=W and h2o heavy=,recent= are fixed token counts. No budget
// evicts below MinKeep; when a layer cannot meet its budget, BudgetNote()
// says so (library code prints nothing; the CLI shows the note).
// Store layout: no fp16 residual reserve, 256-byte pages (see the
// constructor in evict_cache.cc), so that the bytes held follow the kept
// tokens closely and grow monotonically with the budget.
#pragma once

#include <memory>
#include <vector>

#include "policy/budget.h"
#include "policy/spec.h"
#include "policy/store_cache.h"

namespace hqekv::policy {

class EvictCache final : public StoreBackedCache {
 public:
  enum class Mode { kStreaming, kH2o, kSnapKv, kPyramid };
  static Result<std::unique_ptr<KvCache>> Create(const PolicySpec& spec, const KvGeometry& g);

  Status EndBatch(int n, bool is_prefill) override;
  // Non-empty when the last compression event could not meet the budget in
  // some layer: the policy kept its structural minimum (MinKeep) instead of
  // evicting below it.
  std::string BudgetNote() const override;

 protected:
  void ResetPolicy() override;
  void OnAppend(int layer, int n) override;
  int FirstRecordedQuery(int layer, const int32_t* q_pos, int n) override;
  void OnRow(int layer, const cache::AttentionRow& row) override;
  int64_t StateBytes(int layer) const override;

 private:
  EvictCache(const KvGeometry& g, std::string describe, Mode mode);

  // Evicts (layer, head) down to at most `keep` tokens by the policy's rule.
  Status EvictHead(int layer, int head, int64_t keep);
  // SnapKV / PyramidKV selection of every layer at the end of prefill.
  Status SelectPrompt();
  // Seals full fp16 chunks of the residual and drops tombstones.
  Status Tidy(int layer);
  // bits=B: evicts further until the layer's exact bytes fit `target`, never
  // below `floor_keep` tokens per head; records the outcome in status_.
  Status FitBytes(int layer, double target, int64_t floor_keep, std::vector<int64_t>* keep);
  // Structural minimum per (layer, KV head) after n_seen tokens, which no
  // budget evicts below: streaming the sink plus the newest token (or the
  // given window), h2o the newest token, snapkv/pyramid the observation
  // window (capped at n_seen).
  int64_t MinKeep(int64_t n_seen) const;
  std::string MinimumText() const;
  // Frees the scores and votes (not the budget status).
  void FreeScores();
  // Held bytes of a layer as FitBytes counts them (store + persistent state).
  int64_t FitHeldBytes(int layer) const;

  // Outcome of the last compression event of one layer.
  struct LayerBudget {
    bool met = true;       // held <= target (bits=) / the token budget was >= the minimum
    bool at_minimum = false;
    int64_t held = 0;      // bytes held after the event (bits= only)
    double target = -1;    // byte budget (bits= only)
  };
  std::vector<LayerBudget> status_;

  Mode mode_;
  EvictionBudget budget_;
  int sink_ = 4;
  int64_t window_ = 0;    // streaming fixed window (0: from budget); snapkv window
  int kernel_ = 7;
  double beta_ = 20;
  bool fixed_h2o_ = false;
  int64_t heavy_ = 0, recent_ = 0;
  double recent_share_ = 0.5;
  bool selected_ = false;  // snapkv/pyramid: selection done for this request
  // [layer][kv head] -> one float per kept token, walk order: H2O cumulative
  // scores, or SnapKV votes (prefill only).
  std::vector<std::vector<std::vector<float>>> scores_;
  // [layer][kv head] -> raw votes of the prompt prefix and the prompt's
  // positions (during the selection only).
  std::vector<std::vector<std::vector<double>>> pooled_;
  std::vector<std::vector<std::vector<int32_t>>> prompt_pos_;
};

}  // namespace hqekv::policy
