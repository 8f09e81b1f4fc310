// Validation of a cached cell before it is reused (docs/evaluation.md, "Cells,
// budgets and the cache of finished cells"): a cell
// file from an older build, edited by hand or damaged must be recomputed, not
// reported (a cell with `accuracy: 7.5` once printed "750.0%" and wrong true
// bits). CellStore::Load calls this after parsing.
#pragma once

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "eval/run/cell.h"

namespace hqekv::eval {

// Checks, naming the first problem found ("cell 0123...: accuracy 7.5 outside [0, 1]"):
//  - schema: every key the writer (ToJson) emits is present;
//  - kind is "quality" or "speed";
//  - every number is finite and in its range: shares (accuracy, chance,
//    agreement, kept_fraction) in [0, 1]; kl, kv_bytes, speeds, seconds,
//    counts >= 0; true_bits and bits_per_original in [0, 64]; ppl 0 (not
//    scored) or >= 1.
// `j` is the parsed file, `c` what CellFromJson made of it.
Status ValidateCell(const nlohmann::json& j, const CellResult& c);

}  // namespace hqekv::eval
