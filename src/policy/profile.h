// Calibration profiles: written by `hqekv calibrate` (calib/search.h fills
// them), read back by `--kv hqekv:profile=FILE`. The file format lives here,
// once; the check against the model happens when the cache is created
// (policy/factory.h, with the model in CacheContext). JSON (nlohmann), e.g.
//
// {
//   "format": "hqekv-profile", "version": 1,
//   "model": {"name": "stories260K", "identity": "0123456789abcdef", "n_layers": 5},
//   "budget": {"bits": 2.0, "mode": "true"},          // mode: "true" | "nominal"
//   "ratios": {"r4": 0.1, "r2": 0.6, "r1": 0.2, "r0": 0.1},
//   "per_layer": [[r4, r2, r1, r0], ...],             // optional, one row per layer
//   "achieved_true_bits": 2.003, "achieved_nominal_bits": 1.8,
//   "loss": 0.61, "kl": 0.21, "alpha": 2, "beta": 4,
//   "trials": 200, "seed": 1,
//   "tier_costs": {"b4": .., "b2": .., "b1": .., "b0": ..},   // bits/element, see policy/budget.h
//   "calibration": {"text": "data/text/wiki.valid.raw", "hash": "fnv1a64:...",
//                   "tokens": 16384, "window": 512, "prefill": 256},
//   "kv_options": "tiers=u4/u3/u2,vgroup=64",                  // optional
//   "trial_log":
//   [{"r4":..,"r2":..,"r1":..,"r0":..,"tilt":..,"slope":..,"loss":..,"kl":..,"true_bits":..}, ...]
// }
//
// "ratios" and "per_layer" are what the cache needs; the rest documents
// where the profile came from. A ratio row may also be written as an object
// {"r4":..,...} in per_layer, or "ratios" as an array [r4, r2, r1, r0].
// Infeasible trials are logged with loss null.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "policy/cache_context.h"
#include "policy/hqekv_alloc.h"
#include "policy/spec.h"

namespace hqekv::policy {

// b_t: bits per original element of the whole cache with every compressible
// chunk in tier t (measured by the ratio search, policy/budget.h).
struct TierCosts {
  double b4 = 4, b2 = 2, b1 = 1, b0 = 0;
};

struct TrialRecord {
  TierRatios ratios;     // global ratios (per-layer mode: the base mix)
  double tilt = 0;       // per-layer mode: budget tilt with depth (bits), else 0
  double slope = 0;      // per-layer mode: slope of the 1-bit/evict share with depth
  double loss = 0;       // +inf when infeasible (not run)
  double kl = 0;         // mean KL, nats per position (NaN when not run)
  double true_bits = 0;  // measured (NaN when not run)
};

struct Profile {
  std::string model_name;
  std::string model_identity;  // ModelSource::identity
  int n_layers = 0;
  double budget_bits = 0;
  std::string bits_mode = "true";  // "true" or "nominal"
  TierRatios ratios;
  std::vector<TierRatios> per_layer;  // empty: global ratios
  double achieved_true_bits = 0;
  double achieved_nominal_bits = 0;
  double loss = 0, kl = 0, alpha = 2, beta = 4;
  int trials = 0;
  uint64_t seed = 0;
  TierCosts tier_costs;
  std::string calib_text;
  std::string calib_hash;  // "fnv1a64:<16 hex>"
  int64_t calib_tokens = 0;
  int window = 0, prefill = 0;
  std::vector<TrialRecord> trial_log;
  // The hqekv keys every trial ran with (calibrate --kv-options, e.g.
  // "tiers=u4/u3/u2,vgroup=64,hadamard=1"): the ratios name these tiers, so a
  // cache using the profile takes them too, unless its spec gives the key.
  std::string kv_options;
};

std::string ProfileToJson(const Profile& p);  // pretty-printed, trailing newline
// Error naming `source` when not JSON, not a profile, or ratios invalid
// (outside [0, 1], not summing to 1 within 1e-3, per_layer rows of the wrong
// size).
Result<Profile> ProfileFromJson(const std::string& text, const std::string& source);

// Writes the file; refuses an existing path unless overwrite.
Status SaveProfile(const Profile& p, const std::string& path, bool overwrite);
// Error "cannot read profile PATH" when missing or unreadable.
Result<Profile> LoadProfile(const std::string& path);

// The check a profile must pass before a cache uses it: error when its
// per_layer row count (if any) differs from n_layers (n_layers > 0), or when
// its model identity differs from `model_identity` and force is not set (the
// message names the file, both models and the override ",force=1").
Status CheckProfileForModel(const Profile& p, const std::string& path,
                            const std::string& model_identity, int n_layers, bool force);

// The profile named by a spec's profile=FILE, loaded and checked with
// CheckProfileForModel: its per_layer rows against n_layers (> 0), and its
// model against ctx.model when set (unless ctx.force or the spec's force=1).
// The one place a profile meets a model.
Result<Profile> LoadSpecProfile(const PolicySpec& spec, const CacheContext& ctx, int n_layers);

// The profile shipped for a model and a true-bits budget:
// DIR/<model name>/hqekv-<B>-true.json, B printed with %g (3.4 ->
// "hqekv-3.4-true.json"). Only a path: the file may not exist.
std::string ShippedProfilePath(const std::string& dir, const std::string& model_name, double bits);

// The spec with the profile's kv_options applied: every key they give that
// the spec does not give itself (the user's keys win). Error naming the
// profile when kv_options is not a valid list of hqekv keys.
Result<PolicySpec> WithProfileOptions(const PolicySpec& spec, const Profile& p,
                                      const std::string& path);

// The tier ratios a cache uses, one row per layer: the per_layer rows, or the
// global row repeated; each rescaled to sum exactly 1.
std::vector<TierRatios> LayerRatios(const Profile& p, int n_layers);

}  // namespace hqekv::policy
