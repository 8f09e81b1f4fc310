// Runs a suite's matrix on one model: quality cells (task x policy,
// quality_cells.h) and speed/memory cells (context x policy, speed_cells.h),
// reusing cells cached in DIR/cells/<hash>.json (cell_store.h) by an earlier
// run with the same configuration.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "core/status.h"
#include "eval/run/cell.h"
#include "eval/run/eval_model.h"
#include "eval/run/suite.h"

namespace hqekv::eval {

using CacheFactory =
    std::function<Result<std::unique_ptr<KvCache>>(const std::string& spec, const KvGeometry& g)>;

struct EvalOptions {
  std::string out_dir;          // where cells/ lives; "" = no cache
  std::string text_root = ".";  // repository root holding data/text/
  bool fresh = false;           // ignore cached cells
  bool progress = true;         // progress on stderr (a bar on a terminal, lines otherwise)
  // Part of every cell's key (CodeVersion() when empty): cells computed by
  // another version of the code are recomputed, not reused. Tests set it.
  std::string code_version;
  int max_ctx = 0;  // context cap (0: model's trained context)
};

struct EvalRun {
  std::string suite;
  std::string model;
  std::string model_identity;
  int max_ctx = 0;
  std::vector<CellResult> cells;  // quality cells first (task order), then speed cells
  int reused = 0, computed = 0;
  double seconds = 0;
  // Provenance for the reports.
  std::string command;
  std::string machine;  // "<nproc> cores, <lscpu model name>"
  int threads = 0;
  std::string started_utc;
};

Result<EvalRun> RunEval(EvalModel& model, const Suite& suite, const EvalOptions& opt,
                        const CacheFactory& make_cache);

// "N cores, <model name>" from nproc / /proc/cpuinfo.
std::string MachineDescription();

}  // namespace hqekv::eval
