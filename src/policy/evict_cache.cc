#include "policy/evict_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

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
EvictCache::EvictCache(const KvGeometry& g, const PolicySpec& spec)
    : StoreBackedCache(g, spec.Canonical(), 0, true, StoreTuning{256, 0, 256}),
      budget_(BudgetFromSpec(spec)) {}

// Fresh containers are move-assigned: assign() would copy-assign the inner
// vectors and keep their capacity (held, counted, useless bytes).
void EvictCache::ResetPolicy() {
  FreeScores();
  status_.assign(g_.n_layers, LayerBudget{});
}

void EvictCache::FreeScores() {
  scores_.clear();  // frees every layer's scores (the counters go back to 0)
  for (int l = 0; l < g_.n_layers; ++l)
    scores_.emplace_back(g_.n_kv_heads, cache::CountedVector<float>(StateAlloc<float>(l)));
}

// Exact capacity: a vector that doubles would hold up to twice the scores'
// bytes between evictions, and FitBytes would evict tokens to pay for the
// spare room (H2O at D = 8 ended ~8% under its bits= budget).
void EvictCache::GrowScores(int layer, int n) {
  for (auto& s : scores_[layer]) {
    s.reserve(s.size() + n);
    s.resize(s.size() + n, 0.0f);
  }
}

void EvictCache::OnRow(int layer, const cache::AttentionRow& row) {
  cache::CountedVector<float>& s = scores_[layer][row.kv_head];
  if (static_cast<int>(s.size()) != row.n_kept) s.resize(row.n_kept, 0.0f);  // defensive
  for (int j = 0; j < row.n_kept; ++j) s[j] += row.weights[j];
}

void EvictCache::OnColumns(int layer, const cache::AttentionColumns& c) {
  cache::CountedVector<float>& s = scores_[layer][c.kv_head];
  if (static_cast<int>(s.size()) != c.n_kept) s.resize(c.n_kept, 0.0f);  // as OnRow
  for (int j = 0; j < c.n_kept; ++j) s[j] += c.sums[j];
}

int64_t EvictCache::StateBytes(int layer) const {
  int64_t b = 0;
  for (const auto& s : scores_[layer]) b += static_cast<int64_t>(s.capacity() * sizeof(float));
  return b;
}

Status EvictCache::EvictHead(int layer, int head, int64_t keep) {
  std::vector<int32_t> pos;
  store_->KeptPositions(layer, head, &pos);
  std::vector<int32_t> out_idx;  // walk indices to evict, ascending
  HQEKV_RETURN_IF_ERROR(ChooseVictims(layer, head, pos, keep, &out_idx));
  if (out_idx.empty()) return Status::Ok();
  std::vector<int32_t> victims;
  victims.reserve(out_idx.size());
  for (int32_t j : out_idx) victims.push_back(pos[j]);
  HQEKV_RETURN_IF_ERROR(
      store_->EvictTokens(layer, head, victims.data(), static_cast<int>(victims.size())));
  OnEvicted(layer, head, out_idx);
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
        HQEKV_RETURN_IF_ERROR(
            store_->Seal(layer, uniform ? cache::kAllHeads : h, seal, quant::F16(), quant::F16()));
      }
    }
  }
  return store_->Compact(layer, cache::kAllHeads);
}

int64_t EvictCache::MinKeep(int64_t n_seen) const { return std::min(StructuralMinimum(), n_seen); }

int64_t EvictCache::FitHeldBytes(int layer) const {
  return store_->LayerHeldBytes(layer) + PersistentStateBytes(layer);
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
  const double cost = Fp16TokenCost(g_.head_dim, PerTokenStateBytes());
  LayerBudget& st = status_[layer];
  st.target = target;
  for (int iter = 0; iter < 256 + 9 * g_.n_kv_heads; ++iter) {  // coarse, then fine steps
    const double held = static_cast<double>(FitHeldBytes(layer));
    st.held = FitHeldBytes(layer);
    st.met = held <= target;
    if (st.met) return Status::Ok();
    // Tokens per head to evict, from a cost a quarter above the estimate:
    // the bytes a token frees vary (records, pages), and evicting too many
    // cannot be undone, so the fit approaches the target from above. Within
    // 8 such tokens per head of it, one token of one head (the one holding
    // the most) at a time: one token can free several times `cost` (a whole
    // chunk and its record, a block's rounding), and a last step of a few
    // tokens in every head overshot by 3% at D = 8.
    const int64_t dec =
        static_cast<int64_t>(std::floor((held - target) / (g_.n_kv_heads * cost * 1.25)));
    const bool fine = dec <= 8;
    int only = -1;  // fine: the head to evict from
    if (fine) {
      int64_t most = -1;
      for (int h = 0; h < g_.n_kv_heads; ++h) {
        const int64_t kept = std::min((*keep)[h], store_->KeptTokens(layer, h));
        if (kept > floor_keep && kept > most) {
          most = kept;
          only = h;
        }
      }
    }
    bool progress = false;
    for (int h = 0; h < g_.n_kv_heads; ++h) {
      if (fine && h != only) continue;
      const int64_t kept = store_->KeptTokens(layer, h);
      const int64_t want = std::max(floor_keep, std::min((*keep)[h], kept) - (fine ? 1 : dec));
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

Status EvictCache::EndBatch(int n, bool is_prefill) {
  for (int l = 0; l < g_.n_layers; ++l) {
    const int64_t seen = store_->AppendedTokens(l);
    const int64_t want = budget_.Tokens(seen, g_.head_dim, PerTokenStateBytes());
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
      HQEKV_RETURN_IF_ERROR(
          FitBytes(l, budget_.LayerBytes(seen, g_.n_kv_heads, g_.head_dim), floor_keep, &keep));
    }
  }
  return Status::Ok();
}

}  // namespace hqekv::policy
