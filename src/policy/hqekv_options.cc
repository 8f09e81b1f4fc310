#include "policy/hqekv_options.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "core/file.h"
#include "policy/hqekv_cache.h"
#include "policy/profile.h"

namespace hqekv::policy {
namespace {
// layout=lean quantizes V per token only from this head_dim up (vgrouping=auto).
constexpr int kLeanTokenGroupMin = 32;
// layout=lean on a small head_dim: the chunk of the first tokens outranks the
// rest (it is never evicted while another chunk can be).
constexpr int kSmallHeadSink = 4;
// select=auto on small heads: chunk selection when the fp16 part of token
// selection (recent window + open chunk) is at least 1/kShortCacheFp16Share
// of the cache (ResolveHqekvOptions).
constexpr int kShortCacheFp16Share = 8;
constexpr double kShortCacheChunkBits = 4.1;

// The largest power of two that keeps max_sum x scale under 32768 (fp16
// sums stay finite and small weights stay above fp16's subnormals).
float SumScale(double max_sum) {
  int shift = 0;
  while (shift < 24 && max_sum * std::ldexp(1.0, shift + 1) <= 32768.0) ++shift;
  return static_cast<float>(std::ldexp(1.0, shift));
}
}  // namespace

Result<HqekvOptions> ResolveHqekvOptions(const PolicySpec& user_spec, const KvGeometry& g,
                                         const CacheContext& ctx, bool force_chunk,
                                         bool force_token) {
  HqekvOptions o;
  // A profile's kv_options (the tier formats its ratios name) join the spec
  // below; the user's keys win.
  PolicySpec spec = user_spec;
  if (force_chunk) spec.values["select"] = "chunk";
  if (force_token) spec.values["select"] = "token";
  // force=1 only steers the profile check: not part of the cache's name.
  PolicySpec shown = user_spec;
  shown.given.erase("force");
  o.describe = shown.Canonical();
  o.where = "KV policy '" + o.describe + "'";
  const std::string& where = o.where;
  std::vector<TierRatios>& ratios = o.ratios;
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
    // and tier formats; otherwise the byte-model solver.
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
  // layout=lean (the default for bits=B): the tiers that measured best per
  // byte on refmodel-4l (docs/ablations/tiers.md); each key the spec gives
  // itself wins. layout=paper: the paper's u4/u2/n1, V groups of 32, two fp16
  // chunks, no rotation (the defaults of every key).
  const std::string layout = spec.Text("layout");
  o.lean = layout == "lean" || (layout == "auto" && spec.Has("bits"));
  // select=token (docs/ablations/tiers.md, "Token selection"): H2O's
  // choice of tokens, stored at the quantized tiers. auto: small heads, where
  // whole-chunk eviction lost to h2o at every budget. The residual then
  // holds no spare room (it never holds more than 32 + recent tokens, and the
  // reserve cost ~0.3 bit per element at head_dim 8).
  const bool by_bits = spec.Has("bits") && ratios.empty();
  const std::string sel = spec.Text("select");
  o.select_auto = sel == "auto";
  // Except a short cache: token selection holds its recent window and the
  // open chunk in fp16 (80 tokens by default), a sixth of a 512-token
  // cache; after a 256-token prefill at 5 bits it kept those 51 tokens and
  // nothing else, where chunk selection keeps 96 in u4. With residual=f16
  // from 4.1 bits (mean KL about half on stories260K from 4.2 bits; equal
  // at 3.4, token better below; at 4.0 chunks fit one fewer after the
  // prefill). With residual=auto at every budget: whole chunks hold the
  // residual's newest tokens in int8 rows there (AutoResidualFormat), which
  // token selection keeps in fp16 (docs/results/frontier-grid.md).
  o.residual_auto = !spec.Has("residual") || spec.Text("residual") == "auto";
  const bool short_cache = by_bits &&
                           kShortCacheFp16Share * (spec.Int("recent") + kHqekvChunk) >= g.max_ctx &&
                           (spec.Num("bits") >= kShortCacheChunkBits || o.residual_auto);
  // select=auto may choose: lean, bits=B, one ranking unit per layer, the
  // paper's ranking.
  const bool auto_choice =
      sel == "auto" && o.lean && by_bits && spec.Int("per_head") == 0 && !spec.Given("ranking");
  const bool token_auto = auto_choice && g.head_dim < kLeanTokenGroupMin;
  o.token_select = sel == "token" || (token_auto && !short_cache);
  // A cache too short for whole chunks to reach B (e.g. 128 tokens, whose
  // chunk floor is ~5 bits at D = 16) still selects tokens (SolveBudgetTiers).
  o.token_if_infeasible = token_auto && short_cache;
  o.token_below_bottom = auto_choice && g.head_dim >= kLeanTokenGroupMin;
  if (o.token_select && !by_bits) {
    return MakeError(where +
                     ": select=token needs bits=B (it keeps the tokens that fit B true bits); "
                     "ratios=, profile= and nominal_bits= place whole chunks");
  }
  if (o.token_select && spec.Int("per_head") != 0) {
    return MakeError(where +
                     ": select=token needs per_head=0 (each KV head keeps its own tokens, as "
                     "many as the others, so the chunks stay aligned across heads)");
  }
  o.recent = spec.Int("recent");
  const bool pow2 = (g.head_dim & (g.head_dim - 1)) == 0;
  // Small heads (head_dim < 32, e.g. stories260K's 8): a per-token V group's
  // fp16 scale and minimum cost 32 / head_dim bits per element and every
  // quantized tier pays ~1.8 bits of chunk records, residual and state, so
  // lean changes four defaults there, each measured on stories260K
  // (docs/ablations/tiers.md, "Small heads"): V per channel, no rotation,
  // the sink chunk kept, and the solver mixing u4 with eviction only.
  o.small = o.lean && g.head_dim < kLeanTokenGroupMin;
  o.m = spec.Int("m");
  o.pinned = o.lean && !spec.Given("fp16_chunks") ? 0 : spec.Int("fp16_chunks");
  o.per_head = spec.Int("per_head") != 0;
  // select=token keeps the rotation on small heads (measured: lower KL on
  // two of three texts at 3.4 and 4.2 bits, docs/ablations/tiers.md).
  o.hadamard = o.lean && !spec.Given("hadamard") ? pow2 && (!o.small || o.token_select)
                                                 : spec.Int("hadamard") != 0;
  const std::string tiers = spec.Has("tiers") ? spec.Text("tiers") : (o.lean ? "u4/u3/u2" : "");
  if (!tiers.empty()) {
    auto tf = ParseTierFormats(tiers);
    if (!tf.ok()) return MakeError(where + ": " + tf.message());
    o.k_tiers = *tf;
  }
  o.v_tiers = o.k_tiers;
  if (spec.Has("vtiers")) {
    auto tf = ParseTierFormats(spec.Text("vtiers"));
    if (!tf.ok()) return MakeError(where + ": v" + tf.message());
    o.v_tiers = *tf;
  }
  o.own_tiers = spec.Has("tiers") || spec.Has("vtiers");
  o.vgroup =
      o.lean && !spec.Given("vgroup") ? g.head_dim : std::min(spec.Int("vgroup"), g.head_dim);
  {
    // Per-token V groups of vgroup channels carry an fp16 scale and minimum
    // each: 32 / vgroup bits per element (4 at head_dim 8, where a tier's
    // metadata outweighs its codes); per channel over the chunk, 1 bit at
    // any head_dim (docs/ablations/tiers.md, stories260K).
    const std::string vg = spec.Text("vgrouping");
    o.v_per_channel = vg == "chan" || (vg == "auto" && o.small);
  }
  {
    const std::string mix = spec.Text("mix");
    o.mix_auto = mix == "auto";
    if (mix == "top" || (mix == "auto" && o.small && !spec.Has("tiers"))) {
      o.usable = static_cast<TierMask>(1u << static_cast<int>(Tier::kHigh));
    }
  }
  auto ranking = ParseRanking(spec.Text("ranking"));
  if (!ranking.ok()) return MakeError(where + ": " + ranking.message());
  o.ranking = *ranking;
  // select=token: no sink by default (its cumulative sums keep the sink's
  // tokens anyway; measured 0.053 vs 0.057 KL on WikiText-2 at 3.4 bits,
  // docs/ablations/tiers.md).
  o.sink = o.small && !o.token_select && !spec.Given("sink") ? kSmallHeadSink : spec.Int("sink");
  o.units_per_layer = o.per_head ? g.n_kv_heads : 1;
  // Window sums: m queries x the unit's query heads, each row summing to 1;
  // select=token: cumulative over every query of the sequence (at most
  // max_ctx of them, every query head).
  o.sum_scale = o.token_select ? SumScale(static_cast<double>(g.max_ctx) * g.n_q_heads)
                               : SumScale(static_cast<double>(o.m) *
                                          (o.per_head ? g.n_q_heads / g.n_kv_heads : g.n_q_heads));
  for (Tier t : {Tier::kHigh, Tier::kMid, Tier::kLow}) {
    for (bool k : {true, false}) {
      const Status s = quant::Validate(TierFormatOf(o, t, k), kHqekvChunk, g.head_dim);
      if (!s.ok()) return MakeError(where + ": " + s.message());
    }
  }
  if (by_bits) {
    o.true_bits = spec.Num("bits");
    o.bits_text = spec.Text("bits");
  }
  o.menu = spec.Text("menu");
  if (!o.residual_auto) {
    auto rf = quant::ParseFormat(spec.Text("residual"));
    if (!rf.ok()) return MakeError(where + ": residual=: " + rf.error().message);
    if (Status st = cache::CheckResidualFormat(rf.value(), g.head_dim); !st.ok()) {
      return MakeError(where + ": residual=: " + st.message());
    }
    if (o.token_select && rf.value().kind != quant::Kind::kF16) {
      return MakeError(where + ": residual=" + spec.Text("residual") +
                       " needs select=chunk (select=token keeps an fp16 residual)");
    }
    o.residual_format = rf.value();
  }
  o.k_weight = spec.Num("kweight");
  std::string layer_bits = spec.Has("layer_bits") ? spec.Text("layer_bits") : "";
  const bool shipped_layer_bits =
      layer_bits.empty() && by_bits && ctx.model && spec.Int("shipped") != 0;
  if (shipped_layer_bits) {
    // The per-layer budgets `hqekv calibrate --layer-bits` measured for this
    // model, when shipped (profiles/<model>/layer-bits.txt).
    HQEKV_ASSIGN_OR_RETURN(layer_bits, ShippedLayerBits(ctx.profiles_dir, *ctx.model,
                                                        ctx.force || spec.Int("force") != 0));
  }
  if (!layer_bits.empty()) {
    HQEKV_ASSIGN_OR_RETURN(o.layer_bits, ParseLayerBits(layer_bits, g.n_layers));
    if (!by_bits) return MakeError(where + ": layer_bits= needs bits=");
    for (const double d : o.layer_bits) {
      if (o.true_bits + d > 0) continue;
      if (shipped_layer_bits) {
        // B below the shipped offsets (under a bit): the user gave no
        // layer_bits=, so the budget alone is judged (creation reports the
        // achievable range when B is below the cache's floor).
        o.layer_bits.clear();
        break;
      }
      return MakeError(where + ": layer_bits= leaves a layer at " +
                       std::to_string(o.true_bits + d) + " bits (must be > 0)");
    }
  }
  return o;
}

Result<std::string> ShippedLayerBits(const std::string& dir, const ModelIdentity& model,
                                     bool force) {
  const std::string path = dir + "/" + model.name + "/layer-bits.txt";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::string();
  HQEKV_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  // Lines: "# ..." comments, "identity <hex>", "layer_bits=d0/d1/...".
  std::string identity, value;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("identity ", 0) == 0) {
      identity = line.substr(9);
    } else if (line.rfind("layer_bits=", 0) == 0) {
      value = line.substr(11);
    } else {
      return MakeError(path + ": unexpected line '" + line +
                       "' (expected 'identity HEX' or 'layer_bits=d0/d1/...')");
    }
  }
  if (value.empty()) return MakeError(path + ": no layer_bits= line");
  if (!force && identity != model.identity) {
    return MakeError(path + ": measured on model identity " +
                     (identity.empty() ? std::string("(none)") : identity) + ", not " +
                     model.identity + "; give shipped=0 (no per-layer budgets) or layer_bits=");
  }
  return value;
}

Result<std::vector<double>> ParseLayerBits(const std::string& text, int n_layers) {
  std::vector<double> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t slash = std::min(text.find('/', start), text.size());
    const std::string item = text.substr(start, slash - start);
    char* end = nullptr;
    const double d = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(d)) {
      return MakeError("layer_bits=" + text + ": '" + item + "' is not a number");
    }
    out.push_back(d);
    start = slash + 1;
  }
  if (static_cast<int>(out.size()) != n_layers) {
    return MakeError("layer_bits=" + text + ": " + std::to_string(out.size()) +
                     " values for a model of " + std::to_string(n_layers) + " layers");
  }
  double sum = 0;
  for (const double d : out) sum += d;
  if (std::fabs(sum) > 1e-3 * n_layers) {
    return MakeError("layer_bits=" + text + ": the offsets sum to " + std::to_string(sum) +
                     ", not 0 (every layer holds as many elements, so a mean of 0 keeps B)");
  }
  return out;
}

Result<std::array<quant::Format, 3>> ParseTierFormats(const std::string& text) {
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
    if (f->kind == quant::Kind::kF16 || f->kind == quant::Kind::kF32 ||
        head.find(':') != std::string::npos) {
      return MakeError("tiers='" + text + "': '" + head +
                       "' is not a plain quantized format (u8, u4, u3, u2, u1, n2, n1, q8_0, "
                       "q5_1, q5_0, q4_1, q4_0, int8, fp8e4m3, fp8e5m2; grouping, group and "
                       "rotation come from the policy)");
    }
    out[i] = *f;
    start = slash + 1;
  }
  return out;
}

quant::Format TierFormatOf(const HqekvOptions& o, Tier t, bool is_k) {
  // K per-channel over the 32-token chunk, V per-token over groups of vgroup
  // (default min(32, D)) channels, at every bit width; the formats of the
  // three quantized slots come from tiers= / vtiers= or the menu.
  if (t == Tier::kF16 || t == Tier::kEvicted) return quant::F16();  // evicted: never stored
  const int i = static_cast<int>(t) - static_cast<int>(Tier::kHigh);
  quant::Format f = is_k ? o.k_tiers[i] : o.v_tiers[i];
  if (quant::IsGroupedKind(f.kind)) {
    f.grouping =
        is_k || o.v_per_channel ? quant::Grouping::kPerChannel : quant::Grouping::kPerToken;
    f.group = o.vgroup;
  }
  f.hadamard = o.hadamard;
  return f;
}

}  // namespace hqekv::policy
