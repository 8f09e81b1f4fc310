#include "calib/layer_bits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hqekv::calib {

TrialCache LayerProbeTrial(int n_layers, int layer, bool is_k, const std::string& probe,
                           const std::string& kv_options) {
  // Slot kHigh = u8 everywhere, slot kMid = the probe in one stream; a layer's
  // ratios put every chunk in kHigh, the probed layer's in kMid. No fp16
  // chunks; force=1: a probe is no calibrated profile.
  const std::string k_mid = layer >= 0 && is_k ? probe : "u8";
  const std::string v_mid = layer >= 0 && !is_k ? probe : "u8";
  TrialCache t;
  t.spec = "hqekv:layout=lean,fp16_chunks=0,tiers=u8/" + k_mid + "/u2,vtiers=u8/" + v_mid +
           "/u2,force=1" + (kv_options.empty() ? "" : "," + kv_options);
  for (int l = 0; l < n_layers; ++l) {
    Ratios r;
    if (l == layer) {
      r.r2 = 1;
    } else {
      r.r4 = 1;
    }
    t.layer_ratios.push_back(r);
  }
  return t;
}

Result<LayerSensitivity> MeasureLayerSensitivity(LmScorer& scorer, const std::string& probe,
                                                 const std::string& kv_options) {
  LayerSensitivity s;
  s.probe = probe;
  const int L = scorer.n_layers();
  HQEKV_ASSIGN_OR_RETURN(const TrialScore f,
                         scorer.ScoreTrial(LayerProbeTrial(L, -1, true, probe, kv_options)));
  s.floor = f.kl;
  for (const bool is_k : {true, false}) {
    for (int l = 0; l < L; ++l) {
      HQEKV_ASSIGN_OR_RETURN(const TrialScore t,
                             scorer.ScoreTrial(LayerProbeTrial(L, l, is_k, probe, kv_options)));
      (is_k ? s.k : s.v).push_back(t.kl);
    }
  }
  return s;
}

std::vector<double> LayerBitsFromSensitivity(const LayerSensitivity& s, double shrink,
                                             double max_abs) {
  const size_t L = s.k.size();
  std::vector<double> d(L, 0.0);
  if (L == 0) return d;
  // Damage above the floor; a layer at or under it (noise) counts as the
  // smallest positive damage measured, or 1e-12 when none is.
  std::vector<double> dmg(L);
  double smallest = 0;
  for (size_t l = 0; l < L; ++l) {
    dmg[l] = std::max(0.0, s.k[l] - s.floor) + std::max(0.0, s.v[l] - s.floor);
    if (dmg[l] > 0 && (smallest == 0 || dmg[l] < smallest)) smallest = dmg[l];
  }
  double mean_log = 0;
  for (size_t l = 0; l < L; ++l) {
    dmg[l] = std::max(dmg[l], smallest > 0 ? smallest : 1e-12);
    mean_log += std::log2(dmg[l]) / static_cast<double>(L);
  }
  for (size_t l = 0; l < L; ++l) d[l] = shrink * 0.5 * (std::log2(dmg[l]) - mean_log);
  // Clamped to +-max_abs around a common shift c with sum clamp(d + c) = 0
  // (monotone in c: bisection), so the offsets keep B on average and stay
  // within the clamp.
  auto sum_at = [&](double c) {
    double t = 0;
    for (const double x : d) t += std::clamp(x + c, -max_abs, max_abs);
    return t;
  };
  double lo = -max_abs - *std::max_element(d.begin(), d.end());
  double hi = max_abs - *std::min_element(d.begin(), d.end());
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (sum_at(mid) < 0 ? lo : hi) = mid;
  }
  for (double& x : d) x = std::clamp(x + 0.5 * (lo + hi), -max_abs, max_abs);
  return d;
}

std::string LayerBitsText(const std::vector<double>& offsets) {
  std::string out;
  double sum = 0;
  char buf[32];
  for (size_t l = 0; l < offsets.size(); ++l) {
    double x = std::round(offsets[l] * 100) / 100;
    if (l + 1 == offsets.size()) x = std::round(-sum * 100) / 100;
    sum += x;
    std::snprintf(buf, sizeof buf, "%s%.2f", l ? "/" : "", x == 0 ? 0.0 : x);
    out += buf;
  }
  return out;
}

}  // namespace hqekv::calib
