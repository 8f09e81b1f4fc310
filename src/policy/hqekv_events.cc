// HqeKV's compression events: chunk scores, the tier plan and applying it
// (hqekv_cache.h).
#include "policy/hqekv_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "policy/selection.h"
#include "policy/true_bits.h"

namespace hqekv::policy {

Status HqekvCache::EndBatch(int n, bool is_prefill) {
  for (int l = 0; l < g_.n_layers; ++l) HQEKV_RETURN_IF_ERROR(Compress(l));
  return Status::Ok();
}

ChunkScores HqekvCache::UnitScores(int layer, int u) const {
  const Unit& U = units_[layer][u];
  const int h_rep = o_.per_head ? u : 0;
  const int live = static_cast<int>(U.tk.size());
  const int nc = live * kHqekvChunk;  // compressed kept tokens, first in walk order
  std::vector<int32_t> pos;
  store_->KeptPositions(layer, h_rep, &pos);
  std::vector<double> sum(nc, 0.0);
  for (int i = 0; i < nc && i < static_cast<int>(U.cur.size()); ++i)
    sum[i] = F16ToF32(U.cur[i]) / o_.sum_scale;
  const std::vector<int32_t> cpos(pos.begin(), pos.begin() + nc);
  // min_count = m: the window mean (dividing the newest tokens' sums by the
  // few queries that see them ranked the newest chunk first; selection.h).
  // select=token: the cumulative sums themselves (H2O's score).
  const std::vector<double> a =
      o_.token_select ? sum
                      : NormalizeImportance(
                            sum, cpos, std::vector<int32_t>(U.cur_q.begin(), U.cur_q.end()), o_.m);
  std::vector<double> vrange(nc);
  for (int i = 0; i < nc; ++i) vrange[i] = RangeOf(U, i);
  std::vector<int32_t> pos0(live);
  for (int c = 0; c < live; ++c) pos0[c] = cpos[static_cast<size_t>(c) * kHqekvChunk];
  return ScoreChunks(o_.ranking, a, vrange, pos0, kHqekvChunk,
                     (static_cast<uint64_t>(layer) << 32) | u, o_.sink);
}

TierPlan HqekvCache::PlanUnit(int layer, int u, int64_t nb,
                              const std::array<int64_t, kNumTiers>& counts,
                              const ChunkScores& sc) const {
  const Unit& U = units_[layer][u];
  const int64_t gone = nb - static_cast<int64_t>(U.tk.size());
  // Evicted chunks are gone from the store; PlanTiers counts them through
  // placeholders in front (they stay evicted).
  std::vector<Tier> ck(gone, Tier::kEvicted), cv(gone, Tier::kEvicted);
  std::vector<double> pk(gone, 0.0), pv(gone, 0.0);
  ck.insert(ck.end(), U.tk.begin(), U.tk.end());
  cv.insert(cv.end(), U.tv.begin(), U.tv.end());
  pk.insert(pk.end(), sc.k.begin(), sc.k.end());
  pv.insert(pv.end(), sc.v.begin(), sc.v.end());
  // FIX (B3): one eviction set for K and V, chosen by the attention ranking;
  // K tiers follow the attention ranking, V tiers attention x range among
  // the kept chunks.
  // Scores compare within a tier only (PlanTiers): a compressed chunk's
  // score is inflated by its own quantization error (PlanTiers, hqekv_alloc.h).
  return PlanTiers(ck, cv, pk, pv, counts);
}

Status HqekvCache::ApplyCounts(int layer, int u, int64_t nb,
                               const std::array<int64_t, kNumTiers>& counts, ChunkScores* sc,
                               Vec<f16_t>* window, bool* changed) {
  Unit& U = units_[layer][u];
  const int head = o_.per_head ? u : cache::kAllHeads;
  const int live = static_cast<int>(U.tk.size());
  const int64_t gone = nb - live;
  const TierPlan plan = PlanUnit(layer, u, nb, counts, *sc);

  std::vector<char> evicted(live, 0);
  bool any_evicted = false;
  for (int c = 0; c < live; ++c) {
    const Tier nk = plan.k[gone + c], nv = plan.v[gone + c];
    if (nk == Tier::kEvicted) {
      // FIX (eviction = removal): the chunk leaves the store, hence the
      // softmax; the reference's search zeroes evicted K/V instead (B6).
      HQEKV_RETURN_IF_ERROR(store_->EvictChunk(layer, head, c));
      evicted[c] = 1;
      any_evicted = true;
      *changed = true;
    } else if (nk != U.tk[c] || nv != U.tv[c]) {
      // Downgrade only (PlanTiers never raises a tier): re-quantized from
      // the current reconstruction, as the reference does.
      HQEKV_RETURN_IF_ERROR(
          store_->SetChunkFormat(layer, head, c, TierFormat(nk, true), TierFormat(nv, false)));
      *changed = true;
    }
    U.tk[c] = nk;
    U.tv[c] = nv;
  }
  if (!any_evicted) return Status::Ok();
  // Compact the per-chunk state, the scores, Range(V) and the window sums.
  const cache::CountedAllocator<char> alloc = StateAlloc<char>(layer);
  Vec<Tier> tk(alloc), tv(alloc);
  Vec<uint8_t> range(alloc);
  Vec<f16_t> range_max(alloc), win(alloc);
  ChunkScores kept_scores;
  for (int c = 0; c < live; ++c) {
    if (evicted[c]) continue;
    tk.push_back(U.tk[c]);
    tv.push_back(U.tv[c]);
    range_max.push_back(U.range_max[c]);
    kept_scores.k.push_back(sc->k[c]);
    kept_scores.v.push_back(sc->v[c]);
    range.insert(range.end(), U.range.begin() + c * kHqekvChunk,
                 U.range.begin() + (c + 1) * kHqekvChunk);
    for (int t = c * kHqekvChunk; t < (c + 1) * kHqekvChunk && t < static_cast<int>(window->size());
         ++t) {
      win.push_back((*window)[t]);
    }
  }
  // Residual tokens of the window follow the chunks in walk order.
  for (size_t t = static_cast<size_t>(live) * kHqekvChunk; t < window->size(); ++t)
    win.push_back((*window)[t]);
  // Exact capacities: push_back's growth would hold up to twice the state.
  // (Shrunk before the swap: shrinking after it only shrank the old lists.)
  tk.shrink_to_fit();
  tv.shrink_to_fit();
  range.shrink_to_fit();
  range_max.shrink_to_fit();
  win.shrink_to_fit();
  U.tk.swap(tk);
  U.tv.swap(tv);
  U.range.swap(range);
  U.range_max.swap(range_max);
  window->swap(win);
  *sc = std::move(kept_scores);
  return Status::Ok();
}

Status HqekvCache::Compress(int layer) {
  const int r = store_->ResidualSize(layer, 0);
  // select=token: an event at every step that leaves a residual token
  // older than the recent ones (H2O's per-step eviction, in the residual);
  // the chunk plan runs when chunks are sealed or the budget is not held.
  // Also while fewer wait when the layer does not hold B (a short sequence,
  // where the recent tokens alone can take the budget: SelectTokens).
  if (r < (o_.token_select ? o_.recent + 1 : kHqekvChunk) &&
      (!o_.token_select || r == 0 || HoldsBudget(layer))) {
    return Status::Ok();
  }
  int C = r - r % kHqekvChunk;
  if (o_.token_select) {
    HQEKV_ASSIGN_OR_RETURN(C, SelectTokens(layer));
    if (C == 0) {
      // The plan counted the fp16 chunks at u4: they pay for the tokens kept.
      HQEKV_ASSIGN_OR_RETURN(const bool held, DowngradeSealedUntilHeld(layer));
      if (held) return Status::Ok();
    }
  }
  const int D = g_.head_dim;
  const int new_chunks = C / kHqekvChunk;
  // select=token: a seal turns 32 fp16 residual tokens per head into a u4
  // chunk and frees ~27 bytes per token and head at once (5% of a layer's
  // budget at D = 8 and 3.4 bits), which the next steps' tokens take ~25
  // steps to fill again. The newest chunks keep their exact fp16 values in
  // those bytes and go to u4 (the same codes as sealing at u4) as soon as the
  // tokens need them: the layer stays near B instead of in that sawtooth.
  int f16_chunks = 0;
  if (o_.token_select && new_chunks > 0) {
    const int64_t extra =
        (UnitPlaneBytes(Tier::kF16, Tier::kF16) - UnitPlaneBytes(Tier::kHigh, Tier::kHigh)) *
        o_.units_per_layer;
    if (extra > 0) {
      f16_chunks = static_cast<int>(
          std::min<int64_t>(new_chunks, std::max<int64_t>(0, token_room_[layer]) / extra));
    }
  }

  // Range(V) of the tokens compressed now, from their residual V (exact fp16,
  // or the quantized residual's reconstruction).
  std::vector<float> vrow(D);
  for (int u = 0; u < o_.units_per_layer; ++u) {
    const int h0 = o_.per_head ? u : 0, h1 = o_.per_head ? u + 1 : g_.n_kv_heads;
    std::vector<double> range(C, 0.0);
    for (int h = h0; h < h1; ++h) {
      const cache::ResidualView rv = store_->Residual(layer, h);
      for (int t = 0; t < C; ++t) {
        rv.Row(t, false, D, vrow.data());
        range[t] += ValueRange(vrow.data(), 1, D);
      }
    }
    Unit& U = units_[layer][u];
    AppendRanges(U, range);
    // select=token seals at the best quantized tier at once: fp16 chunks
    // would fill the pool (and its page table, which the plan's solve then
    // counts) with twice the planes the plan keeps.
    const Tier t0 = o_.token_select ? Tier::kHigh : Tier::kF16;
    U.tk.insert(U.tk.end(), new_chunks - f16_chunks, t0);
    U.tv.insert(U.tv.end(), new_chunks - f16_chunks, t0);
    U.tk.insert(U.tk.end(), f16_chunks, Tier::kF16);
    U.tv.insert(U.tv.end(), f16_chunks, Tier::kF16);
  }
  if (o_.token_select) {
    // Exact per-chunk state (SelectTokens planned it so): an event seals a
    // chunk at a time, and the doubling of insert / push_back would hold up
    // to twice the state.
    for (Unit& U : units_[layer]) {
      U.tk.shrink_to_fit();
      U.tv.shrink_to_fit();
      U.range.shrink_to_fit();
      U.range_max.shrink_to_fit();
    }
  }
  const int c_u4 = C - f16_chunks * kHqekvChunk;
  if (c_u4 > 0) {
    HQEKV_RETURN_IF_ERROR(
        store_->Seal(layer, cache::kAllHeads, c_u4,
                     o_.token_select ? TierFormat(Tier::kHigh, true) : quant::F16(),
                     o_.token_select ? TierFormat(Tier::kHigh, false) : quant::F16()));
  }
  if (f16_chunks > 0) {
    HQEKV_RETURN_IF_ERROR(store_->Seal(layer, cache::kAllHeads, f16_chunks * kHqekvChunk,
                                       quant::F16(), quant::F16()));
  }
  compressed_chunks_[layer] += new_chunks;
  if (o_.token_select) {
    // Held: the plan fit (the chunk solve below only evicts whole chunks
    // when the layer is over B).
    HQEKV_ASSIGN_OR_RETURN(const bool held, DowngradeSealedUntilHeld(layer));
    if (held) {
      table_bytes_[layer] = store_->Pool(layer).table_bytes();
      return Status::Ok();
    }
  }
  const int64_t nb = compressed_chunks_[layer];
  std::vector<ChunkScores> scores(o_.units_per_layer);
  for (int u = 0; u < o_.units_per_layer; ++u) scores[u] = UnitScores(layer, u);
  // FIX (decode budget): counts over every chunk ever compressed, evicted ones
  // included, with the configured ratios at every event, so the evict share
  // r0 holds during decoding too. The reference decays its eviction ratio to
  // ~0 after prefill (docs/policies.md "HqeKV" fix 3) and a long generation drifts above
  // the prefill's eviction share.
  std::array<int64_t, kNumTiers> counts;
  if (o_.true_bits > 0) {
    // bits=B: the counts whose planes fit what the layer's measured bytes
    // leave of B at this length and when the next window opens (the analytic
    // upper bound of true_bits.h left the cache 4-7% below B; test
    // TrueBits.HqekvEndsWithin3PercentOfTheBudget).
    int64_t planes_room = 0;
    const BudgetCounts bc = SolveEventCounts(layer, nb, &planes_room);
    counts = bc.counts;
    RaiseCounts(layer, nb, scores, planes_room, &counts);
    budget_below_ = budget_below_ || bc.below;
    // select=token spends the room on tokens (SelectTokens), not on tiers.
    budget_above_ = budget_above_ || (bc.above && !o_.token_select);
  } else {
    counts = AllocateChunks(nb, ratios_[layer], o_.pinned);
  }
  for (int pass = 0;; ++pass) {
    bool changed = false;
    for (int u = 0; u < o_.units_per_layer; ++u) {
      Unit& U = units_[layer][u];
      // The first pass compacts the sums carried to the next event (`next`),
      // which then become the open window; later passes compact that.
      // select=token: the cumulative sums (`cur`) stay open.
      HQEKV_RETURN_IF_ERROR(ApplyCounts(layer, u, nb, counts, &scores[u],
                                        pass == 0 && !o_.token_select ? &U.next : &U.cur,
                                        &changed));
      if (pass == 0 && !o_.token_select) {
        // The window is spent: its sums leave memory until the next one opens.
        const cache::CountedAllocator<char> alloc = StateAlloc<char>(layer);
        U.next.shrink_to_fit();
        U.cur.swap(U.next);
        U.cur_q.swap(U.next_q);
        Vec<f16_t>(alloc).swap(U.next);
        Vec<int32_t>(alloc).swap(U.next_q);
        U.cur_q.shrink_to_fit();
      }
    }
    if (pass == 0 || changed) HQEKV_RETURN_IF_ERROR(store_->Compact(layer, cache::kAllHeads));
    // bits=B: the plan came from the bytes before it; the pool's slack after
    // it is only known now. Over B: one more chunk one tier down, until the
    // layer holds B (downgrade only, so the next events' new chunks take the
    // better tier's slots back).
    if (o_.true_bits <= 0) break;
    // Downgrades free blocks but rarely whole pages: past a page of slack the
    // layer's blocks move to fresh pages (a memcpy of its planes), so the
    // budget buys planes, not holes.
    if (!PackedTightly(layer)) store_->RepackLayer(layer);
    if (HoldsBudget(layer)) break;
    if (!ShiftOneChunkDown(&counts, o_.usable)) {
      budget_below_ = true;
      break;
    }
  }
  if (o_.true_bits > 0) table_bytes_[layer] = store_->Pool(layer).table_bytes();
  if (o_.true_bits > 0) {
    const int64_t rest = nb - counts[0];
    if (rest > 0) {
      ratios_[layer] = {
          static_cast<double>(counts[1]) / rest, static_cast<double>(counts[2]) / rest,
          static_cast<double>(counts[3]) / rest, static_cast<double>(counts[4]) / rest};
    }
  }
  return Status::Ok();
}

}  // namespace hqekv::policy
