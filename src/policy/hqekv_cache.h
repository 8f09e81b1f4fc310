// HqeKV (Wang et al., Findings of ACL 2026) over the KvStore, following the
// authors' code as docs/policies.md "HqeKV" describes it, with its bugs fixed
// on purpose (each fix marked "FIX" in hqekv_cache.cc and listed in
// docs/policies.md).
//
// State per layer (per_head=0) or per (layer, KV head) (per_head=1), a "unit":
//   - importance window: the attention rows of the last m queries summed over
//     the query heads of the unit (all Hq heads of the layer by default), and
//     the positions of those queries; a_i = sum_i / m, the window mean (the
//     reference divides by the min(m, N - i) queries that see token i, which
//     ranked the newest chunk first: changed on purpose, docs/policies.md "HqeKV");
//   - Range(V) per compressed token: sum over the unit's KV heads of
//     max_d V - min_d V, from the exact fp16 V when the token is compressed;
//   - the K tier and V tier of every live 32-token chunk.
// Event (EndBatch) whenever >= 32 tokens wait in the fp16 residual, i.e. at
// the end of prefill and then every 32 tokens: the oldest multiple of 32 are
// sealed as fp16 chunks, every chunk is re-ranked (ranking=paper: K by mean
// a_i, V by mean a_i * R_i; other rankings for ablation, selection.h; the
// chunk of the first `sink` tokens outranks all), chunk counts per tier come
// from AllocateChunks over every chunk ever compressed, and PlanTiers fills
// the tiers best first, downgrade-only, scores compared within a tier:
// evicted chunks
// leave the store (and the softmax), downgrades re-quantize from the current
// reconstruction. K tiers are per-channel, V tiers per-token (groups of
// min(32, D) channels); 1-bit tiers are normal (sign around the mean,
// mu +/- 0.6745 sigma).
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include "core/half.h"
#include "policy/cache_context.h"
#include "policy/hqekv_alloc.h"
#include "policy/hqekv_options.h"
#include "policy/selection.h"
#include "policy/spec.h"
#include "policy/store_cache.h"
#include "policy/true_bits.h"
#include "quant/format.h"

namespace hqekv::policy {

// G of the paper: chunk = quantization group = event period (tokens).
inline constexpr int kHqekvChunk = 32;

class HqekvCache final : public StoreBackedCache {
 public:
  // Tier ratios, first found of: ctx.layer_ratios (in memory, one row per
  // layer), ratios=, profile= (policy/profile.h, checked against ctx.model
  // unless force), nominal_bits= (the paper's 4 r4 + 2 r2 + r1, built-in
  // rows), bits= (TRUE bits per original element: the chunk counts are
  // solved at every compression event from the layer's measured bytes and
  // checked after the plan, so the cache holds <= B after prefill and during
  // decode and ends within ~3% under it; the byte model of true_bits.h
  // checks feasibility: an error when B is below the floor at the cache's
  // full context).
  static Result<std::unique_ptr<KvCache>> Create(const PolicySpec& spec, const KvGeometry& g,
                                                 const CacheContext& ctx);

  Status EndBatch(int n, bool is_prefill) override;
  std::string BudgetNote() const override;

  const TierRatios& ratios(int layer) const { return ratios_[layer]; }
  // Current tiers of the live chunks of (layer, unit) (tests).
  std::vector<Tier> k_tiers(int layer, int unit) const {
    return {units_[layer][unit].tk.begin(), units_[layer][unit].tk.end()};
  }
  std::vector<Tier> v_tiers(int layer, int unit) const {
    return {units_[layer][unit].tv.begin(), units_[layer][unit].tv.end()};
  }
  int64_t chunks_compressed(int layer) const { return compressed_chunks_[layer]; }
  // select=token (or auto on a small head_dim): events evict residual tokens.
  bool token_select() const { return o_.token_select; }
  // The byte model behind bits= (tests compare it with the bytes held).
  const HqekvCostModel& cost_model() const { return model_; }
  int pinned_chunks() const { return o_.pinned; }

 protected:
  void ResetPolicy() override;
  int FirstRecordedQuery(int layer, const int32_t* q_pos, int n) override;
  void OnRow(int layer, const cache::AttentionRow& row) override;
  void OnAttended(int layer, const int32_t* q_pos, int n, int first) override;
  int64_t StateBytes(int layer) const override;
  // Ratios, tiers, Range(V), importance windows, budget flags (hqekv_state.cc).
  void SavePolicy(cache::StateWriter& w) const override;
  Result<Commit> LoadPolicy(cache::StateReader& r, const cache::KvStore& store) override;

 private:
  // Per-unit state, sized for a small footprint (the policy's own state is
  // counted in its true bits, docs/policies.md "Accounting"): per compressed kept token 1 byte of
  // Range(V) (+ 2 bytes per chunk), and while an importance window is open
  // 2 bytes per kept token (fp16 sums, freed at the event).
  // Every container allocates through the layer's StateAlloc (counted).
  template <class T>
  using Vec = cache::CountedVector<T>;
  struct Unit {
    explicit Unit(const cache::CountedAllocator<char>& a)
        : tk(a), tv(a), range(a), range_max(a), cur(a), next(a), cur_q(a), next_q(a), rsum(a) {}
    Vec<Tier> tk, tv;            // per live chunk, store chunk order
    Vec<uint8_t> range;          // Range(V) per compressed kept token (walk order),
                                 // in 1/255 of its chunk's range_max
    Vec<f16_t> range_max;        // per live chunk: the largest Range(V) of its tokens
    Vec<f16_t> cur, next;        // attention sums over kept tokens (walk order)
    Vec<int32_t> cur_q, next_q;  // positions of the queries summed
    // select=token: cumulative attention sums of the residual tokens,
    // [residual token][KV head] (each head keeps its own tokens), in fp32:
    // a prefill's 1536 rows summed in fp16 lose the small weights once a sum
    // is large. `cur` then spans only the sealed tokens (fp16, summed over
    // the heads, for the whole-chunk ranking).
    Vec<float> rsum;
  };
  // Range(V) of compressed kept token i of U (walk order).
  static float RangeOf(const Unit& U, int i);
  // Appends the Range(V) of whole chunks (range.size() a multiple of 32).
  static void AppendRanges(Unit& U, const std::vector<double>& range);
  // residual_reserve: the store's spare residual tokens (-1: a chunk).
  // residual_format: how the store holds residual tokens (residual=);
  // page_bytes: the store's page (0: automatic).
  HqekvCache(const KvGeometry& g, std::string describe, int residual_reserve,
             const quant::Format& residual_format, size_t page_bytes);
  // What select=auto's budget asks of Create: nothing, or to resolve again
  // with select=chunk (above all-u4 token selection has nothing to select)
  // or select=token (well under the all-bottom-slot cost).
  enum class Reselect { kNone, kChunk, kToken };
  // The cache for resolved options (hqekv_cache.cc).
  static Result<std::unique_ptr<HqekvCache>> BuildFrom(HqekvOptions o, const KvGeometry& g,
                                                       Reselect* reselect);
  // bits=B: the tier formats (the menu above all-u4), the feasibility check
  // and the first ratios (hqekv_budget.cc).
  Status SolveBudgetTiers(Reselect* reselect);

  quant::Format TierFormat(Tier t, bool is_k) const;
  // bits=B, menu: the three slots from the K/V frontier of the tier menu
  // (hqekv_menu.h) around B at n tokens; sets the formats and tier bytes.
  void ChooseMenuSlots(double budget, int64_t n, double k_weight);
  // k_bytes_, v_bytes_ and the cost model's tier bytes from the formats.
  void SetTierBytes();
  Status Compress(int layer);
  // Chunk scores (K, V) of every live chunk of (layer, u) from this event's
  // importance window.
  ChunkScores UnitScores(int layer, int u) const;
  // Plans (PlanTiers) and applies `counts` to unit u: evictions leave the
  // store, downgrades re-quantize; the unit's per-chunk state, `sc` and the
  // window sums `window` (per kept token, walk order) drop evicted chunks.
  // *changed is set when a chunk changed tier.
  Status ApplyCounts(int layer, int u, int64_t nb, const std::array<int64_t, kNumTiers>& counts,
                     ChunkScores* sc, Vec<f16_t>* window, bool* changed);
  // select=token, at an event of `layer` (per_head=0): evicts the
  // lowest-scored residual tokens (cumulative attention sums, the sink kept,
  // the newest recent_ not judged) so that what the layer holds after
  // sealing fits bits=B, and returns the tokens to seal now (a multiple of
  // 32: the oldest kept ones; the other survivors wait in the residual).
  Result<int> SelectTokens(int layer);
  // select=token: fp16 chunks (sealed with bytes a seal frees, see Compress)
  // go to u4, oldest first, until the layer holds B; none left: false.
  Result<bool> DowngradeSealedUntilHeld(int layer);
  // select=token: what a plan's bytes are built from, measured once per event.
  struct TokenBase {
    int64_t fixed = 0;        // bytes outside the pool, residual and sums
    int64_t res_token = 0;    // one residual token, every KV head
    int64_t planes = 0;       // planes of one chunk of the cheapest usable tier
    int64_t unit = 0;         // pool unit (a position list takes whole units)
    int64_t records = 0;      // records, position lists and state of one chunk
    int64_t page = 0;         // pool page
    int64_t planes_held = 0;  // planes of the live chunks
    int64_t table = 0;        // page table (+ an entry or two)
    int64_t live = 0;         // live chunks
  };
  TokenBase TokenPlanBase(int layer) const;
  // Bytes of the layer after sealing s more chunks (their position lists
  // take list_bytes of the pool, over the heads) and keeping r_left residual tokens,
  // res_tokens of them held (the pool packed in whole pages, as
  // SolveEventCounts plans).
  int64_t TokenPlanBytes(const TokenBase& b, int64_t s, int64_t list_bytes, int64_t r_left,
                         int64_t res_tokens) const;
  // bits=B: chunk planes of (K or V) tier t for one chunk of one ranking unit.
  int64_t UnitPlaneBytes(Tier k, Tier v) const;
  // bits=B: bytes the layer's window sums grow by before the next event (the
  // window opens `ahead` tokens from now), over its current state.
  int64_t WindowGrowth(int layer, int64_t ahead) const;
  // Tokens from now until the next importance window opens (decode steps of
  // one token; >= 1).
  int64_t TokensToWindow(int layer) const;
  // Chunk mode with an exact residual (bits=B): decode steps of one token
  // until the residual is at its peak, a chunk less one token, just before
  // the next seal (0 otherwise).
  int64_t TokensToSealPeak(int layer) const;
  // Bytes the residual grows by in `steps` decode steps (0 with a reserve,
  // which already holds them).
  int64_t ResidualGrowth(int64_t steps) const;
  // bits=B: true when the layer holds <= B now, will when the next window
  // opens, and (exact residual) at the residual's peak before the next seal
  // (measured bytes, the residual's and the window's growth predicted).
  bool HoldsBudget(int layer) const;
  // bits=B: this event's chunk counts from the measured bytes (planes of the
  // plan + everything else the layer holds now + the next window <= B).
  // *planes_room: the bytes the plan's planes may hold (whole pages).
  BudgetCounts SolveEventCounts(int layer, int64_t nb, int64_t* planes_room) const;
  // PlanTiers for unit u with `counts` (pure).
  TierPlan PlanUnit(int layer, int u, int64_t nb, const std::array<int64_t, kNumTiers>& counts,
                    const ChunkScores& sc) const;
  // Planes the layer would hold after planning `counts` (downgrade-only
  // realization, every unit).
  int64_t PlannedPlaneBytes(int layer, int64_t nb, const std::array<int64_t, kNumTiers>& counts,
                            const std::vector<ChunkScores>& scores) const;
  // Moves slots to better tiers while the planned planes still fit
  // planes_room and grow (see hqekv_cache.cc).
  void RaiseCounts(int layer, int64_t nb, const std::vector<ChunkScores>& scores,
                   int64_t planes_room, std::array<int64_t, kNumTiers>* counts) const;
  // Planes of the layer's live chunks (the byte model's block sizes).
  int64_t PlaneBytesHeld(int layer) const;
  // select=token: pool bytes of the explicit position lists of the live
  // chunks (0 in chunk mode: its chunks are consecutive), and of one chunk
  // in every head (uint16 offsets: a chunk spans <= 65536 positions unless
  // its survivors waited that long in the residual).
  int64_t PositionBytesHeld(int layer) const;
  int64_t TokenPositionBytes(int layer) const;
  // Pool bytes of one head's explicit list of `slots` positions spanning
  // `span` (last - first): uint16 offsets up to 65535, else int32; whole units.
  static int64_t ListBlockBytes(int64_t unit, int64_t slots, int64_t span);
  // Bytes the budget allows `layer` after `tokens` appended tokens:
  // floor(LayerBudget(layer) × tokens × H_kv × D × 2 / 8).
  int64_t BudgetBytes(int layer, int64_t tokens) const;
  // The layer's true-bits budget: B plus its layer_bits= offset (0 without).
  double LayerBudget(int layer) const;
  // One residual token in every KV head: fp16 K and V plus its int32 position.
  int64_t ResidualTokenBytes() const;
  // True when the layer's pool holds its planes in whole pages (no holes
  // but the last page's free room).
  bool PackedTightly(int layer) const;

  HqekvOptions o_;  // resolved once (hqekv_options.h); the budget solve sets the tiers
  std::vector<TierRatios> ratios_;  // per layer (bits=: the last event's)
  HqekvCostModel model_;
  // Planes of one chunk, every KV head, per tier (evicted: 0): K and V.
  std::array<int64_t, kNumTiers> k_bytes_{}, v_bytes_{};
  bool budget_below_ = false, budget_above_ = false;
  // select=token: heads whose sums pick tokens separately. Every KV head
  // keeps its own tokens (measured: 1.3-1.8x lower KL than one choice per
  // layer on stories260K, docs/ablations/tiers.md); 1 would pick per layer.
  int TokenHeads() const { return g_.n_kv_heads; }
  std::vector<std::vector<Unit>> units_;    // [layer][unit]
  std::vector<int64_t> compressed_chunks_;  // [layer] chunks ever compressed (evicted included)
  std::vector<int64_t> table_bytes_;        // [layer] the pool's tables after the last event
  // select=token: bytes the last SelectTokens plan left under B (now and
  // after the next step), which the chunks sealed now may hold in fp16.
  std::vector<int64_t> token_room_;  // [layer]
  // Queries of the current batch from these indices on go to `cur` / `next`
  // ([layer]; the batch size when none): both sets are suffixes of the batch.
  std::vector<int> cur_from_, next_from_;
  std::unique_ptr<std::mutex[]> mu_;  // [layer]: rows of different KV heads arrive concurrently
};

}  // namespace hqekv::policy
