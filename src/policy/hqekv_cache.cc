#include "policy/hqekv_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "policy/selection.h"
#include "policy/hqekv_options.h"
#include "policy/true_bits.h"
#include "attn/multi_query.h"

namespace hqekv::policy {
namespace {
// Contexts below this many tokens: bits=B keeps the residual exact (BuildFrom).
constexpr int64_t kExactResidualBelowCtx = 1024;

// residual=auto on a short context: the newest (< 32) tokens take most of
// the attention, so their error sets a floor under the KL; their bytes are
// paid from the chunks' share. Measured on refmodel-4l at ctx 512 (prefill
// 256; wiki.test, wiki.valid, alice, tinystories; 2 KiB pages), KL of a
// rotated q8_0 residual / a 4-bit one (iq4_nl): bits=3.4 1.12-1.82x, 4.2
// 1.6-2.4x, 4.4 0.32-0.60x, 4.659 0.28-0.49x, 4.7 0.51-1.33x, 4.75
// 0.31-0.97x, 5.159 0.2x (the 4-bit rows' error is then the floor: 0.018 at
// every budget from 4.9 on wiki.test): 4-bit rows below
// kResidual8BitFromBits, 8-bit from there. The 4-bit rows are rotated q4_0
// (llama.cpp's default cache type): KL 0.91-1.31x iq4_nl's at 3.4 and 4.2.
constexpr double kResidual8BitFromBits = 4.3;
// Heads no block format fits (head_dim % 32 != 0, e.g. stories260K's 8): int8
// rows with a per-token scale (10 bits per element at D = 8 against fp16's
// 16) below this budget, fp16 from it: on stories260K at ctx 512 int8 rows
// roughly halved KL from 2.5 to 5 bits, tied at 6 and lost 2-13x from 8
// (docs/policies.md).
constexpr double kResidualInt8BelowBits = 6.0;

quant::Format AutoResidualFormat(const HqekvOptions& o, const KvGeometry& g) {
  quant::Format f = o.true_bits < kResidual8BitFromBits ? quant::GgmlBlock(quant::Kind::kQ4_0)
                                                        : quant::GgmlBlock(quant::Kind::kQ8_0);
  f.hadamard = true;
  if (cache::ResidualFormatOk(f, g.head_dim)) return f;
  f.hadamard = false;  // head_dim not a power of two
  if (cache::ResidualFormatOk(f, g.head_dim)) return f;
  return o.true_bits < kResidualInt8BelowBits ? quant::Int8PerToken() : quant::F16();
}
}  // namespace

HqekvCache::HqekvCache(const KvGeometry& g, std::string describe, int residual_reserve,
                       const quant::Format& residual_format, size_t page_bytes)
    : StoreBackedCache(g, std::move(describe), 2, true, [&] {
        StoreTuning t;
        t.residual_reserve = residual_reserve;
        t.residual_format = residual_format;
        t.page_bytes = page_bytes;
        return t;
      }()) {}

Result<std::unique_ptr<KvCache>> HqekvCache::Create(const PolicySpec& spec, const KvGeometry& g,
                                                    const CacheContext& ctx) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  // Options resolved once (hqekv_options.cc); a second pass only when the
  // budget decides select=auto's choice (BuildFrom says so).
  Reselect force = Reselect::kNone;
  for (int pass = 0; pass < 2; ++pass) {
    HQEKV_ASSIGN_OR_RETURN(
        HqekvOptions o,
        ResolveHqekvOptions(spec, g, ctx, force == Reselect::kChunk, force == Reselect::kToken));
    Reselect reselect = Reselect::kNone;
    HQEKV_ASSIGN_OR_RETURN(std::unique_ptr<HqekvCache> c, BuildFrom(std::move(o), g, &reselect));
    if (reselect == Reselect::kNone) return std::unique_ptr<KvCache>(std::move(c));
    force = reselect;
  }
  return MakeError("KV policy '" + spec.Canonical() + "': select=auto's choice was not kept");
}

Result<std::unique_ptr<HqekvCache>> HqekvCache::BuildFrom(HqekvOptions o, const KvGeometry& g,
                                                          Reselect* reselect) {
  // bits=B on a short context keeps the fp16 residual at its exact size (no
  // spare chunk of tokens) and plans for its peak instead (31 tokens, just
  // before the next seal: TokensToSealPeak). A 32-token reserve costs
  // 512 / n bits per element at n tokens: 2 bits after a 256-token prompt,
  // which the prefill's plan paid by evicting 3 of 8 chunks on refmodel-4l
  // at bits=4.66 (KL 0.146 -> 0.094 at ctx 512). At ctx 2048 (0.25 bit) the
  // exact residual measured mixed on wiki.test (KL x1.27 at 3.4 bits, x0.71
  // at 5.157; cause not found), so there the reserve stays.
  const bool exact = o.token_select || (o.true_bits > 0 && g.max_ctx < kExactResidualBelowCtx);
  // There the residual's tokens are also quantized when appended, as
  // llama.cpp's cache does, and the bytes saved go to the chunks.
  if (o.residual_auto && exact && !o.token_select) o.residual_format = AutoResidualFormat(o, g);
  // And with pages of half the automatic size (2 KiB at D = 64): the plan
  // packs the planes in whole pages, and the last one's free room is a
  // larger share of a short cache (up to 4 KiB of a 34 KB layer after a
  // 256-token prompt). Measured on refmodel-4l, ctx 512, wiki.test /
  // wiki.valid, KL with 4 KiB -> 2 KiB pages: bits=4.659 0.0182 -> 0.0159 /
  // 0.0145 -> 0.0141, 5.159 0.0035 -> 0.0035 / 0.0035 -> 0.0034, 8.659
  // 6.5e-5 -> 5.4e-5 / 5.8e-5 -> 5.1e-5 (1 KiB: mixed). An fp16 chunk's
  // planes (sealed before the plan downgrades them) take a block of their own.
  // (Smaller heads keep StoreBackedCache's small pages.)
  const size_t page_bytes = exact && !o.token_select && g.head_dim >= 64
                                ? cache::KvStore::AutoPageBytes(kHqekvChunk, g.head_dim) / 2
                                : 0;
  std::unique_ptr<HqekvCache> c(
      new HqekvCache(g, o.describe, exact ? 0 : -1, o.residual_format, page_bytes));
  HQEKV_RETURN_IF_ERROR(c->init_status());
  c->o_ = std::move(o);
  c->ratios_ = c->o_.ratios;
  c->mu_ = std::make_unique<std::mutex[]>(g.n_layers);
  c->model_.layout.n_kv_heads = g.n_kv_heads;
  c->model_.layout.head_dim = g.head_dim;
  c->model_.layout.chunk = kHqekvChunk;
  c->model_.layout.residual_reserve =
      c->store_->config().residual_reserve < 0 ? kHqekvChunk : c->store_->config().residual_reserve;
  // Chunk mode with an exact residual: the byte model counts its peak (a
  // chunk less one token waiting); select=token holds it under B per step.
  c->model_.layout.residual_exact = exact && !c->o_.token_select;
  c->model_.layout.residual_row_bytes =
      static_cast<int64_t>(c->store_->ResidualRowUnits() * sizeof(f16_t));
  c->model_.layout.unit_bytes = c->store_->Pool(0).unit_bytes();
  c->model_.layout.page_bytes = c->store_->Pool(0).page_bytes();
  c->model_.units = c->o_.units_per_layer;
  c->model_.pinned = c->o_.pinned;
  c->SetTierBytes();
  if (c->o_.true_bits > 0) {
    HQEKV_RETURN_IF_ERROR(c->SolveBudgetTiers(reselect));
    if (*reselect != Reselect::kNone) return c;
  }
  c->ResetPolicy();
  return c;
}

quant::Format HqekvCache::TierFormat(Tier t, bool is_k) const { return TierFormatOf(o_, t, is_k); }

// FIX (B1): every piece of state is per request; Reset() clears it all (the
// reference keeps its decayed eviction ratio across requests).
void HqekvCache::ResetPolicy() {
  // Move-assigned fresh containers: assign() would keep inner capacities.
  units_.clear();  // frees every layer's state (the counters go back to 0)
  for (int l = 0; l < g_.n_layers; ++l)
    units_.emplace_back(o_.units_per_layer, Unit(StateAlloc<char>(l)));
  compressed_chunks_.assign(g_.n_layers, 0);
  table_bytes_.assign(g_.n_layers, 0);
  token_room_.assign(g_.n_layers, 0);
  budget_below_ = budget_above_ = false;
  cur_from_.assign(g_.n_layers, 0);
  next_from_.assign(g_.n_layers, 0);
}

float HqekvCache::RangeOf(const Unit& U, int i) {
  return F16ToF32(U.range_max[i / kHqekvChunk]) * (static_cast<float>(U.range[i]) / 255.0f);
}

void HqekvCache::AppendRanges(Unit& U, const std::vector<double>& range) {
  for (size_t c0 = 0; c0 < range.size(); c0 += kHqekvChunk) {
    double mx = 0;
    for (size_t t = c0; t < c0 + kHqekvChunk; ++t) mx = std::max(mx, range[t]);
    const f16_t m16 = F32ToF16(static_cast<float>(mx));
    const double m = F16ToF32(m16);
    U.range_max.push_back(m16);
    for (size_t t = c0; t < c0 + kHqekvChunk; ++t) {
      const double q = m > 0 ? std::round(range[t] / m * 255.0) : 0.0;
      U.range.push_back(static_cast<uint8_t>(std::clamp(q, 0.0, 255.0)));
    }
  }
}

// Which queries of this batch belong to the importance window of an event.
// Events happen at EndBatch when >= 32 tokens wait in the residual; the
// window is the last m queries before the event. With one-token decode steps
// (and one prefill batch) this is exact: a query whose residual count r
// (after its own token) satisfies r >= 33 - m is among the last m before the
// event at r = 32; in a batch that ends with an event the last m queries are
// the window, and the prompt queries that will still be among the last m of
// the NEXT event (when fewer than m decode steps separate them) go to `next`.
int HqekvCache::FirstRecordedQuery(int layer, const int32_t* q_pos, int n) {
  if (o_.token_select) {
    // Every query adds to the cumulative sums (H2O's score); no positions kept.
    cur_from_[layer] = 0;
    next_from_[layer] = n;
    return 0;
  }
  const int r_end = store_->ResidualSize(layer, 0);
  const bool event = r_end >= kHqekvChunk;
  const int C = event ? r_end - r_end % kHqekvChunk : 0;
  // r_i = r_end - (n - 1 - i) grows with i: both sets are suffixes.
  int cur_from = n, next_from = n;
  for (int i = n - 1; i >= 0; --i) {
    const int r_i = r_end - (n - 1 - i);
    if (event ? (i >= n - o_.m) : (r_i >= kHqekvChunk + 1 - o_.m)) cur_from = i;
    if (event && (r_i - C >= kHqekvChunk + 1 - o_.m)) next_from = i;
  }
  cur_from_[layer] = cur_from;
  next_from_[layer] = next_from;
  const int first = std::min(cur_from, next_from);
  if (event && n >= o_.m) {
    // The whole window is in this batch: forget rows of earlier batches.
    for (Unit& u : units_[layer]) {
      u.cur.clear();
      u.cur_q.clear();
    }
  }
  return first;
}

void HqekvCache::OnRow(int layer, const cache::AttentionRow& row) {
  const bool c = row.query >= cur_from_[layer], nx = row.query >= next_from_[layer];
  if (!c && !nx) return;
  Unit& u = units_[layer][o_.per_head ? row.kv_head : 0];
  std::lock_guard<std::mutex> lock(mu_[layer]);
  if (o_.token_select) {
    // Sealed tokens (whole kept chunks, walk order first) into the fp16
    // sums, residual tokens into the fp32 ones.
    const int nc = std::min<int>(row.n_kept, static_cast<int>(u.tk.size()) * kHqekvChunk);
    const int nr = row.n_kept - nc;
    // rsum: [residual token][selection head].
    const int Hs = TokenHeads(), hs = Hs == 1 ? 0 : row.kv_head;
    if (static_cast<int>(u.cur.size()) < nc) {
      if (static_cast<int>(u.cur.capacity()) < nc) u.cur.reserve(nc + kHqekvChunk);
      u.cur.resize(nc, F32ToF16(0.0f));
    }
    if (static_cast<int>(u.rsum.size()) < nr * Hs) {
      if (static_cast<int>(u.rsum.capacity()) < nr * Hs) u.rsum.reserve((nr + kHqekvChunk) * Hs);
      u.rsum.resize(static_cast<size_t>(nr) * Hs, 0.0f);
    }
    attn::AccumulateF16(u.cur.data(), row.weights, o_.sum_scale, nc);
    for (int j = 0; j < nr; ++j) u.rsum[static_cast<size_t>(j) * Hs + hs] += row.weights[nc + j];
    return;
  }
  // Summed over the query heads of the unit (all Hq of the layer by default,
  // as the reference does) in fp16 as the reference does (B14): 2 bytes per
  // kept token while the window is open (fp32 sums cost 0.06 bits per
  // element more at D = 64 and do not change the ranking measurably).
  for (Vec<f16_t>* acc : {c ? &u.cur : nullptr, nx ? &u.next : nullptr}) {
    if (!acc) continue;
    if (static_cast<int>(acc->size()) < row.n_kept) {
      // The window closes within a chunk of tokens: room for that many,
      // not push_back's doubling (which would hold twice the sums).
      if (static_cast<int>(acc->capacity()) < row.n_kept) acc->reserve(row.n_kept + kHqekvChunk);
      acc->resize(row.n_kept, F32ToF16(0.0f));
    }
    // (Vectorized, bit-identical to the scalar fp16 loop; adding a zero
    // weight leaves a sum unchanged.)
    attn::AccumulateF16(acc->data(), row.weights, o_.sum_scale, row.n_kept);
  }
}

void HqekvCache::OnAttended(int layer, const int32_t* q_pos, int n, int first) {
  if (o_.token_select) return;  // cumulative raw sums: the query positions are not needed
  for (Unit& u : units_[layer]) {
    for (int i = first; i < n; ++i) {
      if (i >= cur_from_[layer]) u.cur_q.push_back(q_pos[i]);
      if (i >= next_from_[layer]) u.next_q.push_back(q_pos[i]);
    }
  }
}

int64_t HqekvCache::StateBytes(int layer) const {
  int64_t b = 0;
  for (const Unit& u : units_[layer]) {
    b += static_cast<int64_t>(u.tk.capacity() + u.tv.capacity()) * sizeof(Tier);
    b += static_cast<int64_t>(u.range.capacity()) * sizeof(uint8_t);
    b += static_cast<int64_t>(u.range_max.capacity()) * sizeof(f16_t);
    b += static_cast<int64_t>(u.cur.capacity() + u.next.capacity()) * sizeof(f16_t);
    b += static_cast<int64_t>(u.cur_q.capacity() + u.next_q.capacity()) * sizeof(int32_t);
    b += static_cast<int64_t>(u.rsum.capacity()) * sizeof(float);
  }
  return b;
}

std::string HqekvCache::BudgetNote() const {
  if (o_.true_bits <= 0) return "";
  char buf[256];
  if (budget_below_) {
    std::snprintf(buf, sizeof buf,
                  "bits=%g is below what this sequence length allows (every compressible chunk "
                  "evicted); the cache holds that minimum",
                  o_.true_bits);
    return buf;
  }
  if (budget_above_) {
    const quant::Format k = o_.k_tiers[0], v = o_.v_tiers[0];
    if (k.kind == quant::Kind::kUniform && k.bits == 4 && v.kind == k.kind && v.bits == 4) {
      std::snprintf(buf, sizeof buf,
                    "bits=%g is above the all-4-bit cost at this length: every chunk is 4-bit "
                    "and the budget is not used up",
                    o_.true_bits);
    } else {
      std::snprintf(buf, sizeof buf,
                    "bits=%g is above the cost of every chunk in the top tier (K %s, V %s) at "
                    "this length: the budget is not used up",
                    o_.true_bits, quant::FormatName(k).c_str(), quant::FormatName(v).c_str());
    }
    return buf;
  }
  return "";
}

}  // namespace hqekv::policy
