#include "eval/run/cell.h"

#include "eval/run/json_field.h"

namespace hqekv::eval {

// (clang-format lays this X-macro out differently on every pass.)
// clang-format off
#define HQEKV_CELL_FIELDS(X) \
  X(hash) X(kind) X(model) X(task) X(task_key) X(corpus) \
  X(context) X(depth) X(seeds) X(policy) X(family) X(budget) \
  X(describe) X(true_bits) X(bits_per_original) X(kv_bytes) X(kept_fraction) X(n) \
  X(accuracy) X(chance) X(kl) X(agreement) X(ppl) X(steps) \
  X(trials) X(acc_lo) X(acc_hi) X(agree_lo) X(agree_hi) X(kl_se) \
  X(examples) X(prefill_tok_s) X(decode_tok_s) X(peak_rss_kb) X(seconds) X(threads) \
  X(error) X(code_version)
// clang-format on

nlohmann::json ToJson(const CellResult& c) {
  nlohmann::json j;
#define X(f) j[#f] = c.f;
  HQEKV_CELL_FIELDS(X)
#undef X
  return j;
}

Result<CellResult> CellFromJson(const nlohmann::json& j) {
  CellResult c;
  if (!j.is_object()) return MakeError("cell JSON is not an object");
#define X(f)                                                                               \
  if (j.contains(#f) && !JsonTo(j.at(#f), &c.f))                                           \
    return MakeError("cell JSON: field '" #f "' has the wrong type or is out of range (" + \
                     j.at(#f).dump().substr(0, 40) + ")");
  HQEKV_CELL_FIELDS(X)
#undef X
  return c;
}

}  // namespace hqekv::eval
