// HqeKV's options, resolved once from a spec (and its profile) into a plain
// struct: everything HqekvCache::Create decides before the cache exists.
// The budget solve (bits=B) that needs the store's page geometry runs in
// HqekvCache::Create on these options.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/status.h"
#include "policy/cache_context.h"
#include "policy/hqekv_alloc.h"
#include "policy/selection.h"
#include "policy/spec.h"
#include "quant/format.h"

namespace hqekv::policy {

struct HqekvOptions {
  std::string describe;            // the spec as the cache names itself (force= left out)
  std::string where;               // "KV policy '...'" for error messages
  std::vector<TierRatios> ratios;  // per layer; empty: solved from bits=
  double true_bits = 0;            // bits=B when the ratios are solved, else 0
  std::string bits_text;           // bits= as given (error messages)
  bool lean = false;               // layout=lean (or auto with bits=)
  bool small = false;              // lean on a head_dim < 32
  bool own_tiers = false;          // tiers= or vtiers= given
  bool select_auto = false;        // select=auto chose token_select
  // select=auto in chunk mode on heads >= 32 (lean, bits=B, per_head=0, no
  // ranking=): token selection when B lies well under the all-bottom-slot
  // cost (SolveBudgetTiers).
  bool token_below_bottom = false;
  // select=auto chose chunks for a short cache on small heads: token
  // selection if whole chunks cannot reach B there (SolveBudgetTiers).
  bool token_if_infeasible = false;
  bool token_select = false;  // select=token (hqekv_token.cc)
  int recent = 48;
  int m = 20;
  int pinned = 2;
  bool per_head = false;
  bool hadamard = false;
  // Formats of the quantized tier slots (kHigh, kMid, kLow) for K and V:
  // kind and bits; TierFormatOf adds grouping, group and rotation.
  std::array<quant::Format, 3> k_tiers{quant::Uniform(4, quant::Grouping::kPerToken),
                                       quant::Uniform(2, quant::Grouping::kPerToken),
                                       quant::Normal(1, quant::Grouping::kPerToken)};
  std::array<quant::Format, 3> v_tiers = k_tiers;
  int vgroup = 32;
  bool v_per_channel = false;  // vgrouping=chan: V quantized per channel like K
  TierMask usable = kAllTiers;
  bool mix_auto = false;  // mix=auto: the solve may widen `usable` above all-u4
  Ranking ranking = Ranking::kPaper;
  int sink = 0;
  std::string menu = "auto";  // menu=: the tier menu above all-u4 (hqekv_menu.h)
  // residual=: how residual tokens are held; auto = BuildFrom's choice.
  bool residual_auto = true;
  quant::Format residual_format = quant::F16();
  double k_weight = 16;            // kweight=
  std::vector<double> layer_bits;  // layer_bits=: per-layer offsets from B (empty: none)
  int units_per_layer = 1;
  // Window sums are held in fp16 scaled by sum_scale (a power of two, so
  // exact), the largest that keeps the biggest possible sum (m queries x the
  // unit's query heads, each row summing to 1; select=token: every query of
  // the sequence) under 32768: small weights (1e-9 and up) then stay above
  // fp16's smallest subnormal (6e-8) instead of rounding to 0, so
  // low-attention chunks still rank by their attention.
  float sum_scale = 1.0f;
};

// Resolves `spec` for geometry g. force_chunk / force_token: select=chunk /
// select=token whatever the spec says (Create's second pass when the budget
// decides select=auto's choice: SolveBudgetTiers).
Result<HqekvOptions> ResolveHqekvOptions(const PolicySpec& spec, const KvGeometry& g,
                                         const CacheContext& ctx, bool force_chunk,
                                         bool force_token = false);

// tiers=A/B/C: three quantized store formats, best first (kind and bits).
// "d0/d1/..." (one offset in bits per layer, summing to 0 within 1e-3 per
// layer): layer_bits=.
Result<std::vector<double>> ParseLayerBits(const std::string& text, int n_layers);

// The layer_bits= value shipped for a model in dir/<model name>/layer-bits.txt
// ("identity HEX" and "layer_bits=..." lines, '#' comments): "" when there is
// no such file; an error when it is malformed or (unless force) measured on
// another model identity.
Result<std::string> ShippedLayerBits(const std::string& dir, const ModelIdentity& model,
                                     bool force);

Result<std::array<quant::Format, 3>> ParseTierFormats(const std::string& text);

// The store format of tier t for K or V (fp16 for kF16 and kEvicted): K per
// channel over the 32-token chunk, V per token in groups of vgroup channels
// (or per channel with v_per_channel), for the grouped kinds; every format
// rotated when hadamard.
quant::Format TierFormatOf(const HqekvOptions& o, Tier t, bool is_k);

}  // namespace hqekv::policy
