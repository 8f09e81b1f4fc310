// HqeKV's byte solver for bits=B: tier bytes, the tier menu slots, what a layer
// holds and may hold, and the chunk counts of an event (hqekv_cache.h).
#include "policy/hqekv_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "policy/budget.h"
#include "policy/hqekv_menu.h"
#include "policy/hqekv_options.h"
#include "policy/true_bits.h"

namespace hqekv::policy {

namespace {
// Small heads: the tier menu from this many bits under the all-u8 cost
// estimate (SolveBudgetTiers).
constexpr double kSmallHeadMenuMargin = 1.0;
// Heads >= 32: select=auto takes token selection from this many bits under
// the all-bottom-slot cost estimate (SolveBudgetTiers).
constexpr double kTokenSelectUnderBottom = 0.15;
constexpr int64_t kTokenSelectFromCtx = 2048;
}  // namespace

void HqekvCache::SetTierBytes() {
  for (Tier t : {Tier::kF16, Tier::kHigh, Tier::kMid, Tier::kLow}) {
    const int i = static_cast<int>(t);
    k_bytes_[i] = StreamPlaneBytes(model_.layout, TierFormat(t, true));
    v_bytes_[i] = StreamPlaneBytes(model_.layout, TierFormat(t, false));
    model_.tier_bytes[i] = k_bytes_[i] + v_bytes_[i];
  }
}

void HqekvCache::ChooseMenuSlots(double budget, int64_t n, double k_weight) {
  const int D = g_.head_dim;
  const quant::Grouping v_grouping =
      o_.v_per_channel ? quant::Grouping::kPerChannel : quant::Grouping::kPerToken;
  auto choices = [&](quant::Grouping grouping, bool k_like) {
    std::vector<StreamChoice> out;
    for (const quant::Format& f : MenuFormats(kHqekvChunk, D, grouping, o_.vgroup, o_.hadamard)) {
      // Small heads (the menu only near all-u8 there): nothing under 4 bits.
      // The synthetic chunk ranks u8 K with u3 V above u4 / u4, which on
      // stories260K had 3.5x the KL of the u8 / u4 mix at 7.8 bits.
      if (o_.small && f.bits < 4) continue;
      out.push_back(
          {f, StreamPlaneBytes(model_.layout, f), MeasureStreamError(f, kHqekvChunk, D, k_like)});
    }
    return out;
  };
  const std::vector<StreamChoice> k = choices(quant::Grouping::kPerChannel, true);
  const std::vector<StreamChoice> v = choices(v_grouping, false);
  const std::vector<KvChoice> front = KvFrontier(k, v, k_weight, 1.0);
  // Each pair's bits with every chunk in it, at the full context.
  std::vector<double> bits;
  HqekvCostModel m = model_;
  for (const KvChoice& c : front) {
    m.tier_bytes[static_cast<int>(Tier::kHigh)] = c.bytes;
    bits.push_back(m.TierBits(n)[0]);
  }
  double lo = budget, hi = budget;
  for (const double d : o_.layer_bits) {
    lo = std::min(lo, budget + d);
    hi = std::max(hi, budget + d);
  }
  const std::array<int, 3> slot = PickSlots(bits, budget, lo, hi);
  for (int i = 0; i < 3; ++i) {
    o_.k_tiers[i] = k[front[slot[i]].k].format;
    o_.v_tiers[i] = v[front[slot[i]].v].format;
  }
  SetTierBytes();
}

int64_t HqekvCache::UnitPlaneBytes(Tier k, Tier v) const {
  // k_bytes_ / v_bytes_ cover every KV head; a per-head unit holds one.
  return (k_bytes_[static_cast<int>(k)] + v_bytes_[static_cast<int>(v)]) / o_.units_per_layer;
}

int64_t HqekvCache::TokensToWindow(int layer) const {
  if (o_.token_select) return 1;  // the sums are always open
  // FirstRecordedQuery: a decode query is recorded once the residual
  // (counting its own token) reaches 33 - m tokens.
  const int64_t r0 = store_->ResidualSize(layer, 0);
  return std::max<int64_t>(1, kHqekvChunk + 1 - o_.m - r0);
}

int64_t HqekvCache::WindowGrowth(int layer, int64_t ahead) const {
  const int64_t r0 = store_->ResidualSize(layer, 0);
  int64_t grow = 0;
  if (o_.token_select) {
    // fp16 sums of the sealed tokens (fixed until the next event), fp32 sums
    // of the residual tokens (one more per step); both grow by a chunk.
    for (const Unit& U : units_[layer]) {
      const int64_t sealed = static_cast<int64_t>(U.tk.size()) * kHqekvChunk;
      const int64_t cap = static_cast<int64_t>(U.cur.capacity());
      if (cap < sealed) grow += static_cast<int64_t>(sizeof(f16_t)) * (sealed + kHqekvChunk - cap);
      const int64_t rcap = static_cast<int64_t>(U.rsum.capacity()), Hs = TokenHeads();
      if (rcap < (r0 + ahead) * Hs)
        grow += static_cast<int64_t>(sizeof(float)) * ((r0 + ahead + kHqekvChunk) * Hs - rcap);
    }
    return grow;
  }
  for (const Unit& U : units_[layer]) {
    // OnRow: the sums grow to the kept tokens at the first recorded row,
    // reserving a chunk more; OnAttended: one query position per step, by
    // push_back (capacity at most twice what it holds, m more queries).
    const int64_t kept = static_cast<int64_t>(U.tk.size()) * kHqekvChunk + r0 + ahead;
    const int64_t cap = static_cast<int64_t>(U.cur.capacity());
    if (cap < kept) grow += static_cast<int64_t>(sizeof(f16_t)) * (kept + kHqekvChunk - cap);
    const int64_t q_cap = 2 * (static_cast<int64_t>(U.cur_q.size()) + o_.m);
    grow += static_cast<int64_t>(sizeof(int32_t)) *
            std::max<int64_t>(0, q_cap - static_cast<int64_t>(U.cur_q.capacity()));
  }
  return grow;
}

double HqekvCache::LayerBudget(int layer) const {
  return o_.layer_bits.empty() ? o_.true_bits : o_.true_bits + o_.layer_bits[layer];
}

int64_t HqekvCache::BudgetBytes(int layer, int64_t tokens) const {
  return static_cast<int64_t>(
      std::floor(TrueBitsBytes(LayerBudget(layer), tokens, g_.n_kv_heads, g_.head_dim)));
}

int64_t HqekvCache::ResidualTokenBytes() const {
  const int64_t row = static_cast<int64_t>(store_->ResidualRowUnits() * sizeof(f16_t));
  return static_cast<int64_t>(g_.n_kv_heads) * (2 * row + 4);
}

bool HqekvCache::HoldsBudget(int layer) const {
  const int64_t n = store_->AppendedTokens(layer);
  const int64_t held = LayerAllocatedBytes(layer);
  if (o_.token_select) {
    // No residual reserve: the next decode step adds one fp16 token per
    // head (and its sums) before the next event can evict.
    const int64_t steps = 1;
    const int64_t grow = steps * ResidualTokenBytes() + WindowGrowth(layer, steps);
    return LayerBits(model_.layout, held, n) <= LayerBudget(layer) &&
           LayerBits(model_.layout, held + grow, n + steps) <= LayerBudget(layer);
  }
  const int64_t ahead = TokensToWindow(layer);
  const double now = LayerBits(model_.layout, held, n);
  const double peak = LayerBits(
      model_.layout, held + WindowGrowth(layer, ahead) + ResidualGrowth(ahead), n + ahead);
  // The residual costs 16 bits per element and the budget grows by B per
  // token: the last step before the seal is the tightest.
  const int64_t to_seal = TokensToSealPeak(layer);
  const double seal =
      to_seal == 0
          ? now
          : LayerBits(model_.layout, held + WindowGrowth(layer, to_seal) + ResidualGrowth(to_seal),
                      n + to_seal);
  return std::max({now, peak, seal}) <= LayerBudget(layer);
}

int64_t HqekvCache::TokensToSealPeak(int layer) const {
  if (o_.token_select || store_->config().residual_reserve != 0) return 0;
  // (Not past the cache's context: the sequence ends there.)
  const int64_t left = std::max<int64_t>(0, g_.max_ctx - store_->AppendedTokens(layer));
  return std::clamp<int64_t>(kHqekvChunk - 1 - store_->ResidualSize(layer, 0), 0, left);
}

int64_t HqekvCache::ResidualGrowth(int64_t steps) const {
  return store_->config().residual_reserve == 0 ? steps * ResidualTokenBytes() : 0;
}

int64_t HqekvCache::PlaneBytesHeld(int layer) const {
  int64_t planes = 0;
  for (const Unit& U : units_[layer]) {
    for (size_t c = 0; c < U.tk.size(); ++c) {
      if (o_.token_select && U.tk[c] == Tier::kF16) {
        // Partly downgraded (DowngradeSealedUntilHeld): per head and plane.
        for (int h = 0; h < g_.n_kv_heads; ++h) {
          const cache::ChunkView v = store_->Chunk(layer, h, static_cast<int>(c));
          const Tier kt = v.k_format.kind == quant::Kind::kF16 ? Tier::kF16 : Tier::kHigh;
          const Tier vt = v.v_format.kind == quant::Kind::kF16 ? Tier::kF16 : Tier::kHigh;
          planes +=
              (k_bytes_[static_cast<int>(kt)] + v_bytes_[static_cast<int>(vt)]) / g_.n_kv_heads;
        }
        continue;
      }
      planes += UnitPlaneBytes(U.tk[c], U.tv[c]);
    }
  }
  return planes;
}

int64_t HqekvCache::ListBlockBytes(int64_t unit, int64_t slots, int64_t span) {
  const auto bytes = static_cast<int64_t>(cache::ExplicitListBytes(static_cast<int>(slots), span));
  return (bytes + unit - 1) / unit * unit;
}

int64_t HqekvCache::TokenPositionBytes(int layer) const {
  const int64_t unit = static_cast<int64_t>(store_->Pool(layer).unit_bytes());
  return g_.n_kv_heads * ListBlockBytes(unit, kHqekvChunk, 0);
}

int64_t HqekvCache::PositionBytesHeld(int layer) const {
  // Explicit position lists (select=token seals tokens that are not
  // consecutive): uint16 offsets (int32 past a 65536-position span) per
  // slot, one pool block per chunk and head.
  if (!o_.token_select) return 0;
  const int64_t unit = static_cast<int64_t>(store_->Pool(layer).unit_bytes());
  int64_t b = 0;
  for (int h = 0; h < g_.n_kv_heads; ++h) {
    for (int c = 0; c < store_->NumChunks(layer, h); ++c) {
      const cache::ChunkView v = store_->Chunk(layer, h, c);
      const int64_t bytes = v.live() ? static_cast<int64_t>(v.positions.bytes(v.T)) : 0;
      b += (bytes + unit - 1) / unit * unit;
    }
  }
  return b;
}

bool HqekvCache::PackedTightly(int layer) const {
  // A tight pack holds the planes (and position lists) in whole pages: only
  // the last one has room.
  const int64_t page = static_cast<int64_t>(store_->Pool(layer).page_bytes());
  const int64_t planes = PlaneBytesHeld(layer) + PositionBytesHeld(layer);
  return store_->Pool(layer).held_bytes() <= (planes + page - 1) / page * page;
}

BudgetCounts HqekvCache::SolveEventCounts(int layer, int64_t nb, int64_t* planes_room_out) const {
  // Everything outside the page pool and the window sums, as held now:
  // chunk records, residual, Range(V), headers. The plan changes only the
  // planes in the pool (and frees a little state when it evicts).
  const cache::PagePool& pool = store_->Pool(layer);
  int64_t fixed = LayerAllocatedBytes(layer) - pool.held_bytes() - pool.table_bytes();
  for (const Unit& U : units_[layer]) {
    fixed -= static_cast<int64_t>(sizeof(f16_t)) *
             static_cast<int64_t>(U.cur.capacity() + U.next.capacity());
    fixed -= static_cast<int64_t>(sizeof(int32_t)) *
             static_cast<int64_t>(U.cur_q.capacity() + U.next_q.capacity());
  }
  const int64_t n = store_->AppendedTokens(layer);
  const int64_t ahead = TokensToWindow(layer);
  // The next window over the chunks kept now (an upper bound when the plan
  // evicts): the sums carried to it (`next`) grown to every kept token.
  const int64_t r0 = store_->ResidualSize(layer, 0);
  auto window_at = [&](int64_t steps) {
    int64_t window = 0;
    for (const Unit& U : units_[layer]) {
      const int64_t kept = static_cast<int64_t>(U.tk.size()) * kHqekvChunk + r0 + steps;
      window += static_cast<int64_t>(sizeof(f16_t)) *
                    std::max<int64_t>(kept + kHqekvChunk, static_cast<int64_t>(U.next.capacity())) +
                static_cast<int64_t>(sizeof(int32_t)) * 2 *
                    (static_cast<int64_t>(U.next_q.size()) + o_.m);
    }
    return window + ResidualGrowth(steps);
  };
  // Exact residual: also at its peak before the next seal (HoldsBudget).
  const int64_t to_seal = TokensToSealPeak(layer);
  int64_t room = std::min(BudgetBytes(layer, n), BudgetBytes(layer, n + ahead) - window_at(ahead));
  if (to_seal > 0) room = std::min(room, BudgetBytes(layer, n + to_seal) - window_at(to_seal));
  room -= fixed;
  // The pool after the plan: the planes packed tightly in whole pages (the
  // event repacks when they are not) and the page table, as after the last
  // event plus an entry or two (before the first: 32 bytes per page).
  const int64_t page = static_cast<int64_t>(pool.page_bytes());
  // (select=token: the table as held now, over this event's fp16 chunks, an
  // upper bound; the first event's estimate cost a chunk or two at 1.5k
  // tokens on stories260K.)
  const int64_t table = table_bytes_[layer] > 0 ? table_bytes_[layer] + 64
                        : o_.token_select       ? pool.table_bytes() + 64
                                                : 32 * (room / page + 8);
  // select=token: the position lists share the pool with the planes; a
  // kept chunk's list counts with its records below.
  const int64_t pos_held = PositionBytesHeld(layer);
  const int64_t planes_room = std::max<int64_t>(0, (room - table - pos_held) / page * page);
  // A kept chunk holds more than its planes: its chunk records, Range(V),
  // tiers and window sums (`fixed` and `window` count them for every live
  // chunk now), all freed when it is evicted. The solve charges them to the
  // kept tiers so that eviction buys what it really frees (before: a prefill
  // on stories260K, head_dim 8, evicted 27 of 48 chunks at bits=4.2 and
  // held 3.2 bits).
  int64_t live = 0;
  for (const Unit& U : units_[layer]) live = std::max<int64_t>(live, U.tk.size());
  const int64_t keep_bytes =
      LiveChunkRecordBytes(model_.layout) + (o_.token_select ? TokenPositionBytes(layer) : 0) +
      o_.units_per_layer * static_cast<int64_t>(kHqekvChunk + 2 * sizeof(f16_t) + 2 * sizeof(Tier) +
                                                sizeof(f16_t) * kHqekvChunk);
  std::array<int64_t, kNumTiers> chunk_bytes{};
  for (int t = 0; t < kNumTiers; ++t) {
    const Tier tier = static_cast<Tier>(t);
    chunk_bytes[t] =
        tier == Tier::kEvicted ? 0 : UnitPlaneBytes(tier, tier) * o_.units_per_layer + keep_bytes;
  }
  // The room, with the live chunks' share counted as part of it (what
  // `fixed` and `window` hold for them now; chunks evicted at earlier events
  // hold none: counting theirs made the solve keep chunks the check after
  // the plan then evicted for good) ...
  const int64_t solve_room = planes_room + live * keep_bytes;
  const BudgetCounts bc = SolveBudgetCounts(nb, o_.pinned, chunk_bytes, solve_room, o_.usable);
  // ... and what the planes alone may hold once the plan's chunks are kept.
  int64_t kept = 0;
  for (int t = 0; t < static_cast<int>(Tier::kEvicted); ++t) kept += bc.counts[t];
  const int64_t gone = nb - live;  // evicted at earlier events (no state left)
  kept = std::min(kept, nb - std::max<int64_t>(gone, bc.counts[static_cast<int>(Tier::kEvicted)]));
  *planes_room_out = std::max<int64_t>(0, planes_room + (live - kept) * keep_bytes);
  return bc;
}

int64_t HqekvCache::PlannedPlaneBytes(int layer, int64_t nb,
                                      const std::array<int64_t, kNumTiers>& counts,
                                      const std::vector<ChunkScores>& scores) const {
  int64_t b = 0;
  for (int u = 0; u < o_.units_per_layer; ++u) {
    const TierPlan plan = PlanUnit(layer, u, nb, counts, scores[u]);
    for (size_t c = 0; c < plan.k.size(); ++c) b += UnitPlaneBytes(plan.k[c], plan.v[c]);
  }
  return b;
}

void HqekvCache::RaiseCounts(int layer, int64_t nb, const std::vector<ChunkScores>& scores,
                             int64_t planes_room, std::array<int64_t, kNumTiers>* counts) const {
  // The counts assume every chunk can take any tier; downgrade-only, chunks
  // already in a worse tier cannot, so the plan may hold fewer bytes than
  // planned (after a prefill the overhead per token falls as the sequence
  // grows, and the room grows faster than one chunk per event can use in
  // the two tiers). The rest goes to the chunks that can still move up
  // (this event's fp16 chunks, chunks being demoted now): one slot at a time
  // into the best tier it fits, as long as the plan's planes fit the room.
  int64_t planned = PlannedPlaneBytes(layer, nb, *counts, scores);
  constexpr int kEv = static_cast<int>(Tier::kEvicted);
  for (int guard = 0; guard < 4 * nb + 8; ++guard) {
    bool raised = false;
    for (int t = static_cast<int>(Tier::kHigh); t < kEv && !raised; ++t) {
      if (!TierUsable(o_.usable, t)) continue;
      int w = t + 1;
      while (w <= kEv && (*counts)[w] == 0) ++w;
      if (w > kEv) continue;
      std::array<int64_t, kNumTiers> up = *counts;
      ++up[t];
      --up[w];
      const int64_t b = PlannedPlaneBytes(layer, nb, up, scores);
      if (b > planned && b <= planes_room) {
        *counts = up;
        planned = b;
        raised = true;
      }
    }
    if (!raised) return;
  }
}

Status HqekvCache::SolveBudgetTiers(Reselect* reselect) {
  // True bits: feasible at the cache's full context (the cheapest point;
  // shorter sequences that cannot meet it hold their minimum and say so).
  const int64_t n = g_.max_ctx;
  std::array<double, 4> b = model_.TierBits(n);
  const bool above = o_.true_bits > b[0];
  // menu=auto takes the menu at every budget (not only above all-u4) where
  // its block formats fit the heads: q4_0 / q4_1 / q5_x K and V are cheaper
  // per element than per-channel u4 K (4.5-6 bits against 5 with its
  // per-channel metadata), so below all-u4 the lean u4/u3/u2 ladder spent
  // its bytes on u3 and u2 chunks. Measured on refmodel-4l (KL, lean ladder
  // -> menu): ctx 512 bits=3.4 0.090 -> 0.032, 4.5 0.0146 -> 0.0098, 5.0
  // 0.0104 -> 0.0042 (wiki.valid w0); ctx 2048 bits=3.4 0.064 -> 0.034,
  // 4.657 4.6e-3 -> 2.7e-3 (docs/results/frontier.md). Small heads (D < 32,
  // no block format fits) keep the ladder.
  // The lean ladder one width up (u8/u4/u3, K and V ranked apart): above
  // all-u4 with menu=off, measured 3-5x lower KL than fp8 at 8 true bits on
  // refmodel-4l (docs/ablations/tiers.md).
  auto wide_ladder = [&]() -> Status {
    HQEKV_ASSIGN_OR_RETURN(o_.k_tiers, ParseTierFormats("u8/u4/u3"));
    o_.v_tiers = o_.k_tiers;
    return Status::Ok();
  };
  bool use_menu =
      !o_.own_tiers && (o_.menu == "on" || (o_.menu == "auto" && o_.lean && (above || !o_.small)));
  if (use_menu && o_.menu == "auto" && o_.small) {
    // Small heads keep the wide ladder up to near its all-u8 cost: there it
    // had lower KL than the menu (stories260K ctx 2048 at 8 bits, WikiText-2:
    // 3.6e-3 against 9.3e-3); the menu's fp16 and int8 slots are needed
    // only near all-u8 and above. "Near": the cost is an upper bound (12.15
    // bits at ctx 512 where every chunk in u8 held 11.10).
    HQEKV_RETURN_IF_ERROR(wide_ladder());
    SetTierBytes();
    use_menu = o_.true_bits > model_.TierBits(n)[0] - kSmallHeadMenuMargin;
  }
  if (o_.lean && !o_.own_tiers && !use_menu && above) HQEKV_RETURN_IF_ERROR(wide_ladder());
  if (use_menu) {
    // Above all-u4 the lean tiers cannot spend the budget: the slots come
    // from the tier menu (8-bit to 2-bit store formats, K and V chosen apart
    // by their sensitivity), the two around B mixed.
    ChooseMenuSlots(o_.true_bits, n, o_.k_weight);
  }
  if (o_.lean && !o_.own_tiers && above) {
    // mix=top becomes the top two slots / evicted. mix=auto (top on small
    // heads) takes every slot above all-u4, so that after a short prefill
    // the room for the fp16 residual's growth comes from a downgrade to the
    // third slot, not from an evicted chunk (docs/results/frontier-grid.md).
    if (o_.mix_auto) {
      o_.usable = kAllTiers;
    } else if (o_.usable != kAllTiers) {
      o_.usable |= 1u << static_cast<int>(Tier::kMid);
    }
    if (o_.token_select && o_.select_auto) {
      // Every token fits at the top tier: nothing to select, and the
      // whole-chunk ranking picks the best chunks better (stories260K at 8
      // bits: KL 0.0058 / 0.0044 / 0.0041 vs 0.0104 / 0.0044 / 0.0051 with
      // tokens).
      *reselect = Reselect::kChunk;
      return Status::Ok();
    }
  }
  SetTierBytes();
  b = model_.TierBits(n);
  if (o_.true_bits < b[3] || n / kHqekvChunk <= o_.pinned) {
    if (o_.token_if_infeasible) {
      *reselect = Reselect::kToken;
      return Status::Ok();
    }
    return MakeError(o_.where + ": budget " + o_.bits_text +
                     " true bits per element is impossible for this cache: achievable " +
                     AchievableRange(b[3], b[0], n) +
                     " (every compressible chunk evicted .. every chunk in the top tier; the " +
                     std::to_string(o_.pinned) +
                     " fp16 chunks, the fp16 residual and the bookkeeping are the floor)");
  }
  // Only on contexts of kTokenSelectFromCtx tokens and more: at ctx 1024
  // chunk mode had the lower KL, and below 1024 it quantizes the residual's
  // rows, which token selection keeps in fp16.
  if (o_.token_below_bottom && g_.max_ctx >= kTokenSelectFromCtx &&
      o_.true_bits < b[2] - kTokenSelectUnderBottom) {
    // Well under the all-bottom-slot cost chunk mode evicts whole chunks at
    // every event, and which one goes swung its KL by 2x between budgets
    // 0.05 bit apart; H2O's token choice is smooth there and lower on
    // average (measured on refmodel-4l: docs/policies.md, "select=token").
    *reselect = Reselect::kToken;
    return Status::Ok();
  }
  ratios_.assign(g_.n_layers, SolveBudgetRatios(model_, o_.true_bits, n).ratios);
  return Status::Ok();
}

}  // namespace hqekv::policy
