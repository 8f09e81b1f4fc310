#include "policy/profile.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file.h"

namespace hqekv::policy {
namespace {

using nlohmann::json;

json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

double NumOr(const json& j, const char* key, double def) {
  auto it = j.find(key);
  return (it != j.end() && it->is_number()) ? it->get<double>() : def;
}

json RatiosJson(const TierRatios& r) {
  return {{"r4", r.r4}, {"r2", r.r2}, {"r1", r.r1}, {"r0", r.r0}};
}

Status CheckProfileRatios(const TierRatios& r, const std::string& where) {
  const double v[4] = {r.r4, r.r2, r.r1, r.r0};
  double s = 0;
  for (double x : v) {
    if (!std::isfinite(x) || x < 0 || x > 1) {
      return MakeError(where + ": ratios must be in [0, 1], got " + RatiosText(r));
    }
    s += x;
  }
  if (std::fabs(s - 1.0) > 1e-3)
    return MakeError(where + ": ratios must sum to 1, got " + RatiosText(r));
  return Status::Ok();
}

// One ratio row, written as {"r4":..,"r2":..,"r1":..,"r0":..} or
// [r4, r2, r1, r0]; `what` names it in errors.
Result<TierRatios> RowFromJson(const json& r, const std::string& source, const std::string& what) {
  if (r.is_object()) {
    for (const char* k : {"r4", "r2", "r1", "r0"}) {
      if (!r.contains(k) || !r[k].is_number()) {
        return MakeError("profile " + source + ": " + what + " lacks number \"" + k + "\"");
      }
    }
    return TierRatios{r["r4"].get<double>(), r["r2"].get<double>(), r["r1"].get<double>(),
                      r["r0"].get<double>()};
  }
  if (r.is_array() && r.size() == 4 && r[0].is_number() && r[1].is_number() && r[2].is_number() &&
      r[3].is_number()) {
    return TierRatios{r[0].get<double>(), r[1].get<double>(), r[2].get<double>(),
                      r[3].get<double>()};
  }
  return MakeError("profile " + source + ": " + what + " must be [r4, r2, r1, r0]");
}

}  // namespace

std::string ProfileToJson(const Profile& p) {
  json j;
  j["format"] = "hqekv-profile";
  j["version"] = 1;
  j["model"] = {{"name", p.model_name}, {"identity", p.model_identity}, {"n_layers", p.n_layers}};
  j["budget"] = {{"bits", p.budget_bits}, {"mode", p.bits_mode}};
  j["ratios"] = RatiosJson(p.ratios);
  if (!p.per_layer.empty()) {
    json rows = json::array();
    for (const auto& r : p.per_layer) rows.push_back({r.r4, r.r2, r.r1, r.r0});
    j["per_layer"] = rows;
  }
  j["achieved_true_bits"] = Num(p.achieved_true_bits);
  j["achieved_nominal_bits"] = Num(p.achieved_nominal_bits);
  j["loss"] = Num(p.loss);
  j["kl"] = Num(p.kl);
  j["alpha"] = p.alpha;
  j["beta"] = p.beta;
  j["trials"] = p.trials;
  j["seed"] = p.seed;
  j["tier_costs"] = {{"b4", p.tier_costs.b4},
                     {"b2", p.tier_costs.b2},
                     {"b1", p.tier_costs.b1},
                     {"b0", p.tier_costs.b0}};
  j["calibration"] = {{"text", p.calib_text},
                      {"hash", p.calib_hash},
                      {"tokens", p.calib_tokens},
                      {"window", p.window},
                      {"prefill", p.prefill}};
  if (!p.kv_options.empty()) j["kv_options"] = p.kv_options;
  json log = json::array();
  for (const auto& t : p.trial_log) {
    log.push_back({{"r4", Num(t.ratios.r4)},
                   {"r2", Num(t.ratios.r2)},
                   {"r1", Num(t.ratios.r1)},
                   {"r0", Num(t.ratios.r0)},
                   {"tilt", t.tilt},
                   {"slope", t.slope},
                   {"loss", Num(t.loss)},
                   {"kl", Num(t.kl)},
                   {"true_bits", Num(t.true_bits)}});
  }
  j["trial_log"] = log;
  return j.dump(1) + "\n";
}

Result<Profile> ProfileFromJson(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return MakeError("profile " + source + ": not valid JSON");
  if (!j.is_object() || !j.contains("ratios") ||
      !(j["ratios"].is_object() || j["ratios"].is_array())) {
    return MakeError("profile " + source + ": not an hqekv profile (no \"ratios\" object)");
  }
  Profile p;
  HQEKV_ASSIGN_OR_RETURN(p.ratios, RowFromJson(j["ratios"], source, "\"ratios\""));
  HQEKV_RETURN_IF_ERROR(CheckProfileRatios(p.ratios, "profile " + source));
  if (j.contains("per_layer")) {
    if (!j["per_layer"].is_array())
      return MakeError("profile " + source + ": \"per_layer\" is not an array");
    for (size_t l = 0; l < j["per_layer"].size(); ++l) {
      const std::string row = "per_layer[" + std::to_string(l) + "]";
      TierRatios x;
      HQEKV_ASSIGN_OR_RETURN(x, RowFromJson(j["per_layer"][l], source, row));
      HQEKV_RETURN_IF_ERROR(CheckProfileRatios(x, "profile " + source + " " + row));
      p.per_layer.push_back(x);
    }
  }
  if (j.contains("model") && j["model"].is_object()) {
    const json& m = j["model"];
    p.model_name = m.value("name", "");
    p.model_identity = m.value("identity", "");
    p.n_layers = m.value("n_layers", 0);
  }
  if (j.contains("budget") && j["budget"].is_object()) {
    p.budget_bits = NumOr(j["budget"], "bits", 0);
    p.bits_mode = j["budget"].value("mode", "true");
  }
  p.achieved_true_bits = NumOr(j, "achieved_true_bits", NAN);
  p.achieved_nominal_bits = NumOr(j, "achieved_nominal_bits", NAN);
  p.loss = NumOr(j, "loss", NAN);
  p.kl = NumOr(j, "kl", NAN);
  p.alpha = NumOr(j, "alpha", 2);
  p.beta = NumOr(j, "beta", 4);
  p.trials = static_cast<int>(NumOr(j, "trials", 0));
  if (j.contains("seed") && j["seed"].is_number_unsigned()) p.seed = j["seed"].get<uint64_t>();
  if (j.contains("tier_costs") && j["tier_costs"].is_object()) {
    const json& c = j["tier_costs"];
    p.tier_costs = {NumOr(c, "b4", 4), NumOr(c, "b2", 2), NumOr(c, "b1", 1), NumOr(c, "b0", 0)};
  }
  if (j.contains("calibration") && j["calibration"].is_object()) {
    const json& c = j["calibration"];
    p.calib_text = c.value("text", "");
    p.calib_hash = c.value("hash", "");
    p.calib_tokens = static_cast<int64_t>(NumOr(c, "tokens", 0));
    p.window = static_cast<int>(NumOr(c, "window", 0));
    p.prefill = static_cast<int>(NumOr(c, "prefill", 0));
  }
  if (j.contains("kv_options")) {
    if (!j["kv_options"].is_string())
      return MakeError("profile " + source + ": \"kv_options\" is not a string");
    p.kv_options = j["kv_options"].get<std::string>();
  }
  if (j.contains("trial_log") && j["trial_log"].is_array()) {
    for (const json& t : j["trial_log"]) {
      if (!t.is_object()) continue;
      TrialRecord rec;
      rec.ratios = {NumOr(t, "r4", NAN), NumOr(t, "r2", NAN), NumOr(t, "r1", NAN),
                    NumOr(t, "r0", NAN)};
      rec.tilt = NumOr(t, "tilt", 0);
      rec.slope = NumOr(t, "slope", 0);
      rec.loss = NumOr(t, "loss", INFINITY);
      rec.kl = NumOr(t, "kl", NAN);
      rec.true_bits = NumOr(t, "true_bits", NAN);
      p.trial_log.push_back(rec);
    }
  }
  return p;
}

Status SaveProfile(const Profile& p, const std::string& path, bool overwrite) {
  std::error_code ec;
  if (!overwrite && std::filesystem::exists(path, ec)) {
    return MakeError("profile " + path + " exists; pass --force to overwrite it");
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  // Atomic: a failed write (full disk) keeps the old profile under --force.
  if (Status st = WriteFileAtomic(path, ProfileToJson(p)); !st.ok())
    return MakeError("profile: " + st.message());
  return Status::Ok();
}

Result<Profile> LoadProfile(const std::string& path) {
  auto text = ReadFileChecked(path, kMaxJsonFileBytes);  // a FIFO or /dev/zero is refused
  if (!text.ok()) return MakeError("cannot read profile: " + text.message());
  return ProfileFromJson(*text, path);
}

Status CheckProfileForModel(const Profile& p, const std::string& path,
                            const std::string& model_identity, int n_layers, bool force) {
  if (n_layers > 0 && !p.per_layer.empty() && static_cast<int>(p.per_layer.size()) != n_layers) {
    return MakeError("profile " + path + " has " + std::to_string(p.per_layer.size()) +
                     " per_layer rows but the model has " + std::to_string(n_layers) + " layers");
  }
  if (!force && p.model_identity != model_identity) {
    return MakeError("profile " + path + " was calibrated for model '" + p.model_name +
                     "' (identity " + (p.model_identity.empty() ? "none" : p.model_identity) +
                     "), not for this model (identity " + model_identity +
                     "); calibrate one with `hqekv calibrate`, or use it anyway with "
                     "hqekv:profile=" +
                     path + ",force=1");
  }
  return Status::Ok();
}

Result<Profile> LoadSpecProfile(const PolicySpec& spec, const CacheContext& ctx, int n_layers) {
  const std::string path = spec.Text("profile");
  HQEKV_ASSIGN_OR_RETURN(Profile p, LoadProfile(path));
  const bool force = ctx.force || spec.Int("force") != 0;
  // Without a model only the shape is checked (tests, benchmarks).
  if (!ctx.model) {
    HQEKV_RETURN_IF_ERROR(CheckProfileForModel(p, path, "", n_layers, /*force=*/true));
  } else {
    HQEKV_RETURN_IF_ERROR(CheckProfileForModel(p, path, ctx.model->identity, n_layers, force));
  }
  return p;
}

std::string ShippedProfilePath(const std::string& dir, const std::string& model_name, double bits) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", bits);
  return dir + "/" + model_name + "/hqekv-" + b + "-true.json";
}

Result<PolicySpec> WithProfileOptions(const PolicySpec& spec, const Profile& p,
                                      const std::string& path) {
  if (p.kv_options.empty()) return spec;
  auto opts = ParseSpec(spec.name + ":" + p.kv_options);
  if (!opts.ok()) return MakeError("profile " + path + ": kv_options: " + opts.message());
  PolicySpec out = spec;
  for (const auto& [key, value] : opts->given) {
    if (spec.Given(key)) continue;
    out.values[key] = value;
    out.given[key] = value;
  }
  return out;
}

std::vector<TierRatios> LayerRatios(const Profile& p, int n_layers) {
  std::vector<TierRatios> out =
      p.per_layer.empty() ? std::vector<TierRatios>(n_layers, p.ratios) : p.per_layer;
  for (TierRatios& t : out) t = Rescaled(t);
  return out;
}

}  // namespace hqekv::policy
