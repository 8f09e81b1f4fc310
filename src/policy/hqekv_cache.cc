#include "policy/hqekv_cache.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <system_error>

#include "core/check.h"
#include "policy/profile.h"
#include "policy/selection.h"
#include "policy/true_bits.h"
#include "attn/multi_query.h"

namespace hqekv::policy {
namespace {
// layout=lean quantizes V per token only from this head_dim up (vgrouping=auto).
constexpr int kLeanTokenGroupMin = 32;
// layout=lean on a small head_dim: the chunk of the first tokens outranks the
// rest (it is never evicted while another chunk can be).
constexpr int kSmallHeadSink = 4;
}  // namespace

HqekvCache::HqekvCache(const KvGeometry& g, std::string describe, int residual_reserve)
    : StoreBackedCache(g, std::move(describe), 2, true, [&] {
        StoreTuning t;
        t.residual_reserve = residual_reserve;
        return t;
      }()) {}

Result<std::unique_ptr<KvCache>> HqekvCache::Create(const PolicySpec& user_spec,
                                                    const KvGeometry& g, const CacheContext& ctx) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  // A profile's kv_options (the tier formats its ratios name) join the spec
  // below; the user's keys win.
  PolicySpec spec = user_spec;
  // force=1 only steers the profile check: not part of the cache's name.
  PolicySpec shown = spec;
  shown.given.erase("force");
  const std::string where = "KV policy '" + shown.Canonical() + "'";
  std::vector<TierRatios> ratios;
  if (!ctx.layer_ratios.empty()) {
    if (static_cast<int>(ctx.layer_ratios.size()) != g.n_layers) {
      return MakeError(where + ": " + std::to_string(ctx.layer_ratios.size()) +
                       " rows of layer ratios for " + std::to_string(g.n_layers) + " layers");
    }
    for (size_t l = 0; l < ctx.layer_ratios.size(); ++l) {
      const TierRatios& r = ctx.layer_ratios[l];
      HQEKV_RETURN_IF_ERROR(CheckRatios(r, where + " layer " + std::to_string(l)));
      ratios.push_back(Rescaled(r));
    }
  } else if (spec.Has("ratios")) {
    auto r = ParseRatios(spec.Text("ratios"));
    if (!r.ok()) return r.error();
    ratios.assign(g.n_layers, *r);
  } else if (spec.Has("profile")) {
    HQEKV_ASSIGN_OR_RETURN(const Profile p, LoadSpecProfile(spec, ctx, g.n_layers));
    ratios = LayerRatios(p, g.n_layers);
    HQEKV_ASSIGN_OR_RETURN(spec, WithProfileOptions(spec, p, spec.Text("profile")));
  } else if (spec.Has("bits") && ctx.model && spec.Int("shipped") != 0) {
    // bits=B on a model with a profile shipped for B: its calibrated ratios
    // and tier formats (issue 12, item 7); otherwise the byte-model solver.
    const std::string path =
        ShippedProfilePath(ctx.profiles_dir, ctx.model->name, spec.Num("bits"));
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
      HQEKV_ASSIGN_OR_RETURN(const Profile p, LoadProfile(path));
      const Status st = CheckProfileForModel(p, path, ctx.model->identity, g.n_layers,
                                             ctx.force || spec.Int("force") != 0);
      if (!st.ok()) {
        return MakeError(where + ": the shipped profile does not fit this model: " + st.message() +
                         "; or give shipped=0 to solve the tier ratios from the byte model");
      }
      ratios = LayerRatios(p, g.n_layers);
      HQEKV_ASSIGN_OR_RETURN(spec, WithProfileOptions(spec, p, path));
    }
  } else if (spec.Has("nominal_bits")) {
    auto r = DefaultRatios(spec.Num("nominal_bits"));
    if (!r.ok()) {
      return MakeError(where +
                       ": no built-in tier ratios for nominal_bits=" + spec.Text("nominal_bits") +
                       " (built in: 2, 2.8, 3.2, 3.25, the authors' Llama-3.1-8B search); give "
                       "bits=B (true bits), ratios=r4/r2/r1/r0 or profile=FILE");
    }
    ratios.assign(g.n_layers, *r);
  } else if (!spec.Has("bits")) {
    return MakeError(where +
                     ": give one of bits=B (true bits per element), nominal_bits=B, "
                     "ratios=r4/r2/r1/r0 or profile=FILE");
  }
  if (spec.Int("decouple") != 0) {
    return MakeError(where +
                     ": decouple=1 (separate K and V eviction sets) is not supported: "
                     "the KV store evicts K and V of a token together");
  }
  // select=token (docs/ablations/tiers.md, "Token selection"): H2O's
  // choice of tokens, stored at the quantized tiers. auto: small heads, where
  // whole-chunk eviction lost to h2o at every budget. The residual then
  // holds no spare room (it never holds more than 32 + recent tokens, and the
  // reserve cost ~0.3 bit per element at head_dim 8).
  const bool lean_spec =
      spec.Text("layout") == "lean" || (spec.Text("layout") == "auto" && spec.Has("bits"));
  const bool by_bits = spec.Has("bits") && ratios.empty();
  const std::string sel = spec.Text("select");
  const bool token = sel == "token" || (sel == "auto" && lean_spec && g.head_dim < 32 && by_bits &&
                                        spec.Int("per_head") == 0 && !spec.Given("ranking"));
  if (token && !by_bits) {
    return MakeError(where +
                     ": select=token needs bits=B (it keeps the tokens that fit B true bits); "
                     "ratios=, profile= and nominal_bits= place whole chunks");
  }
  if (token && spec.Int("per_head") != 0) {
    return MakeError(where +
                     ": select=token needs per_head=0 (each KV head keeps its own tokens, as "
                     "many as the others, so the chunks stay aligned across heads)");
  }
  std::unique_ptr<HqekvCache> c(new HqekvCache(g, shown.Canonical(), token ? 0 : -1));
  c->token_select_ = token;
  c->recent_ = spec.Int("recent");
  HQEKV_RETURN_IF_ERROR(c->init_status());
  c->ratios_ = std::move(ratios);
  // layout=lean (the default for bits=B): the tiers that measured best per
  // byte on refmodel-4l (docs/ablations/tiers.md); each key the spec gives
  // itself wins. layout=paper: the paper's u4/u2/n1, V groups of 32, two fp16
  // chunks, no rotation (the defaults of every key).
  const std::string layout = spec.Text("layout");
  const bool lean = layout == "lean" || (layout == "auto" && spec.Has("bits"));
  const bool pow2 = (g.head_dim & (g.head_dim - 1)) == 0;
  // Small heads (head_dim < 32, e.g. stories260K's 8): a per-token V group's
  // fp16 scale and minimum cost 32 / head_dim bits per element and every
  // quantized tier pays ~1.8 bits of chunk records, residual and state, so
  // lean changes four defaults there, each measured on stories260K
  // (docs/ablations/tiers.md, "Small heads"): V per channel, no rotation,
  // the sink chunk kept, and the solver mixing u4 with eviction only.
  const bool small = lean && g.head_dim < kLeanTokenGroupMin;
  c->m_ = spec.Int("m");
  c->pinned_ = lean && !spec.Given("fp16_chunks") ? 0 : spec.Int("fp16_chunks");
  c->per_head_ = spec.Int("per_head") != 0;
  // select=token keeps the rotation on small heads (measured: lower KL on
  // two of three texts at 3.4 and 4.2 bits, docs/ablations/tiers.md).
  c->hadamard_ =
      lean && !spec.Given("hadamard") ? pow2 && (!small || token) : spec.Int("hadamard") != 0;
  const std::string tiers = spec.Has("tiers") ? spec.Text("tiers") : (lean ? "u4/u3/u2" : "");
  if (!tiers.empty()) {
    auto tf = ParseTierFormats(tiers);
    if (!tf.ok()) return MakeError(where + ": " + tf.message());
    c->tier_formats_ = *tf;
  }
  c->vgroup_ =
      lean && !spec.Given("vgroup") ? g.head_dim : std::min(spec.Int("vgroup"), g.head_dim);
  {
    // Per-token V groups of vgroup channels carry an fp16 scale and minimum
    // each: 32 / vgroup bits per element (4 at head_dim 8, where a tier's
    // metadata outweighs its codes); per channel over the chunk, 1 bit at
    // any head_dim (docs/ablations/tiers.md, stories260K).
    const std::string vg = spec.Text("vgrouping");
    c->v_per_channel_ = vg == "chan" || (vg == "auto" && small);
  }
  {
    const std::string mix = spec.Text("mix");
    if (mix == "top" || (mix == "auto" && small && !spec.Has("tiers"))) {
      c->usable_ = static_cast<TierMask>(1u << static_cast<int>(Tier::kU4));
    }
  }
  auto ranking = ParseRanking(spec.Text("ranking"));
  if (!ranking.ok()) return MakeError(where + ": " + ranking.message());
  c->ranking_ = *ranking;
  // select=token: no sink by default (its cumulative sums keep the sink's
  // tokens anyway; measured 0.053 vs 0.057 KL on WikiText-2 at 3.4 bits,
  // docs/ablations/tiers.md).
  c->sink_ = small && !token && !spec.Given("sink") ? kSmallHeadSink : spec.Int("sink");
  c->units_per_layer_ = c->per_head_ ? g.n_kv_heads : 1;
  {
    const double max_sum =
        static_cast<double>(c->m_) * (c->per_head_ ? g.n_q_heads / g.n_kv_heads : g.n_q_heads);
    int shift = 0;
    while (shift < 24 && max_sum * std::ldexp(1.0, shift + 1) <= 32768.0) ++shift;
    c->sum_scale_ = static_cast<float>(std::ldexp(1.0, shift));
  }
  for (Tier t : {Tier::kU4, Tier::kU2, Tier::kN1}) {
    for (bool k : {true, false}) {
      const Status s = quant::Validate(c->TierFormat(t, k), kHqekvChunk, g.head_dim);
      if (!s.ok()) return MakeError(where + ": " + s.message());
    }
  }
  c->mu_ = std::make_unique<std::mutex[]>(g.n_layers);
  c->model_.layout.n_kv_heads = g.n_kv_heads;
  c->model_.layout.head_dim = g.head_dim;
  c->model_.layout.chunk = kHqekvChunk;
  c->model_.layout.residual_reserve =
      c->store_->config().residual_reserve < 0 ? kHqekvChunk : c->store_->config().residual_reserve;
  c->model_.layout.unit_bytes = c->store_->Pool(0).unit_bytes();
  c->model_.layout.page_bytes = c->store_->Pool(0).page_bytes();
  c->model_.units = c->units_per_layer_;
  c->model_.pinned = c->pinned_;
  auto set_tier_bytes = [&] {
    for (Tier t : {Tier::kF16, Tier::kU4, Tier::kU2, Tier::kN1}) {
      const int i = static_cast<int>(t);
      c->k_bytes_[i] = StreamPlaneBytes(c->model_.layout, c->TierFormat(t, true));
      c->v_bytes_[i] = StreamPlaneBytes(c->model_.layout, c->TierFormat(t, false));
      c->model_.tier_bytes[i] = c->k_bytes_[i] + c->v_bytes_[i];
    }
  };
  set_tier_bytes();
  if (spec.Has("bits") && c->ratios_.empty()) {
    // True bits: feasible at the cache's full context (the cheapest point;
    // shorter sequences that cannot meet it hold their minimum and say so).
    c->true_bits_ = spec.Num("bits");
    const int64_t n = g.max_ctx;
    std::array<double, 4> b = c->model_.TierBits(n);
    if (lean && !spec.Has("tiers") && c->true_bits_ > b[0]) {
      // Above all-u4 the lean tiers cannot spend the budget: move one width
      // up (u8/u4/u3), measured 3-5x lower KL than fp8 at 8 true bits on
      // refmodel-4l (docs/ablations/tiers.md).
      auto tf = ParseTierFormats("u8/u4/u3");
      if (!tf.ok()) return tf.error();
      c->tier_formats_ = *tf;
      // The top-tier mix becomes u8 / u4 / evicted.
      if (c->usable_ != kAllTiers) c->usable_ |= 1u << static_cast<int>(Tier::kU2);
      if (token && sel == "auto") {
        // Every token fits at u4: nothing to select, and the whole-chunk
        // ranking picks the u8 chunks better (stories260K at 8 bits: KL
        // 0.0058 / 0.0044 / 0.0041 vs 0.0104 / 0.0044 / 0.0051 with tokens).
        PolicySpec chunk = user_spec;
        chunk.values["select"] = "chunk";
        return Create(chunk, g, ctx);
      }
      set_tier_bytes();
      b = c->model_.TierBits(n);
    }
    if (c->true_bits_ < b[3] || n / kHqekvChunk <= c->pinned_) {
      return MakeError(where + ": budget " + spec.Text("bits") +
                       " true bits per element is impossible for this cache: achievable " +
                       AchievableRange(b[3], b[0], n) +
                       " (every compressible chunk evicted .. every chunk 4-bit; the " +
                       std::to_string(c->pinned_) +
                       " fp16 chunks, the fp16 residual and the bookkeeping are the floor)");
    }
    c->ratios_.assign(g.n_layers, SolveBudgetRatios(c->model_, c->true_bits_, n).ratios);
  }
  {
    if (c->token_select_) {
      // The sums are cumulative over every query of the sequence (at most
      // max_ctx of them, each row summing to 1 per query head).
      const double max_sum = static_cast<double>(g.max_ctx) * g.n_q_heads;
      int shift = 0;
      while (shift < 24 && max_sum * std::ldexp(1.0, shift + 1) <= 32768.0) ++shift;
      c->sum_scale_ = static_cast<float>(std::ldexp(1.0, shift));
    }
  }
  c->ResetPolicy();
  return std::unique_ptr<KvCache>(std::move(c));
}

Result<std::array<quant::Format, 3>> HqekvCache::ParseTierFormats(const std::string& text) {
  std::array<quant::Format, 3> out;
  size_t start = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t slash = text.find('/', start);
    if ((i < 2) != (slash != std::string::npos)) {
      return MakeError("tiers='" + text + "': expected three formats A/B/C, best first");
    }
    const std::string head = text.substr(start, i < 2 ? slash - start : std::string::npos);
    auto f = quant::ParseFormat(head);
    if (!f.ok()) return MakeError("tiers='" + text + "': " + f.message());
    if (!quant::IsGroupedKind(f->kind) || head.find(':') != std::string::npos) {
      return MakeError("tiers='" + text + "': '" + head +
                       "' is not a plain uniform/normal format (u8, u4, u3, u2, u1, n2, n1; "
                       "grouping, group and rotation come from the policy)");
    }
    out[i] = *f;
    start = slash + 1;
  }
  return out;
}

quant::Format HqekvCache::TierFormat(Tier t, bool is_k) const {
  // K per-channel over the 32-token chunk, V per-token over groups of vgroup
  // (default min(32, D)) channels, at every bit width (digest §4); the
  // formats of the three quantized slots come from tiers= (default u4/u2/n1).
  if (t == Tier::kF16 || t == Tier::kEvicted) return quant::F16();  // evicted: never stored
  quant::Format f = tier_formats_[static_cast<int>(t) - static_cast<int>(Tier::kU4)];
  f.grouping = is_k || v_per_channel_ ? quant::Grouping::kPerChannel : quant::Grouping::kPerToken;
  f.group = vgroup_;
  f.hadamard = hadamard_;
  return f;
}

// FIX (B1): every piece of state is per request; Reset() clears it all (the
// reference keeps its decayed eviction ratio across requests).
void HqekvCache::ResetPolicy() {
  // Move-assigned fresh containers: assign() would keep inner capacities.
  units_.clear();  // frees every layer's state (the counters go back to 0)
  for (int l = 0; l < g_.n_layers; ++l)
    units_.emplace_back(units_per_layer_, Unit(StateAlloc<char>(l)));
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
  if (token_select_) {
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
    if (event ? (i >= n - m_) : (r_i >= kHqekvChunk + 1 - m_)) cur_from = i;
    if (event && (r_i - C >= kHqekvChunk + 1 - m_)) next_from = i;
  }
  cur_from_[layer] = cur_from;
  next_from_[layer] = next_from;
  const int first = std::min(cur_from, next_from);
  if (event && n >= m_) {
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
  Unit& u = units_[layer][per_head_ ? row.kv_head : 0];
  std::lock_guard<std::mutex> lock(mu_[layer]);
  if (token_select_) {
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
    quant::AccumulateF16(u.cur.data(), row.weights, sum_scale_, nc);
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
    quant::AccumulateF16(acc->data(), row.weights, sum_scale_, row.n_kept);
  }
}

void HqekvCache::OnAttended(int layer, const int32_t* q_pos, int n, int first) {
  if (token_select_) return;  // cumulative raw sums: the query positions are not needed
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
  if (true_bits_ <= 0) return "";
  char buf[256];
  if (budget_below_) {
    std::snprintf(buf, sizeof buf,
                  "bits=%g is below what this sequence length allows (every compressible chunk "
                  "evicted); the cache holds that minimum",
                  true_bits_);
    return buf;
  }
  if (budget_above_) {
    std::snprintf(buf, sizeof buf,
                  "bits=%g is above the all-4-bit cost at this length: every chunk is 4-bit and "
                  "the budget is not used up",
                  true_bits_);
    return buf;
  }
  return "";
}

Status HqekvCache::EndBatch(int n, bool is_prefill) {
  for (int l = 0; l < g_.n_layers; ++l) HQEKV_RETURN_IF_ERROR(Compress(l));
  return Status::Ok();
}

int64_t HqekvCache::UnitPlaneBytes(Tier k, Tier v) const {
  // k_bytes_ / v_bytes_ cover every KV head; a per-head unit holds one.
  return (k_bytes_[static_cast<int>(k)] + v_bytes_[static_cast<int>(v)]) / units_per_layer_;
}

int64_t HqekvCache::TokensToWindow(int layer) const {
  if (token_select_) return 1;  // the sums are always open
  // FirstRecordedQuery: a decode query is recorded once the residual
  // (counting its own token) reaches 33 - m tokens.
  const int64_t r0 = store_->ResidualSize(layer, 0);
  return std::max<int64_t>(1, kHqekvChunk + 1 - m_ - r0);
}

int64_t HqekvCache::WindowGrowth(int layer, int64_t ahead) const {
  const int64_t r0 = store_->ResidualSize(layer, 0);
  int64_t grow = 0;
  if (token_select_) {
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
    const int64_t q_cap = 2 * (static_cast<int64_t>(U.cur_q.size()) + m_);
    grow += static_cast<int64_t>(sizeof(int32_t)) *
            std::max<int64_t>(0, q_cap - static_cast<int64_t>(U.cur_q.capacity()));
  }
  return grow;
}

int64_t HqekvCache::BudgetBytes(int64_t tokens) const {
  return static_cast<int64_t>(
      std::floor(true_bits_ * static_cast<double>(tokens) * g_.n_kv_heads * g_.head_dim * 2 / 8.0));
}

int64_t HqekvCache::ResidualTokenBytes() const {
  return static_cast<int64_t>(g_.n_kv_heads) * (4 * g_.head_dim + 4);
}

bool HqekvCache::HoldsBudget(int layer) const {
  const int64_t n = store_->AppendedTokens(layer);
  const int64_t held = LayerAllocatedBytes(layer);
  if (token_select_) {
    // No residual reserve: the next decode step adds one fp16 token per
    // head (and its sums) before the next event can evict.
    const int64_t steps = 1;
    const int64_t grow = steps * ResidualTokenBytes() + WindowGrowth(layer, steps);
    return LayerBits(model_.layout, held, n) <= true_bits_ &&
           LayerBits(model_.layout, held + grow, n + steps) <= true_bits_;
  }
  const int64_t ahead = TokensToWindow(layer);
  const double now = LayerBits(model_.layout, held, n);
  const double peak = LayerBits(model_.layout, held + WindowGrowth(layer, ahead), n + ahead);
  return std::max(now, peak) <= true_bits_;
}

int64_t HqekvCache::PlaneBytesHeld(int layer) const {
  int64_t planes = 0;
  for (const Unit& U : units_[layer]) {
    for (size_t c = 0; c < U.tk.size(); ++c) {
      if (token_select_ && U.tk[c] == Tier::kF16) {
        // Partly downgraded (DowngradeSealedUntilHeld): per head and plane.
        for (int h = 0; h < g_.n_kv_heads; ++h) {
          const cache::ChunkView v = store_->Chunk(layer, h, static_cast<int>(c));
          const Tier kt = v.k_format.kind == quant::Kind::kF16 ? Tier::kF16 : Tier::kU4;
          const Tier vt = v.v_format.kind == quant::Kind::kF16 ? Tier::kF16 : Tier::kU4;
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
  if (!token_select_) return 0;
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
  int64_t window = 0;
  const int64_t r0 = store_->ResidualSize(layer, 0);
  for (const Unit& U : units_[layer]) {
    const int64_t kept = static_cast<int64_t>(U.tk.size()) * kHqekvChunk + r0 + ahead;
    window +=
        static_cast<int64_t>(sizeof(f16_t)) *
            std::max<int64_t>(kept + kHqekvChunk, static_cast<int64_t>(U.next.capacity())) +
        static_cast<int64_t>(sizeof(int32_t)) * 2 * (static_cast<int64_t>(U.next_q.size()) + m_);
  }
  const int64_t room = std::min(BudgetBytes(n), BudgetBytes(n + ahead) - window) - fixed;
  // The pool after the plan: the planes packed tightly in whole pages (the
  // event repacks when they are not) and the page table, as after the last
  // event plus an entry or two (before the first: 32 bytes per page).
  const int64_t page = static_cast<int64_t>(pool.page_bytes());
  // (select=token: the table as held now, over this event's fp16 chunks, an
  // upper bound; the first event's estimate cost a chunk or two at 1.5k
  // tokens on stories260K.)
  const int64_t table = table_bytes_[layer] > 0 ? table_bytes_[layer] + 64
                        : token_select_         ? pool.table_bytes() + 64
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
      LiveChunkRecordBytes(model_.layout) + (token_select_ ? TokenPositionBytes(layer) : 0) +
      units_per_layer_ * static_cast<int64_t>(kHqekvChunk + 2 * sizeof(f16_t) + 2 * sizeof(Tier) +
                                              sizeof(f16_t) * kHqekvChunk);
  std::array<int64_t, kNumTiers> chunk_bytes{};
  for (int t = 0; t < kNumTiers; ++t) {
    const Tier tier = static_cast<Tier>(t);
    chunk_bytes[t] =
        tier == Tier::kEvicted ? 0 : UnitPlaneBytes(tier, tier) * units_per_layer_ + keep_bytes;
  }
  // The room, with the live chunks' share counted as part of it (what
  // `fixed` and `window` hold for them now; chunks evicted at earlier events
  // hold none: counting theirs made the solve keep chunks the check after
  // the plan then evicted for good) ...
  const int64_t solve_room = planes_room + live * keep_bytes;
  const BudgetCounts bc = SolveBudgetCounts(nb, pinned_, chunk_bytes, solve_room, usable_);
  // ... and what the planes alone may hold once the plan's chunks are kept.
  int64_t kept = 0;
  for (int t = 0; t < static_cast<int>(Tier::kEvicted); ++t) kept += bc.counts[t];
  const int64_t gone = nb - live;  // evicted at earlier events (no state left)
  kept = std::min(kept, nb - std::max<int64_t>(gone, bc.counts[static_cast<int>(Tier::kEvicted)]));
  *planes_room_out = std::max<int64_t>(0, planes_room + (live - kept) * keep_bytes);
  return bc;
}

ChunkScores HqekvCache::UnitScores(int layer, int u) const {
  const Unit& U = units_[layer][u];
  const int h_rep = per_head_ ? u : 0;
  const int live = static_cast<int>(U.tk.size());
  const int nc = live * kHqekvChunk;  // compressed kept tokens, first in walk order
  std::vector<int32_t> pos;
  store_->KeptPositions(layer, h_rep, &pos);
  std::vector<double> sum(nc, 0.0);
  for (int i = 0; i < nc && i < static_cast<int>(U.cur.size()); ++i)
    sum[i] = F16ToF32(U.cur[i]) / sum_scale_;
  const std::vector<int32_t> cpos(pos.begin(), pos.begin() + nc);
  // min_count = m: the window mean (issue 12: dividing the newest tokens'
  // sums by the few queries that see them ranked the newest chunk first).
  // select=token: the cumulative sums themselves (H2O's score).
  const std::vector<double> a =
      token_select_ ? sum
                    : NormalizeImportance(sum, cpos,
                                          std::vector<int32_t>(U.cur_q.begin(), U.cur_q.end()), m_);
  std::vector<double> vrange(nc);
  for (int i = 0; i < nc; ++i) vrange[i] = RangeOf(U, i);
  std::vector<int32_t> pos0(live);
  for (int c = 0; c < live; ++c) pos0[c] = cpos[static_cast<size_t>(c) * kHqekvChunk];
  return ScoreChunks(ranking_, a, vrange, pos0, kHqekvChunk,
                     (static_cast<uint64_t>(layer) << 32) | u, sink_);
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
  // score is inflated by its own quantization error (issue 12).
  return PlanTiers(ck, cv, pk, pv, counts);
}

int64_t HqekvCache::PlannedPlaneBytes(int layer, int64_t nb,
                                      const std::array<int64_t, kNumTiers>& counts,
                                      const std::vector<ChunkScores>& scores) const {
  int64_t b = 0;
  for (int u = 0; u < units_per_layer_; ++u) {
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
    for (int t = static_cast<int>(Tier::kU4); t < kEv && !raised; ++t) {
      if (!TierUsable(usable_, t)) continue;
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

Status HqekvCache::ApplyCounts(int layer, int u, int64_t nb,
                               const std::array<int64_t, kNumTiers>& counts, ChunkScores* sc,
                               Vec<f16_t>* window, bool* changed) {
  Unit& U = units_[layer][u];
  const int head = per_head_ ? u : cache::kAllHeads;
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
  if (r < (token_select_ ? recent_ + 1 : kHqekvChunk)) return Status::Ok();
  int C = r - r % kHqekvChunk;
  if (token_select_) {
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
  if (token_select_ && new_chunks > 0) {
    const int64_t extra =
        (UnitPlaneBytes(Tier::kF16, Tier::kF16) - UnitPlaneBytes(Tier::kU4, Tier::kU4)) *
        units_per_layer_;
    if (extra > 0) {
      f16_chunks = static_cast<int>(
          std::min<int64_t>(new_chunks, std::max<int64_t>(0, token_room_[layer]) / extra));
    }
  }

  // Range(V) of the tokens compressed now, from their exact fp16 V.
  std::vector<float> vrow(D);
  for (int u = 0; u < units_per_layer_; ++u) {
    const int h0 = per_head_ ? u : 0, h1 = per_head_ ? u + 1 : g_.n_kv_heads;
    std::vector<double> range(C, 0.0);
    for (int h = h0; h < h1; ++h) {
      const cache::ResidualView rv = store_->Residual(layer, h);
      for (int t = 0; t < C; ++t) {
        for (int d = 0; d < D; ++d) vrow[d] = F16ToF32(rv.v[static_cast<size_t>(t) * D + d]);
        range[t] += ValueRange(vrow.data(), 1, D);
      }
    }
    Unit& U = units_[layer][u];
    AppendRanges(U, range);
    // select=token seals at the best quantized tier at once: fp16 chunks
    // would fill the pool (and its page table, which the plan's solve then
    // counts) with twice the planes the plan keeps.
    const Tier t0 = token_select_ ? Tier::kU4 : Tier::kF16;
    U.tk.insert(U.tk.end(), new_chunks - f16_chunks, t0);
    U.tv.insert(U.tv.end(), new_chunks - f16_chunks, t0);
    U.tk.insert(U.tk.end(), f16_chunks, Tier::kF16);
    U.tv.insert(U.tv.end(), f16_chunks, Tier::kF16);
  }
  if (token_select_) {
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
    HQEKV_RETURN_IF_ERROR(store_->Seal(
        layer, cache::kAllHeads, c_u4, token_select_ ? TierFormat(Tier::kU4, true) : quant::F16(),
        token_select_ ? TierFormat(Tier::kU4, false) : quant::F16()));
  }
  if (f16_chunks > 0) {
    HQEKV_RETURN_IF_ERROR(store_->Seal(layer, cache::kAllHeads, f16_chunks * kHqekvChunk,
                                       quant::F16(), quant::F16()));
  }
  compressed_chunks_[layer] += new_chunks;
  if (token_select_) {
    // Held: the plan fit (the chunk solve below only evicts whole chunks
    // when the layer is over B).
    HQEKV_ASSIGN_OR_RETURN(const bool held, DowngradeSealedUntilHeld(layer));
    if (held) {
      table_bytes_[layer] = store_->Pool(layer).table_bytes();
      return Status::Ok();
    }
  }
  const int64_t nb = compressed_chunks_[layer];
  std::vector<ChunkScores> scores(units_per_layer_);
  for (int u = 0; u < units_per_layer_; ++u) scores[u] = UnitScores(layer, u);
  // FIX (decode budget): counts over every chunk ever compressed, evicted ones
  // included, with the configured ratios at every event, so the evict share
  // r0 holds during decoding too. The reference decays its eviction ratio to
  // ~0 after prefill (digest §3 step 5) and a long generation drifts above
  // the prefill's eviction share.
  std::array<int64_t, kNumTiers> counts;
  if (true_bits_ > 0) {
    // bits=B: the counts whose planes fit what the layer's measured bytes
    // leave of B at this length and when the next window opens (issue 12:
    // the analytic upper bound of true_bits.h left the cache 4-7% below B).
    int64_t planes_room = 0;
    const BudgetCounts bc = SolveEventCounts(layer, nb, &planes_room);
    counts = bc.counts;
    RaiseCounts(layer, nb, scores, planes_room, &counts);
    budget_below_ = budget_below_ || bc.below;
    // select=token spends the room on tokens (SelectTokens), not on tiers.
    budget_above_ = budget_above_ || (bc.above && !token_select_);
  } else {
    counts = AllocateChunks(nb, ratios_[layer], pinned_);
  }
  for (int pass = 0;; ++pass) {
    bool changed = false;
    for (int u = 0; u < units_per_layer_; ++u) {
      Unit& U = units_[layer][u];
      // The first pass compacts the sums carried to the next event (`next`),
      // which then become the open window; later passes compact that.
      // select=token: the cumulative sums (`cur`) stay open.
      HQEKV_RETURN_IF_ERROR(ApplyCounts(layer, u, nb, counts, &scores[u],
                                        pass == 0 && !token_select_ ? &U.next : &U.cur, &changed));
      if (pass == 0 && !token_select_) {
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
    if (true_bits_ <= 0) break;
    // Downgrades free blocks but rarely whole pages: past a page of slack the
    // layer's blocks move to fresh pages (a memcpy of its planes), so the
    // budget buys planes, not holes.
    if (!PackedTightly(layer)) store_->RepackLayer(layer);
    if (HoldsBudget(layer)) break;
    if (!ShiftOneChunkDown(&counts, usable_)) {
      budget_below_ = true;
      break;
    }
  }
  if (true_bits_ > 0) table_bytes_[layer] = store_->Pool(layer).table_bytes();
  if (true_bits_ > 0) {
    const int64_t rest = nb - counts[0];
    if (rest > 0) {
      ratios_[layer] = {
          static_cast<double>(counts[1]) / rest, static_cast<double>(counts[2]) / rest,
          static_cast<double>(counts[3]) / rest, static_cast<double>(counts[4]) / rest};
    }
  }
  return Status::Ok();
}

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
  Tier cheap = Tier::kU4;
  for (Tier t : {Tier::kU2, Tier::kN1}) {
    if (TierUsable(usable_, static_cast<int>(t))) cheap = t;
  }
  b.planes = UnitPlaneBytes(cheap, cheap) * units_per_layer_;
  b.unit = static_cast<int64_t>(pool.unit_bytes());
  b.records = LiveChunkRecordBytes(model_.layout) +
              units_per_layer_ * (kHqekvChunk + sizeof(f16_t) + 2 * sizeof(Tier));
  b.page = static_cast<int64_t>(pool.page_bytes());
  // fp16 chunks at their u4 planes: they go to u4 before a token is evicted.
  b.planes_held = PositionBytesHeld(layer);
  for (const Unit& U : units_[layer]) {
    for (size_t c = 0; c < U.tk.size(); ++c)
      b.planes_held += UnitPlaneBytes(std::max(U.tk[c], Tier::kU4), std::max(U.tv[c], Tier::kU4));
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
      units_per_layer_ *
          (static_cast<int64_t>(sizeof(f16_t)) * ((b.live + s + 1) * kHqekvChunk) +
           static_cast<int64_t>(sizeof(float)) * (r_left + kHqekvChunk) * TokenHeads()) +
      static_cast<int64_t>(sizeof(int32_t)) * 2 * m_;
  return b.fixed + s * b.records + pool_after + table + sums + res_tokens * b.res_token;
}

Result<int> HqekvCache::SelectTokens(int layer) {
  HQEKV_DCHECK(units_per_layer_ == 1);
  Unit& U = units_[layer][0];
  const cache::ResidualView rv = store_->Residual(layer, 0);
  const int r = rv.n;
  const int64_t nc = static_cast<int64_t>(U.tk.size()) * kHqekvChunk;  // sealed kept tokens
  HQEKV_DCHECK(store_->KeptTokens(layer, 0) == nc + r);
  const int W = std::min(recent_, r);
  const int cand = r - W;  // the oldest residual tokens are judged
  const int64_t n = store_->AppendedTokens(layer);
  // Fits now, and after the next step's token (the next event can evict).
  const TokenBase base = TokenPlanBase(layer);
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
      if (posh[hs][j] < sink_) {
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
  // Fits now, and after the next step's token (the next event can evict).
  auto fits = [&](int64_t s, int64_t r_left) {
    const int64_t l = lists(s, r_left - W);
    return TokenPlanBytes(base, s, l, r_left, r_left) <= BudgetBytes(n) &&
           TokenPlanBytes(base, s, l, r_left + 1, r_left + 1) <= BudgetBytes(n + 1);
  };
  // As many whole chunks as fit, then as many residual survivors (< 32).
  int64_t s = cand / kHqekvChunk;
  while (s > 0 && !fits(s, W)) --s;
  int64_t x = std::min<int64_t>(kHqekvChunk - 1, cand - s * kHqekvChunk);
  while (x > 0 && !fits(s, W + x)) --x;
  const int64_t keep = keep_of(s, x);
  {
    const int64_t l = lists(s, x);
    token_room_[layer] =
        std::min(BudgetBytes(n) - TokenPlanBytes(base, s, l, W + x, W + x),
                 BudgetBytes(n + 1) - TokenPlanBytes(base, s, l, W + x + 1, W + x + 1));
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
      sealed.push_back(F32ToF16(std::min(sum_scale_ * v, 32768.0f)));
    } else {
      for (int hs = 0; hs < Hs; ++hs) rest.push_back(old_sum(hs, t));
    }
  }
  U.cur.swap(sealed);
  U.rsum.swap(rest);
  return C;
}

Result<bool> HqekvCache::DowngradeSealedUntilHeld(int layer) {
  HQEKV_DCHECK(units_per_layer_ == 1);
  Unit& U = units_[layer][0];
  // One plane of one head at a time (K, then V; ~1/8 of the chunk's fp16
  // bytes, a token or two): a whole chunk at once left the bytes it freed
  // beyond what the step's token needed unused, 4-6% of B for ~20 steps.
  const quant::Format k4 = TierFormat(Tier::kU4, true), v4 = TierFormat(Tier::kU4, false);
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
    U.tk[c] = U.tv[c] = Tier::kU4;
  }
  return HoldsBudget(layer);
}

}  // namespace hqekv::policy
