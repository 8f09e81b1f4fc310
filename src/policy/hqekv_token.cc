// HqeKV's token selection (select=token): which residual tokens an event
// keeps, and sealed fp16 chunks moved to the top tier while the layer holds B
// (hqekv_cache.h).
#include "policy/hqekv_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"

namespace hqekv::policy {

HqekvCache::TokenBase HqekvCache::TokenPlanBase(int layer) const {
  TokenBase b;
  const int64_t H = g_.n_kv_heads, D = g_.head_dim;
  b.res_token = ResidualTokenBytes();
  const cache::PagePool& pool = store_->Pool(layer);
  const int64_t res_cap = store_->Stats().layers[layer].bytes.residual / (4 * D * H);
  int64_t window = 0;
  for (const Unit& U : units_[layer]) {
    window += static_cast<int64_t>(sizeof(f16_t)) *
                  static_cast<int64_t>(U.cur.capacity() + U.next.capacity()) +
              static_cast<int64_t>(sizeof(int32_t)) *
                  static_cast<int64_t>(U.cur_q.capacity() + U.next_q.capacity()) +
              static_cast<int64_t>(sizeof(float)) * static_cast<int64_t>(U.rsum.capacity());
  }
  // Chunk records, position lists, Range(V), tiers, headers: as held now.
  b.fixed = LayerAllocatedBytes(layer) - pool.held_bytes() - pool.table_bytes() -
            res_cap * b.res_token - window;
  // A sealed chunk of the cheapest tier the solve may keep (the solve raises
  // tiers with what is left): its planes in the pool, its records and int32
  // position list per head (the kept tokens are not consecutive), Range(V)
  // and tiers.
  Tier cheap = Tier::kHigh;
  for (Tier t : {Tier::kMid, Tier::kLow}) {
    if (TierUsable(o_.usable, static_cast<int>(t))) cheap = t;
  }
  b.planes = UnitPlaneBytes(cheap, cheap) * o_.units_per_layer;
  b.unit = static_cast<int64_t>(pool.unit_bytes());
  b.records = LiveChunkRecordBytes(model_.layout) +
              o_.units_per_layer * (kHqekvChunk + sizeof(f16_t) + 2 * sizeof(Tier));
  b.page = static_cast<int64_t>(pool.page_bytes());
  // fp16 chunks at their u4 planes: they go to u4 before a token is evicted.
  b.planes_held = PositionBytesHeld(layer);
  for (const Unit& U : units_[layer]) {
    for (size_t c = 0; c < U.tk.size(); ++c)
      b.planes_held +=
          UnitPlaneBytes(std::max(U.tk[c], Tier::kHigh), std::max(U.tv[c], Tier::kHigh));
  }
  b.table = std::max<int64_t>(table_bytes_[layer], pool.table_bytes()) + 64;
  for (const Unit& U : units_[layer]) b.live = std::max<int64_t>(b.live, U.tk.size());
  return b;
}

int64_t HqekvCache::TokenPlanBytes(const TokenBase& b, int64_t s, int64_t list_bytes,
                                   int64_t r_left, int64_t res_tokens) const {
  const int64_t pool_after =
      (b.planes_held + s * b.planes + list_bytes + b.page - 1) / b.page * b.page;
  const int64_t table = b.table + 32 * (s * b.planes / b.page + 2);
  // The open sums (SelectTokens leaves room for a chunk more in each), and
  // the solve's allowance for query positions.
  const int64_t sums =
      o_.units_per_layer *
          (static_cast<int64_t>(sizeof(f16_t)) * ((b.live + s + 1) * kHqekvChunk) +
           static_cast<int64_t>(sizeof(float)) * (r_left + kHqekvChunk) * TokenHeads()) +
      static_cast<int64_t>(sizeof(int32_t)) * 2 * o_.m;
  return b.fixed + s * b.records + pool_after + table + sums + res_tokens * b.res_token;
}

Result<int> HqekvCache::SelectTokens(int layer) {
  HQEKV_DCHECK(o_.units_per_layer == 1);
  Unit& U = units_[layer][0];
  const cache::ResidualView rv = store_->Residual(layer, 0);
  const int r = rv.n;
  const int64_t nc = static_cast<int64_t>(U.tk.size()) * kHqekvChunk;  // sealed kept tokens
  HQEKV_DCHECK(store_->KeptTokens(layer, 0) == nc + r);
  const int64_t n = store_->AppendedTokens(layer);
  // Fits now, and after the next step's token (the next event can evict).
  const TokenBase base = TokenPlanBase(layer);
  // The newest W residual tokens wait unjudged (their sums are still small).
  // On a short sequence they alone can hold more than B (48 fp16 tokens in
  // 4 heads of D = 8 are 6.9 KB, B = 3.4 bits at 256 tokens is 7.0 KB): then
  // only as many wait as fit with nothing else kept, and the others are
  // judged like the older tokens.
  // The sink's tokens (the oldest positions) are kept whatever is judged, so
  // they count as kept from the start, or the layer would hold more than B.
  int ns = 0;
  for (int hs = 0; o_.sink > 0 && hs < TokenHeads(); ++hs) {
    const int32_t* p = store_->Residual(layer, TokenHeads() == 1 ? 0 : hs).positions;
    int c = 0;
    for (int j = 0; j < r; ++j) c += p[j] < o_.sink ? 1 : 0;
    ns = std::max(ns, c);
  }
  int W = std::min(o_.recent, r);
  auto waiting_fit = [&](int w) {
    const int64_t left = w + std::min(ns, r - w);
    return TokenPlanBytes(base, 0, 0, left, left) <= BudgetBytes(layer, n) &&
           TokenPlanBytes(base, 0, 0, left + 1, left + 1) <= BudgetBytes(layer, n + 1);
  };
  while (W > 0 && !waiting_fit(W)) --W;
  const int cand = r - W;  // the oldest residual tokens are judged
  // Per selection head (every KV head, or the layer): the candidates ranked
  // by their cumulative attention sums, the sink's tokens first; the same
  // count is kept in every head, so the residuals (and the chunks sealed)
  // stay aligned.
  const int Hs = TokenHeads();
  std::vector<std::vector<int>> rank(Hs, std::vector<int>(cand));
  std::vector<const int32_t*> posh(Hs);
  int n_sink = 0;
  for (int hs = 0; hs < Hs; ++hs) {
    posh[hs] = store_->Residual(layer, Hs == 1 ? 0 : hs).positions;
    std::vector<double> score(cand, 0.0);
    n_sink = 0;
    for (int j = 0; j < cand; ++j) {
      const size_t i = static_cast<size_t>(j) * Hs + hs;
      score[j] = i < U.rsum.size() ? U.rsum[i] : 0.0;
      if (posh[hs][j] < o_.sink) {
        score[j] = std::numeric_limits<double>::infinity();
        ++n_sink;
      }
    }
    std::vector<int> order(cand);
    for (int j = 0; j < cand; ++j) order[j] = j;
    // Highest score first; ties keep the older token.
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score[a] > score[b]; });
    for (int k = 0; k < cand; ++k) rank[hs][order[k]] = k;
  }
  auto keep_of = [&](int64_t s, int64_t x) {
    return std::max<int64_t>(s * kHqekvChunk + x, std::min(n_sink, cand));
  };
  // Pool bytes of the position lists the s sealed chunks need (a chunk
  // whose kept positions are consecutive stores none; the others uint16
  // offsets, or int32 past a 65536-position span), over the heads.
  auto lists = [&](int64_t s, int64_t x) {
    const int64_t keep = keep_of(s, x);
    int64_t bytes = 0;
    for (int hs = 0; hs < Hs; ++hs) {
      int64_t taken = 0;
      int in_chunk = 0;
      bool consecutive = true;
      int32_t first = 0, prev = 0;
      for (int j = 0; j < r && taken < s * kHqekvChunk; ++j) {
        if (j < cand && rank[hs][j] >= keep) continue;
        if (in_chunk == 0) first = posh[hs][j];
        if (in_chunk > 0 && posh[hs][j] != prev + 1) consecutive = false;
        prev = posh[hs][j];
        ++taken;
        if (++in_chunk == kHqekvChunk) {
          if (!consecutive) {
            bytes += (Hs == 1 ? g_.n_kv_heads : 1) *
                     ListBlockBytes(base.unit, kHqekvChunk, static_cast<int64_t>(prev) - first);
          }
          in_chunk = 0;
          consecutive = true;
        }
      }
    }
    return bytes;
  };
  // Residual tokens left after keeping s chunks and x survivors (the sink's
  // tokens among them when keep_of raises the count).
  auto left_of = [&](int64_t s, int64_t x) { return W + keep_of(s, x) - s * kHqekvChunk; };
  // Fits now, and after the next step's token (the next event can evict).
  auto fits = [&](int64_t s, int64_t x) {
    const int64_t l = lists(s, x), r_left = left_of(s, x);
    return TokenPlanBytes(base, s, l, r_left, r_left) <= BudgetBytes(layer, n) &&
           TokenPlanBytes(base, s, l, r_left + 1, r_left + 1) <= BudgetBytes(layer, n + 1);
  };
  // As many whole chunks as fit, then as many residual survivors (< 32).
  int64_t s = cand / kHqekvChunk;
  while (s > 0 && !fits(s, 0)) --s;
  int64_t x = std::min<int64_t>(kHqekvChunk - 1, cand - s * kHqekvChunk);
  while (x > 0 && !fits(s, x)) --x;
  const int64_t keep = keep_of(s, x);
  {
    const int64_t l = lists(s, x), r_left = left_of(s, x);
    token_room_[layer] =
        std::min(BudgetBytes(layer, n) - TokenPlanBytes(base, s, l, r_left, r_left),
                 BudgetBytes(layer, n + 1) - TokenPlanBytes(base, s, l, r_left + 1, r_left + 1));
  }
  std::vector<std::vector<int>> kept_idx(Hs);  // per selection head: kept residual indices
  for (int hs = 0; hs < Hs; ++hs) {
    std::vector<int32_t> victims;
    for (int j = 0; j < r; ++j) {
      if (j >= cand || rank[hs][j] < keep) {
        kept_idx[hs].push_back(j);
      } else {
        victims.push_back(posh[hs][j]);
      }
    }
    if (!victims.empty()) {
      HQEKV_RETURN_IF_ERROR(store_->EvictTokens(layer, Hs == 1 ? cache::kAllHeads : hs,
                                                victims.data(), static_cast<int>(victims.size())));
    }
  }
  // The oldest survivors fill whole chunks (keep >= s * 32 of them are older
  // than the recent tokens); their sums (over the heads) move to the fp16
  // chunk sums, the others stay.
  const int C =
      static_cast<int>(std::min<int64_t>(s * kHqekvChunk, keep / kHqekvChunk * kHqekvChunk));
  const int left = static_cast<int>(kept_idx[0].size());
  const cache::CountedAllocator<char> alloc = StateAlloc<char>(layer);
  Vec<f16_t> sealed(alloc);
  Vec<float> rest(alloc);
  sealed.reserve(static_cast<size_t>(nc + C + kHqekvChunk));
  rest.reserve(static_cast<size_t>(left - C + kHqekvChunk) * Hs);
  sealed.assign(U.cur.begin(), U.cur.begin() + std::min<size_t>(U.cur.size(), nc));
  sealed.resize(static_cast<size_t>(nc), F32ToF16(0.0f));
  auto old_sum = [&](int hs, int t) {
    const size_t i = static_cast<size_t>(kept_idx[hs][t]) * Hs + hs;
    return i < U.rsum.size() ? U.rsum[i] : 0.0f;
  };
  for (int t = 0; t < left; ++t) {
    if (t < C) {
      float v = 0;
      for (int hs = 0; hs < Hs; ++hs) v += old_sum(hs, t);
      sealed.push_back(F32ToF16(std::min(o_.sum_scale * v, 32768.0f)));
    } else {
      for (int hs = 0; hs < Hs; ++hs) rest.push_back(old_sum(hs, t));
    }
  }
  U.cur.swap(sealed);
  U.rsum.swap(rest);
  return C;
}

Result<bool> HqekvCache::DowngradeSealedUntilHeld(int layer) {
  HQEKV_DCHECK(o_.units_per_layer == 1);
  Unit& U = units_[layer][0];
  // One plane of one head at a time (K, then V; ~1/8 of the chunk's fp16
  // bytes, a token or two): a whole chunk at once left the bytes it freed
  // beyond what the step's token needed unused, 4-6% of B for ~20 steps.
  const quant::Format k4 = TierFormat(Tier::kHigh, true), v4 = TierFormat(Tier::kHigh, false);
  for (size_t c = 0; c < U.tk.size(); ++c) {
    if (U.tk[c] != Tier::kF16) continue;
    for (int h = 0; h < g_.n_kv_heads; ++h) {
      for (int plane = 0; plane < 2; ++plane) {
        if (HoldsBudget(layer)) return true;
        const cache::ChunkView v = store_->Chunk(layer, h, static_cast<int>(c));
        const bool k_f16 = v.k_format.kind == quant::Kind::kF16;
        const bool v_f16 = v.v_format.kind == quant::Kind::kF16;
        if (plane == 0 ? !k_f16 : !v_f16) continue;
        // Re-quantized from the exact fp16 values: the codes a u4 seal makes.
        HQEKV_RETURN_IF_ERROR(store_->SetChunkFormat(layer, h, static_cast<int>(c),
                                                     k_f16 ? k4 : v.k_format,
                                                     plane == 1 || !v_f16 ? v4 : v.v_format));
        if (!PackedTightly(layer)) store_->RepackLayer(layer);
      }
    }
    U.tk[c] = U.tv[c] = Tier::kHigh;
  }
  return HoldsBudget(layer);
}

}  // namespace hqekv::policy
