// Speed and memory cells of an evaluation: context x policy. Each cell
// prefills a window of held-out text, then decodes greedily, and records
// KV bytes and tokens/s.
#pragma once

#include "core/status.h"
#include "eval/run/cell_runner.h"
#include "eval/run/eval_model.h"
#include "eval/run/harness.h"
#include "eval/run/suite.h"

namespace hqekv::eval {

// Runs every (context, policy) cell of suite.speed. Contexts are clipped to
// the run's context cap; one the text cannot fill is skipped. An error is a
// corpus that cannot be loaded or a cell that could not be stored.
Status RunSpeedCells(EvalModel& model, const Suite& suite, const CacheFactory& make_cache,
                     CellRunner& cells);

}  // namespace hqekv::eval
