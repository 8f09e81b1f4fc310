#include "policy/snapkv_cache.h"

#include <algorithm>

#include "policy/selection.h"

namespace hqekv::policy {

Result<std::unique_ptr<KvCache>> SnapKvCache::Create(const PolicySpec& spec, const KvGeometry& g,
                                                     const CacheContext&) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  std::unique_ptr<SnapKvCache> c(new SnapKvCache(g, spec));
  HQEKV_RETURN_IF_ERROR(c->init_status());
  HQEKV_RETURN_IF_ERROR(c->Configure(spec));
  c->ResetPolicy();
  return std::unique_ptr<KvCache>(std::move(c));
}

Status SnapKvCache::Configure(const PolicySpec& spec) {
  window_ = spec.Int("window");
  kernel_ = spec.Int("kernel");
  if (kernel_ % 2 == 0)
    return MakeError("KV policy '" + spec.Canonical() + "': kernel must be odd");
  return Status::Ok();
}

std::vector<int64_t> SnapKvCache::LayerKeeps(int64_t k) const {
  return std::vector<int64_t>(g_.n_layers, k);
}

void SnapKvCache::ResetPolicy() {
  selected_ = false;
  layer_share_.assign(g_.n_layers, 1.0);
  prompt_end_.assign(g_.n_layers, -1);
  FreeVotes();
  status_.assign(g_.n_layers, LayerBudget{});
}

// Fresh containers are move-assigned (see EvictCache::ResetPolicy).
void SnapKvCache::FreeVotes() {
  FreeScores();
  pooled_.clear();
  for (int l = 0; l < g_.n_layers; ++l)
    pooled_.emplace_back(g_.n_kv_heads, cache::CountedVector<double>(StateAlloc<double>(l)));
  prompt_pos_.clear();
}

void SnapKvCache::OnAppend(int layer, int n) {
  if (!selected_) GrowScores(layer, n);
}

int SnapKvCache::FirstRecordedQuery(int layer, const int32_t* q_pos, int n) {
  return selected_ ? n : std::max(0, n - static_cast<int>(window_));
}

int64_t SnapKvCache::StateBytes(int layer) const {
  int64_t b = EvictCache::StateBytes(layer);
  for (const auto& p : pooled_[layer]) b += static_cast<int64_t>(p.capacity() * sizeof(double));
  return b;
}

std::string SnapKvCache::MinimumText() const {
  return "the observation window of " + std::to_string(window_) + " tokens per KV head";
}

Status SnapKvCache::ChooseVictims(int layer, int head, const std::vector<int32_t>& pos,
                                  int64_t keep, std::vector<int32_t>* out_idx) {
  const int64_t n = static_cast<int64_t>(pos.size());
  if (selected_) {
    DecodeVictims(layer, pos, keep, out_idx);
    return Status::Ok();
  }
  // pooled_ holds the raw votes of the prompt prefix; the prompt's
  // positions are the first prompt_len kept ones at selection time.
  const std::vector<double> votes(pooled_[layer][head].begin(), pooled_[layer][head].end());
  const int L = static_cast<int>(votes.size()) + static_cast<int>(window_);
  if (n <= keep || static_cast<int>(votes.size()) == 0) return Status::Ok();
  auto sel = SnapKvSelect(votes, L, static_cast<int>(window_), kernel_, keep);
  if (!sel.ok())
    return MakeError(describe_ + ": layer " + std::to_string(layer) + ": " + sel.message());
  // Kept prompt indices -> keep mask over the prompt (walk order is the
  // prompt order: nothing was evicted before the selection, and later
  // calls only evict more of the prompt).
  std::vector<char> keep_mask(L, 0);
  for (int32_t i : *sel) keep_mask[i] = 1;
  // The prompt tokens still kept are pos[0..]; map by prompt index through
  // the positions recorded in prompt_pos_ (first L positions at selection).
  const std::vector<int32_t>& ppos = prompt_pos_[layer][head];
  size_t j = 0;
  for (int i = 0; i < L && j < pos.size(); ++i) {
    if (ppos[i] != pos[j]) continue;  // already evicted
    if (!keep_mask[i]) out_idx->push_back(static_cast<int32_t>(j));
    ++j;
  }
  return Status::Ok();
}

void SnapKvCache::DecodeVictims(int layer, const std::vector<int32_t>& pos, int64_t keep,
                                std::vector<int32_t>* out_idx) const {
  const int64_t n = static_cast<int64_t>(pos.size());
  int64_t excess = n - keep;
  if (excess <= 0) return;
  const int64_t outside = std::max<int64_t>(0, n - window_);  // walk indices [0, outside)
  std::vector<char> out(n, 0);
  // Decoded tokens first (oldest first), then the prompt's, oldest first.
  for (int pass = 0; pass < 2 && excess > 0; ++pass) {
    for (int64_t j = 0; j < outside && excess > 0; ++j) {
      const bool decoded = pos[j] > prompt_end_[layer];
      if (decoded == (pass == 0) && !out[j]) {
        out[j] = 1;
        --excess;
      }
    }
  }
  for (int64_t j = 0; j < n; ++j)
    if (out[j]) out_idx->push_back(static_cast<int32_t>(j));
}

Status SnapKvCache::SelectPrompt() {
  const int64_t w = window_;
  std::vector<int64_t> layer_keep(g_.n_layers, 0);
  const int64_t L0 = store_->KeptTokens(0, 0);
  int64_t k = budget_.Tokens(L0, g_.head_dim, 0);
  const bool bits = budget_.kind == EvictionBudget::Kind::kBits;
  bool raised = false;
  if (L0 > w && k < w) {
    // A budget below the window (bytes, or keep=f of a short prompt: a
    // context shift re-prefills a window the user never chose): keep the
    // window, the structural minimum, and say so in BudgetNote().
    k = w;
    raised = true;
  }
  if (L0 > w && k < L0) {
    layer_keep = LayerKeeps(k);
  } else {
    std::fill(layer_keep.begin(), layer_keep.end(), L0);
  }
  prompt_pos_.assign(g_.n_layers, std::vector<std::vector<int32_t>>(g_.n_kv_heads));
  for (int l = 0; l < g_.n_layers; ++l) {
    // The layer's share of the byte budget, now and during decode.
    layer_share_[l] = static_cast<double>(layer_keep[l]) / std::max(1.0, static_cast<double>(k));
    if (!(L0 > w && k < L0)) layer_share_[l] = 1.0;
    for (int h = 0; h < g_.n_kv_heads; ++h) {
      std::vector<int32_t>& pp = prompt_pos_[l][h];
      store_->KeptPositions(l, h, &pp);
      if (!pp.empty()) prompt_end_[l] = std::max(prompt_end_[l], pp.back());
      const int64_t L = static_cast<int64_t>(pp.size());
      const cache::CountedVector<float>& s = scores_[l][h];
      if (L <= w || static_cast<int64_t>(s.size()) != L) {
        pooled_[l][h].clear();
        continue;
      }
      pooled_[l][h].assign(s.begin(), s.begin() + (L - w));
      HQEKV_RETURN_IF_ERROR(EvictHead(l, h, layer_keep[l]));
    }
    HQEKV_RETURN_IF_ERROR(Tidy(l));
    status_[l] = LayerBudget{};
    status_[l].met = !raised;
    status_[l].at_minimum = raised;
  }
  if (bits && L0 > w) HQEKV_RETURN_IF_ERROR(FitLayers(L0));
  // Votes and selection state are not needed after the prompt.
  FreeVotes();
  selected_ = true;
  return Status::Ok();
}

Status SnapKvCache::EndBatch(int n, bool is_prefill) {
  if (is_prefill && !selected_) return SelectPrompt();
  if (!selected_) {  // a batch before any prefill: votes are not kept
    for (auto& layer : scores_) {
      for (auto& s : layer) std::fill(s.begin(), s.end(), 0.0f);
    }
  }
  for (int l = 0; l < g_.n_layers; ++l) HQEKV_RETURN_IF_ERROR(Tidy(l));
  // bits=B holds at every point: trim the layers back to the bytes of the
  // tokens seen.
  if (selected_ && budget_.kind == EvictionBudget::Kind::kBits)
    HQEKV_RETURN_IF_ERROR(FitLayers(store_->AppendedTokens(0)));
  return Status::Ok();
}

Status SnapKvCache::FitLayers(int64_t seen) {
  const double total = budget_.LayerBytes(seen, g_.n_kv_heads, g_.head_dim);
  auto fit = [&](int l, double target) {
    std::vector<int64_t> keep(g_.n_kv_heads);
    for (int h = 0; h < g_.n_kv_heads; ++h) keep[h] = store_->KeptTokens(l, h);
    return FitBytes(l, target, MinKeep(seen), &keep);
  };
  // Each layer to its share; a layer held at its minimum (the window) above
  // its share (PyramidKV's deepest layers at small budgets) spills the
  // excess onto the others, in proportion to their shares.
  double spill = 0, free_share = 0;
  for (int l = 0; l < g_.n_layers; ++l) {
    HQEKV_RETURN_IF_ERROR(fit(l, total * layer_share_[l]));
    if (status_[l].met) {
      free_share += layer_share_[l];
    } else {
      spill += static_cast<double>(status_[l].held) - status_[l].target;
    }
  }
  if (spill <= 0 || free_share <= 0) return Status::Ok();
  double held = 0;
  for (int l = 0; l < g_.n_layers; ++l) {
    if (status_[l].met)
      HQEKV_RETURN_IF_ERROR(fit(l, total * layer_share_[l] * (1.0 - spill / (total * free_share))));
    held += static_cast<double>(status_[l].held);
  }
  // The model's budget is met when the layers together fit it.
  if (held <= total * g_.n_layers) {
    for (LayerBudget& b : status_) b.met = true;
  }
  return Status::Ok();
}

}  // namespace hqekv::policy
