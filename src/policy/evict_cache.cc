#include "policy/evict_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "policy/selection.h"

namespace hqekv::policy {

// Store layout of an eviction cache, sized to budgets of a few tokens per
// head on small heads:
// - no cached empty pages: they would be held bytes that no token uses;
// - no spare fp16 residual room (the default keeps 32 tokens per head: on
//   the bundled D = 8 model that is 1 KiB + 128 B per head, more than the
//   whole 2-bit budget of a 200-token prompt): kept tokens are fp16 anyway,
//   so the residual holds exactly the tokens not yet sealed;
// - 256-byte pages for every head size: every fp16 chunk plane larger than
//   that (a full chunk of D = 8 is 512 B, of D = 128 8 KiB) is one exact
//   dedicated block, and only position lists and very short chunks share
//   small pages. With the store's automatic pages (32 KiB at D = 128) a
//   budget of a few chunks per layer would be mostly empty page space, and
//   freeing a page at once made the bytes jump (not monotone in bits).
EvictCache::EvictCache(const KvGeometry& g, std::string describe, Mode mode)
    : StoreBackedCache(g, std::move(describe), 0, true, StoreTuning{256, 0, 256}), mode_(mode) {}

Result<std::unique_ptr<KvCache>> EvictCache::Create(const PolicySpec& spec, const KvGeometry& g) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  Mode mode;
  if (spec.name == "streaming") {
    mode = Mode::kStreaming;
  } else if (spec.name == "h2o") {
    mode = Mode::kH2o;
  } else if (spec.name == "snapkv") {
    mode = Mode::kSnapKv;
  } else if (spec.name == "pyramid") {
    mode = Mode::kPyramid;
  } else {
    return MakeError("EvictCache: not an eviction policy: '" + spec.name + "'");
  }
  std::unique_ptr<EvictCache> c(new EvictCache(g, spec.Canonical(), mode));
  HQEKV_RETURN_IF_ERROR(c->init_status());
  c->budget_ = BudgetFromSpec(spec);
  const std::string where = "KV policy '" + spec.Canonical() + "'";
  switch (mode) {
    case Mode::kStreaming:
      c->sink_ = spec.Int("sink");
      if (spec.Has("window")) {
        c->window_ = spec.Int("window");
        c->budget_.kind = EvictionBudget::Kind::kFixed;
        c->budget_.fixed = c->sink_ + c->window_;
      }
      break;
    case Mode::kH2o:
      if (spec.Has("heavy") != spec.Has("recent")) {
        return MakeError(where + ": give heavy and recent together (or keep / bits)");
      }
      if (spec.Has("heavy")) {
        c->fixed_h2o_ = true;
        c->heavy_ = spec.Int("heavy");
        c->recent_ = spec.Int("recent");
        if (c->heavy_ + c->recent_ <= 0) return MakeError(where + ": heavy + recent must be > 0");
        c->budget_.kind = EvictionBudget::Kind::kFixed;
        c->budget_.fixed = c->heavy_ + c->recent_;
      }
      c->recent_share_ = spec.Num("recent_share");
      break;
    case Mode::kPyramid:
      c->beta_ = spec.Num("beta");
      [[fallthrough]];
    case Mode::kSnapKv:
      c->window_ = spec.Int("window");
      c->kernel_ = spec.Int("kernel");
      if (c->kernel_ % 2 == 0) return MakeError(where + ": kernel must be odd");
      break;
  }
  c->ResetPolicy();
  return std::unique_ptr<KvCache>(std::move(c));
}

// Fresh containers are move-assigned: assign() would copy-assign the inner
// vectors and keep their capacity (held, counted, useless bytes).
void EvictCache::ResetPolicy() {
  selected_ = false;
  FreeScores();
  status_.assign(g_.n_layers, LayerBudget{});
}

void EvictCache::FreeScores() {
  scores_ = std::vector<std::vector<std::vector<float>>>(
      g_.n_layers, std::vector<std::vector<float>>(g_.n_kv_heads));
  pooled_ = std::vector<std::vector<std::vector<double>>>(
      g_.n_layers, std::vector<std::vector<double>>(g_.n_kv_heads));
  prompt_pos_.clear();
}

void EvictCache::OnAppend(int layer, int n) {
  if (mode_ == Mode::kStreaming) return;
  if ((mode_ == Mode::kSnapKv || mode_ == Mode::kPyramid) && selected_) return;
  for (auto& s : scores_[layer]) s.resize(s.size() + n, 0.0f);
}

int EvictCache::FirstRecordedQuery(int layer, const int32_t* q_pos, int n) {
  switch (mode_) {
    case Mode::kStreaming: return n;
    case Mode::kH2o: return 0;  // every query, every step
    case Mode::kSnapKv:
    case Mode::kPyramid: return selected_ ? n : std::max(0, n - static_cast<int>(window_));
  }
  return n;
}

void EvictCache::OnRow(int layer, const cache::AttentionRow& row) {
  std::vector<float>& s = scores_[layer][row.kv_head];
  if (static_cast<int>(s.size()) != row.n_kept) s.resize(row.n_kept, 0.0f);  // defensive
  for (int j = 0; j < row.n_kept; ++j) s[j] += row.weights[j];
}

int64_t EvictCache::StateBytes(int layer) const {
  int64_t b = 0;
  for (const auto& s : scores_[layer]) b += static_cast<int64_t>(s.capacity() * sizeof(float));
  for (const auto& p : pooled_[layer]) b += static_cast<int64_t>(p.capacity() * sizeof(double));
  return b;
}

Status EvictCache::EvictHead(int layer, int head, int64_t keep) {
  std::vector<int32_t> pos;
  store_->KeptPositions(layer, head, &pos);
  const int64_t n = static_cast<int64_t>(pos.size());
  std::vector<int32_t> out_idx;  // walk indices to evict, ascending
  switch (mode_) {
    case Mode::kStreaming: {
      if (n <= keep) return Status::Ok();
      const int64_t first = std::min<int64_t>(sink_, keep);
      for (int64_t j = first; j < n - (keep - first); ++j) out_idx.push_back(static_cast<int32_t>(j));
      break;
    }
    case Mode::kH2o: {
      if (n <= keep) return Status::Ok();
      const int64_t recent =
          fixed_h2o_ ? std::min(recent_, keep)
                     : static_cast<int64_t>(std::llround(recent_share_ * static_cast<double>(keep)));
      const std::vector<float>& s = scores_[layer][head];
      out_idx = H2oEvict(std::vector<double>(s.begin(), s.end()), keep, recent);
      break;
    }
    case Mode::kSnapKv:
    case Mode::kPyramid: {
      // pooled_ holds the raw votes of the prompt prefix; the prompt's
      // positions are the first prompt_len kept ones at selection time.
      const std::vector<double>& votes = pooled_[layer][head];
      const int L = static_cast<int>(votes.size()) + static_cast<int>(window_);
      if (n <= keep || static_cast<int>(votes.size()) == 0) return Status::Ok();
      auto sel = SnapKvSelect(votes, L, static_cast<int>(window_), kernel_, keep);
      if (!sel.ok()) return MakeError(describe_ + ": layer " + std::to_string(layer) + ": " + sel.message());
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
        if (!keep_mask[i]) out_idx.push_back(static_cast<int32_t>(j));
        ++j;
      }
      break;
    }
  }
  if (out_idx.empty()) return Status::Ok();
  std::vector<int32_t> victims;
  victims.reserve(out_idx.size());
  for (int32_t j : out_idx) victims.push_back(pos[j]);
  HQEKV_RETURN_IF_ERROR(
      store_->EvictTokens(layer, head, victims.data(), static_cast<int>(victims.size())));
  if (mode_ == Mode::kH2o) {
    std::vector<float>& s = scores_[layer][head];
    std::vector<float> kept;
    kept.reserve(s.size() - out_idx.size());
    size_t e = 0;
    for (size_t j = 0; j < s.size(); ++j) {
      if (e < out_idx.size() && static_cast<size_t>(out_idx[e]) == j) {
        ++e;
      } else {
        kept.push_back(s[j]);
      }
    }
    s.swap(kept);  // exact capacity: the state bytes are what is kept
  }
  return Status::Ok();
}

Status EvictCache::Tidy(int layer) {
  const int r = store_->ResidualSize(layer, 0);
  bool uniform = true;  // every head's residual has the same size?
  for (int h = 1; h < g_.n_kv_heads; ++h) uniform = uniform && store_->ResidualSize(layer, h) == r;
  for (int h = 0; h < g_.n_kv_heads; ++h) {
    if (!uniform || h == 0) {
      const int rh = store_->ResidualSize(layer, uniform ? 0 : h);
      const int seal = rh - rh % 32;
      if (seal > 0) {
        HQEKV_RETURN_IF_ERROR(store_->Seal(layer, uniform ? cache::kAllHeads : h, seal,
                                           quant::F16(), quant::F16()));
      }
    }
  }
  return store_->Compact(layer, cache::kAllHeads);
}

int64_t EvictCache::MinKeep(int64_t n_seen) const {
  int64_t m = 1;
  switch (mode_) {
    case Mode::kStreaming: m = sink_ + std::max<int64_t>(1, window_); break;
    case Mode::kH2o: m = fixed_h2o_ ? heavy_ + recent_ : 1; break;
    case Mode::kSnapKv:
    case Mode::kPyramid: m = window_; break;
  }
  return std::min(m, n_seen);
}

std::string EvictCache::MinimumText() const {
  switch (mode_) {
    case Mode::kStreaming:
      return "the " + std::to_string(sink_) + " sink tokens + the newest " +
             std::to_string(std::max<int64_t>(1, window_)) + " per KV head";
    case Mode::kH2o: return "the newest token per KV head";
    case Mode::kSnapKv:
    case Mode::kPyramid:
      return "the observation window of " + std::to_string(window_) + " tokens per KV head";
  }
  return "";
}

int64_t EvictCache::FitHeldBytes(int layer) const {
  // Only state that outlives the event counts: SnapKV's votes are freed right
  // after the selection.
  return store_->LayerHeldBytes(layer) + (mode_ == Mode::kH2o ? StateBytes(layer) : 0);
}

std::string EvictCache::BudgetNote() const {
  int unmet = 0;
  int64_t held = 0;
  double target = 0;
  bool bytes = false;
  for (const LayerBudget& b : status_) {
    unmet += !b.met;
    held += b.held;
    if (b.target >= 0) {
      bytes = true;
      target += b.target;
    }
  }
  if (unmet == 0) return "";
  std::string note = describe_ + ": budget not met in " + std::to_string(unmet) + " of " +
                     std::to_string(status_.size()) + " layers: kept the structural minimum (" +
                     MinimumText() + ")";
  if (bytes) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "; holds %lld bytes for a budget of %.0f bytes",
                  static_cast<long long>(held), target);
    note += buf;
  }
  return note;
}

Status EvictCache::FitBytes(int layer, double target, int64_t floor_keep,
                            std::vector<int64_t>* keep) {
  const double cost = Fp16TokenCost(g_.head_dim, mode_ == Mode::kH2o ? 4 : 0);
  LayerBudget& st = status_[layer];
  st.target = target;
  for (int iter = 0; iter < 256; ++iter) {
    const double held = static_cast<double>(FitHeldBytes(layer));
    st.held = FitHeldBytes(layer);
    st.met = held <= target;
    if (st.met) return Status::Ok();
    const int64_t dec = std::max<int64_t>(
        1, static_cast<int64_t>(std::ceil((held - target) / (g_.n_kv_heads * cost))));
    bool progress = false;
    for (int h = 0; h < g_.n_kv_heads; ++h) {
      const int64_t kept = store_->KeptTokens(layer, h);
      const int64_t want = std::max(floor_keep, std::min((*keep)[h], kept) - dec);
      if (want < kept) {
        (*keep)[h] = want;
        HQEKV_RETURN_IF_ERROR(EvictHead(layer, h, want));
        progress = true;
      }
    }
    HQEKV_RETURN_IF_ERROR(Tidy(layer));
    if (!progress) {  // only the minimum is left: it (or fixed costs) exceeds the budget
      st.at_minimum = true;
      break;
    }
  }
  st.held = FitHeldBytes(layer);
  st.met = static_cast<double>(st.held) <= target;
  return Status::Ok();
}

Status EvictCache::SelectPrompt() {
  const int64_t w = window_;
  std::vector<int64_t> layer_keep(g_.n_layers, 0);
  const int64_t L0 = store_->KeptTokens(0, 0);
  int64_t k = budget_.Tokens(L0, g_.head_dim, 0);
  const bool bits = budget_.kind == EvictionBudget::Kind::kBits;
  bool raised = false;
  if (bits && L0 > w && k < w) {
    // A byte budget below the window: keep the window (the structural
    // minimum) and say so in BudgetNote(); keep=f below it stays an error.
    k = w;
    raised = true;
  }
  if (L0 > w && k < L0) {
    if (k < w) {
      return MakeError(describe_ + ": budget of " + std::to_string(k) +
                       " tokens for a prompt of " + std::to_string(L0) +
                       " is smaller than the observation window " + std::to_string(w) +
                       " (raise keep/bits or lower window)");
    }
    if (mode_ == Mode::kPyramid) {
      const std::vector<int64_t> extra = PyramidBudgets(k - w, g_.n_layers, beta_);
      for (int l = 0; l < g_.n_layers; ++l) layer_keep[l] = extra[l] + w;
    } else {
      std::fill(layer_keep.begin(), layer_keep.end(), k);
    }
  } else {
    std::fill(layer_keep.begin(), layer_keep.end(), L0);
  }
  prompt_pos_.assign(g_.n_layers, std::vector<std::vector<int32_t>>(g_.n_kv_heads));
  for (int l = 0; l < g_.n_layers; ++l) {
    for (int h = 0; h < g_.n_kv_heads; ++h) {
      std::vector<int32_t>& pp = prompt_pos_[l][h];
      store_->KeptPositions(l, h, &pp);
      const int64_t L = static_cast<int64_t>(pp.size());
      std::vector<float>& s = scores_[l][h];
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
    if (bits && L0 > w) {
      // The layer's share of the total bytes: its budget relative to the mean.
      const double mean = static_cast<double>(k);
      const double target = budget_.LayerBytes(L0, g_.n_kv_heads, g_.head_dim) *
                            static_cast<double>(layer_keep[l]) / std::max(1.0, mean);
      std::vector<int64_t> keep(g_.n_kv_heads, layer_keep[l]);
      HQEKV_RETURN_IF_ERROR(FitBytes(l, target, MinKeep(L0), &keep));
    }
  }
  // Votes and selection state are not needed after the prompt.
  FreeScores();
  prompt_pos_.clear();
  selected_ = true;
  return Status::Ok();
}

Status EvictCache::EndBatch(int n, bool is_prefill) {
  if (mode_ == Mode::kSnapKv || mode_ == Mode::kPyramid) {
    if (is_prefill && !selected_) return SelectPrompt();
    if (!selected_) {  // a batch before any prefill: votes are not kept
      for (auto& layer : scores_) {
        for (auto& s : layer) std::fill(s.begin(), s.end(), 0.0f);
      }
    }
    for (int l = 0; l < g_.n_layers; ++l) HQEKV_RETURN_IF_ERROR(Tidy(l));
    return Status::Ok();
  }
  for (int l = 0; l < g_.n_layers; ++l) {
    const int64_t seen = store_->AppendedTokens(l);
    const int64_t want = budget_.Tokens(seen, g_.head_dim, mode_ == Mode::kH2o ? 4 : 0);
    // Never below the structural minimum: a budget that asks for less keeps
    // the minimum and reports it (BudgetNote) instead of evicting everything.
    const int64_t floor_keep = MinKeep(seen);
    const int64_t k = std::max(want, floor_keep);
    std::vector<int64_t> keep(g_.n_kv_heads, k);
    for (int h = 0; h < g_.n_kv_heads; ++h) HQEKV_RETURN_IF_ERROR(EvictHead(l, h, k));
    HQEKV_RETURN_IF_ERROR(Tidy(l));
    status_[l] = LayerBudget{};
    status_[l].met = want >= floor_keep;
    status_[l].at_minimum = want < floor_keep;
    if (budget_.kind == EvictionBudget::Kind::kBits) {
      HQEKV_RETURN_IF_ERROR(FitBytes(
          l, budget_.LayerBytes(seen, g_.n_kv_heads, g_.head_dim), floor_keep, &keep));
    }
  }
  return Status::Ok();
}

}  // namespace hqekv::policy
