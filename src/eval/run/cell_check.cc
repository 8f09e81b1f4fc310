#include "eval/run/cell_check.h"

#include <cmath>
#include <sstream>
#include <string>

namespace hqekv::eval {
namespace {

std::string CheckNum(double x) {
  std::ostringstream o;
  o.precision(10);
  o << x;
  return o.str();
}

}  // namespace

Status ValidateCell(const nlohmann::json& j, const CellResult& c) {
  const std::string where = "cell " + (c.hash.empty() ? std::string("(no hash)") : c.hash) + ": ";
  if (!j.is_object()) return MakeError(where + "not a JSON object");
  // Schema: the writer's own keys, so a field added to CellResult is required
  // at once and cells written before it are recomputed.
  static const nlohmann::json kSchema = ToJson(CellResult{});
  for (const auto& [key, value] : kSchema.items()) {
    if (!j.contains(key)) return MakeError(where + "missing field '" + key + "'");
  }
  if (c.kind != "quality" && c.kind != "speed")
    return MakeError(where + "kind '" + c.kind + "' is neither quality nor speed");

  auto in = [&](const char* name, double x, double lo, double hi) -> Status {
    if (!std::isfinite(x)) return MakeError(where + name + " is not finite");
    if (x < lo || x > hi) {
      return MakeError(where + name + " " + CheckNum(x) + " outside [" + CheckNum(lo) + ", " +
                       CheckNum(hi) + "]");
    }
    return Status::Ok();
  };
  constexpr double kBig = 1e300;
  HQEKV_RETURN_IF_ERROR(in("accuracy", c.accuracy, 0, 1));
  HQEKV_RETURN_IF_ERROR(in("chance", c.chance, 0, 1));
  HQEKV_RETURN_IF_ERROR(in("agreement", c.agreement, 0, 1));
  HQEKV_RETURN_IF_ERROR(in("kept_fraction", c.kept_fraction, 0, 1));
  HQEKV_RETURN_IF_ERROR(in("kl", c.kl, 0, kBig));
  HQEKV_RETURN_IF_ERROR(in("true_bits", c.true_bits, 0, 64));
  HQEKV_RETURN_IF_ERROR(in("bits_per_original", c.bits_per_original, 0, 64));
  HQEKV_RETURN_IF_ERROR(in("kv_bytes", c.kv_bytes, 0, kBig));
  HQEKV_RETURN_IF_ERROR(in("prefill_tok_s", c.prefill_tok_s, 0, kBig));
  HQEKV_RETURN_IF_ERROR(in("decode_tok_s", c.decode_tok_s, 0, kBig));
  HQEKV_RETURN_IF_ERROR(in("seconds", c.seconds, 0, kBig));
  HQEKV_RETURN_IF_ERROR(in("depth", c.depth, -1, 1));
  HQEKV_RETURN_IF_ERROR(in("budget", c.budget, -1, 64));
  HQEKV_RETURN_IF_ERROR(in("ppl", c.ppl, 0, kBig));
  if (c.ppl != 0 && c.ppl < 1) return MakeError(where + "ppl " + CheckNum(c.ppl) + " below 1");
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"n", c.n},
                                {"steps", c.steps},
                                {"context", c.context},
                                {"seeds", c.seeds},
                                {"threads", c.threads},
                                {"peak_rss_kb", c.peak_rss_kb}}) {
    if (v < 0) return MakeError(where + name + " " + std::to_string(v) + " is negative");
  }
  return Status::Ok();
}

}  // namespace hqekv::eval
