// HqeKV's tier menu: the store formats a bits=B cache may give K and V, and
// the choice of its three quantized tier slots for a budget.
//
// A slot holds a (K format, V format) pair; K and V of one slot may differ.
// Each candidate stream format has a byte cost (planes of one chunk, every KV
// head) and a relative error measured on a synthetic chunk (MeasureStreamError).
// A pair's predicted damage is wk * e_K + wv * e_V: the weights are the
// sensitivity of the model's output to K and V error. On refmodel-4l the
// swapped pairs llama:ctk=q8_0,ctv=q4_0 and ctk=q4_0,ctv=q8_0 (same bytes)
// have KL 5.2e-4 and 8.4e-3, so K error costs ~16x V error there
// (kDefaultKWeight). The pairs no other pair beats at equal or fewer bytes
// form the frontier; a budget then takes the two frontier pairs around it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "quant/format.h"

namespace hqekv::policy {

// K error weight relative to V's (wv = 1); see above.
inline constexpr double kDefaultKWeight = 16.0;

// One stream format (K or V) of a chunk: its planes (bytes, every KV head)
// and its relative squared error sum (x^ - x)^2 / sum x^2.
struct StreamChoice {
  quant::Format format;
  int64_t bytes = 0;
  double error = 0;
};

// A (K, V) pair: indices into the K and V candidate lists.
struct KvChoice {
  int k = -1, v = -1;
  int64_t bytes = 0;  // K planes + V planes
  double damage = 0;  // wk * e_K + wv * e_V
};

// The pairs not dominated by another (fewer or equal bytes and strictly less
// damage, or fewer bytes and equal damage), by bytes ascending (damage then
// strictly descending). Ties in bytes and damage keep the first K, then V.
std::vector<KvChoice> KvFrontier(const std::vector<StreamChoice>& k,
                                 const std::vector<StreamChoice>& v, double wk, double wv);

// The least-damage pair of the frontier whose bytes fit `room`; nullopt when
// even the cheapest does not.
std::optional<KvChoice> BestKvChoice(const std::vector<KvChoice>& frontier, int64_t room);

// Relative squared error of `f` on a fixed synthetic chunk of T x D values
// (deterministic): K-like (per-channel offsets and scales spread over ~2
// orders of magnitude, as rotary K channels are) or V-like (per-token scales).
double MeasureStreamError(const quant::Format& f, int T, int D, bool k_like);

// The candidate formats of one stream, best first, that Validate for T x D:
// fp16 (never rotated), 8-bit (u8, q8_0, int8; not fp8 E4M3: the synthetic chunk rewards its range,
// but on refmodel-4l's rotated K/V it had 60x int8's KL at 8.2-8.5 bits),
// 5-6-bit (q5_1, q5_0), 4-bit (q4_1, q4_0, u4),
// u3, u2. Grouped kinds take `grouping` and `group`; every format takes `hadamard`.
std::vector<quant::Format> MenuFormats(int T, int D, quant::Grouping grouping, int group,
                                       bool hadamard);

// Three slots from a frontier (bytes ascending) given each pair's cost in
// bits at the cache's full context (bits[i] of frontier[i], ascending): the
// pair above the first one whose bits reach B, then the two below it (the
// solver mixes the two adjacent slots around B; the costs are upper bounds).
// Returns frontier indices, best first; fewer than three pairs repeat the
// lowest.
// A pair within kSlotMargin bits under B counts as reaching B, so that the
// bulk of the chunks never sits in the lowest slot with only eviction below.
inline constexpr double kSlotMargin = 0.1;
std::array<int, 3> PickSlots(const std::vector<double>& bits, double budget);

// The same for a cache whose layers hold different budgets (layer_bits=),
// from `lo` to `hi` around `budget`: the bottom slot is the bottom slot of
// `lo`, so that the layer given the fewest bits still has a slot under the
// bulk and pays for its growth by a downgrade, not an eviction (refmodel-4l,
// bits=9 with its shipped -0.49 on layer 2: that layer evicted 128 tokens,
// KL 3.6e-5 against 2.1e-5 at bits=8.657); the top slot is the top slot of
// `hi`, or two above the bottom when that is higher; the middle one is
// budget's middle slot, kept strictly between. lo == hi == budget gives
// PickSlots(bits, budget).
std::array<int, 3> PickSlots(const std::vector<double>& bits, double budget, double lo, double hi);

}  // namespace hqekv::policy
