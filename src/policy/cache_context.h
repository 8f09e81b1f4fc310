// What a cache may need to know beyond its spec and geometry: which model it
// serves (to check a calibration profile against it), whether to accept a
// profile made for another model, and, for calibration trials, tier ratios
// given in memory. Every field is optional: tests and benchmarks pass {}.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "policy/hqekv_alloc.h"

namespace hqekv::policy {

// The model a cache is created for (from io/model_source.h, which the
// policy layer does not include).
struct ModelIdentity {
  std::string name;      // ModelConfig::name, for messages
  std::string identity;  // ModelSource::identity (content hash, 16 hex)
  int n_layers = 0;      // 0: unknown (creation checks the geometry's count)
};

struct CacheContext {
  // Unset: no model to check a profile against (only its shape is checked).
  std::optional<ModelIdentity> model;
  // Use a profile calibrated for another model (the spec key force=1 does
  // the same).
  bool force = false;
  // hqekv: one TierRatios row per layer, in memory, replacing bits= /
  // ratios= / profile= (the ratio search scores its per-layer trials with
  // them; each row is checked and rescaled to sum 1 like a profile row).
  std::vector<TierRatios> layer_ratios;
  // hqekv:bits=B with a model: the profile shipped for that model and B
  // (policy/profile.h, ShippedProfilePath) and its per-layer budgets
  // (profiles/<model>/layer-bits.txt) are used when the file exists (spec
  // key shipped=0 turns this off). ForModel sets the bundled folder
  // (core/file.h FindBundled: $HQEKV_DATA_DIR, the installed share/hqekv,
  // the build tree's repository; the working directory last), so a result
  // does not depend on where the command was started.
  std::string profiles_dir = "profiles";
};

}  // namespace hqekv::policy
