// The policy table: one row per `--kv` policy (name, help, parameters with
// defaults and ranges, exclusive key groups, create function). ParseSpec
// (spec.cc) checks specs against it, CreateCache (factory.cc) calls the row's
// create function, `hqekv policies` prints it. A new policy is one row here
// plus its own file: docs/checklists/add-policy.md.
#include "cache/plain_cache.h"
#include "policy/cache_context.h"
#include "policy/h2o_cache.h"
#include "policy/hqekv_cache.h"
#include "policy/llama_cache.h"
#include "policy/pyramid_cache.h"
#include "policy/quant_cache.h"
#include "policy/snapkv_cache.h"
#include "policy/spec.h"
#include "policy/streaming_cache.h"

namespace hqekv::policy {
namespace {

ParamInfo Int(std::string key, std::string def, double lo, double hi, std::string help) {
  return {std::move(key), ParamType::kInt, std::move(def), lo, hi, {}, std::move(help)};
}
ParamInfo Real(std::string key, std::string def, double lo, double hi, std::string help) {
  return {std::move(key), ParamType::kReal, std::move(def), lo, hi, {}, std::move(help)};
}
ParamInfo Choice(std::string key, std::string def, std::vector<std::string> c, std::string help) {
  return {std::move(key), ParamType::kChoice, std::move(def), 0, 0, std::move(c), std::move(help)};
}
ParamInfo Text(std::string key, std::string help) {
  return {std::move(key), ParamType::kText, "", 0, 0, {}, std::move(help)};
}
// Marks a key that fixes the cache's memory (ParamInfo::budget).
ParamInfo Budget(ParamInfo p) {
  p.budget = true;
  return p;
}

// Budget keys shared by every eviction policy. keep is a fraction of the
// tokens seen; bits is the memory of a B-bit cache, in true bytes (see
// policy/budget.h). Upper bound of bits: a 16-bit budget is the fp16 cache.
ParamInfo KeepParam() {
  return Budget(Real("keep", "", 1e-6, 1.0,
                     "kept fraction of the tokens seen (default 0.5 when no budget key is given)"));
}
ParamInfo BitsBudgetParam() {
  return Budget(Real("bits", "", 0.01, 15.99,
                     "budget = the true bytes of a B-bit cache of the tokens seen (own bookkeeping "
                     "included)"));
}

template <PlainPrecision kPrecision>
Result<std::unique_ptr<KvCache>> CreatePlain(const PolicySpec&, const KvGeometry& g,
                                             const CacheContext&) {
  HQEKV_ASSIGN_OR_RETURN(auto c, PlainKvCache::Create(g, kPrecision));
  return std::unique_ptr<KvCache>(std::move(c));
}

std::vector<PolicyInfo> BuildTable() {
  std::vector<PolicyInfo> t;
  t.push_back({"fp16",
               "uncompressed fp16 cache (the baseline)",
               {},
               {},
               CreatePlain<PlainPrecision::kF16>});
  t.push_back(
      {"fp32", "uncompressed fp32 cache (the oracle)", {}, {}, CreatePlain<PlainPrecision::kF32>});
  t.push_back({"fp8",
               "FP8 E4M3 codes (format=e5m2: E5M2), one fp16 scale per (layer, KV head, 32-token "
               "chunk); the newest "
               "tokens wait in an fp16 residual until a chunk fills",
               {Choice("format", "e4m3", {"e4m3", "e5m2"},
                       "code layout: E4M3 (3 mantissa bits) or E5M2 (2 mantissa bits, wider "
                       "range; vLLM's fp8_e5m2)")},
               {},
               QuantCache::Create});
  t.push_back({"int8",
               "symmetric int8, one fp16 scale per token and KV head; sealed in 32-token chunks "
               "from an fp16 residual",
               {},
               {},
               QuantCache::Create});
  t.push_back(
      {"kivi",
       "KIVI: K per-channel over 32-token groups, V per-token over groups of channels; "
       "the newest tokens stay fp16 until `residual` accumulate, then full groups are "
       "quantized",
       {Choice("nominal_bits", "2", {"2", "4"},
               "bits per K and V code (the paper's KIVI-2 / KIVI-4)"),
        // Not a budget key for `eval`: KIVI's memory follows from its
        // two formats; bits=B only picks one of them.
        Real("bits", "", 0.01, 15.99,
             "TRUE bits per original element: the widest code (4, else 2) whose every "
             "byte fits B at the cache's full context"),
        Int("group", "32", 1, 4096, "V channels per group (clamped to head_dim; must divide it)"),
        Int("residual", "128", 32, 1 << 20,
            "fp16 residual length R, a multiple of 32: quantize when R tokens wait")},
       {{"bits", "nominal_bits"}},
       QuantCache::Create});
  t.push_back(
      {"llama",
       "llama.cpp's KV cache types (-ctk / -ctv) as its CPU build computes them: per token, "
       "blocks of 32 values along head_dim with an fp16 scale (q*_1: and an fp16 minimum), "
       "ggml's quantizers, every token quantized when appended, Hadamard rotation of quantized "
       "K/V (rot=on, llama.cpp's default); true bits per element q8_0 8.5, q5_1 6, q5_0 5.5, "
       "q4_1 5, q4_0 4.5 plus positions (head_dim a multiple of 32)",
       {Choice("ctk", "f16", LlamaCacheTypes(), "K cache type"),
        Choice("ctv", "f16", LlamaCacheTypes(), "V cache type"),
        // Not a budget key for `eval`, as kivi's: the memory follows from the types.
        Real("bits", "", 0.01, 15.99,
             "TRUE bits per original element: of the K/V type pairs that hold <= B from 64 "
             "tokens to the full context, the one with the lowest measured KL"),
        Choice("rot", "on", {"on", "off"},
               "llama.cpp's Hadamard rotation of quantized K/V (off: LLAMA_ATTN_ROT_DISABLE=1)"),
        Choice("residual", "0", {"0", "32"},
               "32: the earlier variant, newest < 32 tokens in an fp16 residual, no rotation")},
       {{"bits", "ctk"}, {"bits", "ctv"}},
       CreateLlamaCache});
  t.push_back(
      {"streaming",
       "StreamingLLM: the first `sink` tokens plus the newest tokens (a window)",
       {Int("sink", "4", 0, 1 << 20, "attention-sink tokens kept from the start"),
        Budget(Int("window", "", 1, 1 << 24, "fixed recent window (tokens); or give keep/bits")),
        KeepParam(), BitsBudgetParam()},
       {{"window", "keep", "bits"}},
       StreamingCache::Create});
  t.push_back({"h2o",
               "H2O: heavy hitters by cumulative attention of every past query (summed over the "
               "query heads of each KV head) plus a recent window, evicted every step",
               {Budget(Int("heavy", "", 0, 1 << 24, "fixed heavy-hitter count (with recent)")),
                Int("recent", "", 0, 1 << 24, "fixed recent-window count (with heavy)"),
                Real("recent_share", "0.5", 0.0, 1.0,
                     "share of a keep/bits budget given to the recent window"),
                KeepParam(), BitsBudgetParam()},
               {{"heavy", "keep", "bits"}, {"recent", "keep", "bits"}},
               H2oCache::Create});
  t.push_back(
      {"snapkv",
       "SnapKV: once at the end of prefill, the last `window` prompt queries vote "
       "(attention summed over the window and the query heads of each KV head, 1-D max "
       "pooling) and each KV head keeps its top tokens plus the window; decode tokens "
       "are appended unchanged",
       {Int("window", "32", 1, 1 << 16, "observation window (last prompt queries)"),
        Int("kernel", "7", 1, 1025, "max-pooling width (odd)"), KeepParam(), BitsBudgetParam()},
       {{"keep", "bits"}},
       SnapKvCache::Create});
  t.push_back(
      {"pyramid",
       "PyramidKV: SnapKV selection with per-layer budgets shrinking linearly with depth "
       "(first layer 2a - a/beta, last a/beta, a = mean budget beyond the window), same "
       "total",
       {Real("beta", "20", 1.0, 1e6, "ratio of the mean to the smallest layer budget"),
        Int("window", "32", 1, 1 << 16, "observation window (last prompt queries)"),
        Int("kernel", "7", 1, 1025, "max-pooling width (odd)"), KeepParam(), BitsBudgetParam()},
       {{"keep", "bits"}},
       PyramidCache::Create});
  t.push_back(
      {"hqekv",
       "HqeKV hybrid: 32-token chunks ranked by attention (K) and attention x Range(V) (V), "
       "top chunks fp16, then uniform-4, uniform-2, normal-1, evicted by the tier ratios; "
       "re-ranked at prefill and every 32 tokens, downgrade only",
       {Budget(Real("bits", "", 0.01, 15.99,
                    "budget in TRUE bits per original element (every byte held: codes, scales, "
                    "fp16 chunks, residual, bookkeeping); tier ratios solved from the layer's "
                    "byte model at every event, two adjacent tiers mixed (layout=lean: u4/u3, "
                    "u3/u2, then u2/evicted); a profile shipped for the model and B is used "
                    "instead (shipped=)")),
        Budget(Real("nominal_bits", "", 0.01, 16.0,
                    "the paper's nominal B_avg = 4 r4 + 2 r2 + r1; built-in Llama-3.1-8B ratios "
                    "for 2, 2.8, 3.2, 3.25")),
        Budget(Text("ratios", "tier ratios r4/r2/r1/r0 (4-bit, 2-bit, 1-bit, evicted), sum 1")),
        Budget(Text(
            "profile",
            "calibration profile JSON {\"ratios\": {\"r4\":..,\"r2\":..,\"r1\":..,\"r0\":..}}")),
        Int("m", "20", 1, 4096, "importance window: the last m queries"),
        Int("fp16_chunks", "2", 0, 1 << 20, "top chunks pinned in fp16"),
        Choice("per_head", "0", {"0", "1"}, "importance per KV head instead of per layer"),
        Choice("hadamard", "0", {"0", "1"}, "Walsh-Hadamard rotation before quantizing"),
        Choice("layout", "auto", {"auto", "lean", "paper"},
               "tier layout defaults: lean = tiers=u4/u3/u2, vgroup=head_dim, hadamard=1, "
               "fp16_chunks=0 (measured best per byte, docs/ablations/tiers.md); paper = "
               "u4/u2/n1, vgroup=32, hadamard=0, fp16_chunks=2; auto = lean with bits=, paper "
               "otherwise; keys given explicitly win"),
        Text("tiers",
             "formats of the three quantized tiers, best first, e.g. u8/u4/u3 (default: "
             "by layout; any of u8, u4, u3, u2, u1, n2, n1; K per-channel, V per-token; "
             "ratios r4/r2/r1 name these tiers in order)"),
        Text("vtiers",
             "formats of V's three quantized tiers, best first (default: as tiers=); any "
             "quantized store format, e.g. q8_0/q5_1/u4"),
        Choice("menu", "auto", {"auto", "on", "off"},
               "bits=B: the tier slots from the tier menu (u8, q8_0, int8, q5_1, q5_0, "
               "q4_1, q4_0, u4, u3, u2), K and V chosen apart on the frontier of bytes vs "
               "sensitivity-weighted error, the two around B mixed; auto = on under "
               "layout=lean above the all-u4 cost; off = u8/u4/u3 there"),
        Text("residual",
             "bits=B: how the newest tokens (fewer than a chunk, waiting to be sealed) are "
             "held: auto (default) = quantized per token when appended on contexts below "
             "1024 tokens (rotated q4_0 below 4.3 bits, rotated q8_0 from there; head_dim a "
             "multiple of 32; other heads int8 below 6 bits), else f16; or f16, q8_0, q5_1, "
             "q5_0, q4_1, q4_0, iq4_nl, "
             "int8 (\":had\" rotates)"),
        Text("layer_bits",
             "bits=B: per-layer offsets d0/d1/... in bits (one per layer, mean 0): layer l "
             "holds B + d_l, so the cache still holds B (e.g. from measured per-layer "
             "sensitivity, docs/results/frontier.md)"),
        Real("kweight", "16", 0.001, 1e6,
             "menu: K error's weight relative to V's (refmodel-4l: q8_0 K with q4_0 V has "
             "1/16 the KL of the swap)"),
        Int("vgroup", "32", 1, 4096,  // layout=lean: head_dim
            "V channels per per-token scale/minimum group (clamped to head_dim; must divide "
            "it): head_dim halves V's metadata at D = 64"),
        Choice("vgrouping", "auto", {"auto", "tok", "chan"},
               "V's quantization groups: tok = per token (vgroup channels, the paper's), chan = "
               "per channel over the 32-token chunk (as K; 1 bit of metadata per element at "
               "any head_dim); auto = chan under layout=lean when head_dim < 32 (a per-token "
               "group's fp16 scale and minimum cost 32 / head_dim bits per element), else tok"),
        Choice("mix", "auto", {"auto", "ladder", "top"},
               "bits=B: tiers the solver mixes; ladder = two adjacent tiers (u4/u3, u3/u2, "
               "u2/evicted); top = the best tier and eviction only (u8/u4 above all-u4); auto = "
               "top under layout=lean when head_dim < 32 and tiers= is not given (ladder above "
               "all-u4), else ladder"),
        Choice("ranking", "paper", {"paper", "random", "recency", "sink_recency", "pooled"},
               "chunk ranking (ablation): attention as the paper, a fixed random order, newest "
               "first, newest first with the sink kept, SnapKV-style max-pooled window votes"),
        Int("sink", "0", 0, 1 << 20,  // layout=lean, head_dim < 32: 4
            "chunks holding one of the first `sink` tokens (the attention sink) outrank the rest; "
            "off by default: measured no better per byte (docs/ablations/importance.md)"),
        Choice("select", "auto", {"auto", "chunk", "token"},
               "bits=B: what an event evicts; chunk = whole 32-token chunks (the paper's); "
               "token = each KV head's lowest-scored residual tokens by cumulative attention "
               "(as H2O) before the survivors are sealed into full quantized chunks, whole "
               "chunks only when over B; auto = token when head_dim < 32 under layout=lean and "
               "B is below the all-u4 cost (except in a cache where recent + 32 tokens are >= 1/8 "
               "of it, with residual=auto, or from 4.1 bits), or on larger heads under layout=lean "
               "in a cache of >= 2048 tokens when B is 0.15 bit or more under the all-bottom-slot "
               "cost (chunk mode would evict at every event), "
               "else chunk (docs/ablations/tiers.md, \"Token selection\")"),
        Int("recent", "48", 0, 1024,
            "select=token: the newest residual tokens kept unjudged at an event (their "
            "attention sums are still small)"),
        Choice("shipped", "1", {"0", "1"},
               "bits=B on a model with a profile shipped for B (profiles/<model>/"
               "hqekv-<B>-true.json, checked against the model): use its ratios and tier "
               "formats; without one, the per-layer budgets shipped for the model "
               "(profiles/<model>/layer-bits.txt) unless layer_bits= is given; 0: neither"),
        Choice("force", "0", {"0", "1"},
               "use a profile calibrated on another model (checked when the cache is created, "
               "policy/profile.h)"),
        Choice(
            "decouple", "0", {"0", "1"},
            "separate K and V eviction sets (not supported: the store evicts K and V together)")},
       {{"bits", "nominal_bits", "ratios", "profile"}},
       HqekvCache::Create});
  return t;
}

}  // namespace

const std::vector<PolicyInfo>& PolicyTable() {
  static const std::vector<PolicyInfo> table = BuildTable();
  return table;
}

const PolicyInfo* FindPolicy(const std::string& name) {
  for (const auto& p : PolicyTable()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace hqekv::policy
