// Per-layer budgets for hqekv:bits=B (the `layer_bits=d0/d1/...` key) from a
// measured per-layer sensitivity of K and V on a calibration text.
//
// Probe: every stream of every layer held at 8 bits (u8: per-channel K,
// per-token V, rotated), except one layer's K (or V) in a narrower `probe`
// format (q5_1 by default): its KL above the all-u8 floor is that stream's
// damage. 2 x n_layers + 1 scorings. Budget split: rate-distortion with
// D_l ~ s_l 2^(-2 b_l) gives b_l = B + 1/2 log2(s_l / geomean(s)), s_l =
// K_l + V_l damage; `shrink` scales that (the slots of the tier menu are
// global, so a layer far above B cannot spend its share: measured on
// refmodel-4l, docs/results/frontier.md) and every offset is clamped to
// +-max_abs, then recentred to mean 0.
#pragma once

#include <string>
#include <vector>

#include "calib/lm_scorer.h"
#include "core/status.h"

namespace hqekv::calib {

struct LayerSensitivity {
  double floor = 0;          // KL with every stream at u8
  std::vector<double> k, v;  // KL with layer l's K (V) in the probe format
  std::string probe;         // the probe format's name
};

// The trial cache of one probe: layer `layer`'s K (is_k) or V in `probe`,
// everything else u8 (layer -1: nothing probed, the floor).
TrialCache LayerProbeTrial(int n_layers, int layer, bool is_k, const std::string& probe,
                           const std::string& kv_options);

Result<LayerSensitivity> MeasureLayerSensitivity(LmScorer& scorer, const std::string& probe,
                                                 const std::string& kv_options);

// Offsets in bits per layer (sum 0) from the damages above the floor.
std::vector<double> LayerBitsFromSensitivity(const LayerSensitivity& s, double shrink,
                                             double max_abs);

// "d0/d1/..." with 2 decimals, summing to 0 (the last takes the rounding).
std::string LayerBitsText(const std::vector<double>& offsets);

}  // namespace hqekv::calib
