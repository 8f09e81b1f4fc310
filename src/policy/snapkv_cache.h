// SnapKV (Li et al. 2024): once, at the end of prefill, the last `window`
// prompt queries vote (attention summed over them and the KV head's query
// heads), the votes are max-pooled with `kernel` (selection.h SnapKvSelect),
// and each KV head keeps its top (budget - window) prefix tokens plus the
// window. Budget: keep=f or bits=B (policy/budget.h); the window is the
// structural minimum. keep=f is a fraction of the prompt: decode tokens are
// appended unchanged. bits=B is a byte budget at every point (docs/
// policies.md): after every decode batch each layer is trimmed back to
// B bits per element of the tokens seen (its share of it for PyramidKV),
// evicting decoded tokens older than the newest `window` first, oldest
// first (the prompt selection stays), then the oldest prompt tokens.
// PyramidKV (pyramid_cache.h) derives from it and only changes how the
// budget is split over the layers (LayerKeeps).
#pragma once

#include <memory>

#include "policy/cache_context.h"
#include "policy/evict_cache.h"

namespace hqekv::policy {

class SnapKvCache : public EvictCache {
 public:
  static Result<std::unique_ptr<KvCache>> Create(const PolicySpec& spec, const KvGeometry& g,
                                                 const CacheContext& ctx);

  // Prefill: the selection (SelectPrompt); afterwards Tidy, and bits=B
  // trims every layer back to its byte budget (DecodeVictims).
  Status EndBatch(int n, bool is_prefill) override;

 protected:
  SnapKvCache(const KvGeometry& g, const PolicySpec& spec) : EvictCache(g, spec) {}
  // window= and kernel= of the spec (the error names the spec).
  Status Configure(const PolicySpec& spec);

  // Tokens each layer keeps of an L0-token prompt whose mean budget is k
  // tokens per (layer, KV head), window included: k everywhere.
  virtual std::vector<int64_t> LayerKeeps(int64_t k) const;

  void ResetPolicy() override;
  void OnAppend(int layer, int n) override;
  int FirstRecordedQuery(int layer, const int32_t* q_pos, int n) override;
  int64_t StateBytes(int layer) const override;
  Status ChooseVictims(int layer, int head, const std::vector<int32_t>& pos, int64_t keep,
                       std::vector<int32_t>* out_idx) override;
  // EvictCache's state and whether the selection is done (evict_state.cc);
  // the votes live only inside the selection.
  void SavePolicy(cache::StateWriter& w) const override;
  Result<Commit> LoadPolicy(cache::StateReader& r, const cache::KvStore& store) override;
  // The observation window.
  int64_t StructuralMinimum() const override { return window_; }
  std::string MinimumText() const override;

  int64_t window_ = 32;

 private:
  // The selection of every layer at the end of prefill.
  Status SelectPrompt();
  // bits=B after seen tokens: every layer trimmed to its share of the bytes
  // (FitBytes), the excess of layers held at their minimum taken from the
  // others.
  Status FitLayers(int64_t seen);
  // Frees the scores, the votes and the prompt positions.
  void FreeVotes();
  // Walk indices of the kept tokens to evict after the selection (bits=B
  // decode): decoded tokens (position > prompt_end_) outside the newest
  // window_ kept tokens, oldest first, then the oldest prompt tokens outside
  // that window, until `keep` stay.
  void DecodeVictims(int layer, const std::vector<int32_t>& pos, int64_t keep,
                     std::vector<int32_t>* out_idx) const;

  int kernel_ = 7;
  bool selected_ = false;  // selection done for this request
  // Set by the selection, saved with the state (evict_state.cc): per layer,
  // its share of the bits=B bytes (PyramidKV: its token budget over the
  // mean; else 1) and the last prompt position (-1: none).
  std::vector<double> layer_share_;
  std::vector<int32_t> prompt_end_;
  // [layer][kv head] -> raw votes of the prompt prefix and the prompt's
  // positions (during the selection only).
  // pooled_ is policy state (StateAlloc, counted); prompt_pos_ lives only
  // inside the selection (freed before EndBatch returns).
  std::vector<std::vector<cache::CountedVector<double>>> pooled_;
  std::vector<std::vector<std::vector<int32_t>>> prompt_pos_;
};

}  // namespace hqekv::policy
