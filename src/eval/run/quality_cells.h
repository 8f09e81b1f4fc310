// Quality cells of an evaluation: task x policy. Each task's instances and
// their fp16 reference are built once, on the first cell that is not cached.
#pragma once

#include "core/status.h"
#include "eval/run/cell_runner.h"
#include "eval/run/eval_model.h"
#include "eval/run/harness.h"
#include "eval/run/suite.h"

namespace hqekv::eval {

// Runs every (task, policy) cell of `suite` in task order. An error is a task
// beyond the run's context cap or a cell that could not be stored; a task or
// policy that fails is recorded in its cells.
Status RunQualityCells(EvalModel& model, const Suite& suite, const CacheFactory& make_cache,
                       CellRunner& cells);

}  // namespace hqekv::eval
