#include "eval/run/quality_cells.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "eval/run/intervals.h"
#include "eval/run/rng.h"
#include "eval/run/runner.h"
#include "eval/run/scoring.h"

namespace hqekv::eval {
namespace {

// One task's instances and their fp16 reference, built on first need.
class PreparedTask {
 public:
  PreparedTask(EvalModel& model, const Suite& suite, const QualityTask& qt,
               const CacheFactory& make_cache, CellRunner& cells)
      : model_(model), suite_(suite), qt_(qt), make_cache_(make_cache), cells_(cells) {}

  // Prepares the instances and runs the fp16 reference once. Task
  // generation or the reference can fail (e.g. a context too short for the
  // prompt): the failure is kept and returned to every later call.
  const Status& Ensure() {
    if (!tried_) {
      status_ = BuildInstances();
      if (status_.ok()) status_ = RunReference();
      tried_ = true;
    }
    return status_;
  }

  std::vector<PreparedInstance>& instances() { return insts_; }
  int max_required_context() const { return max_req_; }

 private:
  Status BuildInstances() {
    HQEKV_ASSIGN_OR_RETURN(auto c, cells_.GetCorpus(qt_.corpus));
    const TokenCounter count = [this](const std::string& s) {
      return static_cast<int>(model_.Encode(s, false).size());
    };
    for (int i = 0; i < qt_.seeds; ++i) {
      HQEKV_ASSIGN_OR_RETURN(auto t, MakeTask(qt_.spec, *c, InstanceSeed(suite_, qt_, i), count));
      insts_.push_back(Prepare(model_, t));
      max_req_ = std::max(max_req_, RequiredContext(insts_.back()));
    }
    return Status::Ok();
  }

  Status RunReference() {
    HQEKV_ASSIGN_OR_RETURN(auto cache, make_cache_("fp16", model_.Geometry(max_req_)));
    for (auto& in : insts_) {
      HQEKV_RETURN_IF_ERROR(RunInstance(model_, *cache, &in, /*record_ref=*/true));
    }
    return Status::Ok();
  }

  EvalModel& model_;
  const Suite& suite_;
  const QualityTask& qt_;
  const CacheFactory& make_cache_;
  CellRunner& cells_;
  std::vector<PreparedInstance> insts_;
  int max_req_ = 0;
  bool tried_ = false;
  Status status_;
};

// Runs `p` over the task's instances into `cell` (memory, accuracy, KL,
// agreement; perplexity for teacher-forced tasks).
void ScorePolicy(EvalModel& model, const PolicyPoint& p, const CacheFactory& make_cache,
                 PreparedTask& task, CellResult* cell) {
  std::vector<PreparedInstance>& insts = task.instances();
  auto cache = make_cache(p.spec, model.Geometry(task.max_required_context()));
  if (!cache.ok()) {
    cell->error = cache.message();
    return;
  }
  cell->describe = (*cache)->Describe();
  MemAcc mem;
  TeacherForcedStats tf;
  int correct = 0, agree = 0;
  double first_kl = 0, first_kl2 = 0;
  for (auto& in : insts) {
    auto r = RunInstance(model, **cache, &in, /*record_ref=*/false);
    if (!r.ok()) {
      cell->error = r.message();
      break;
    }
    mem.Add(r->stats);
    tf += r->tf;
    correct += r->correct;
    agree += r->first_agree;
    const double k = std::max(0.0, r->first_kl);
    first_kl += k;
    first_kl2 += k * k;
    if (in.task.scoring == Scoring::kExactMatch && cell->examples.size() < 3)
      cell->examples.push_back(r->generated);
  }
  const int n = static_cast<int>(insts.size());
  cell->n = n;
  mem.Into(cell);
  if (!insts.empty() && insts[0].task.scoring == Scoring::kTeacherForced) {
    cell->accuracy = tf.accuracy();
    cell->kl = tf.mean_kl();
    cell->agreement = tf.agreement();
    cell->ppl = tf.ppl();
    cell->steps = tf.steps;
    cell->trials = static_cast<double>(tf.steps);
    const Interval a = Wilson(static_cast<double>(tf.top1_true), cell->trials);
    const Interval g = Wilson(static_cast<double>(tf.agree), static_cast<double>(tf.ref_steps));
    cell->acc_lo = a.lo;
    cell->acc_hi = a.hi;
    cell->agree_lo = g.lo;
    cell->agree_hi = g.hi;
    cell->kl_se = tf.kl_se();
  } else if (n > 0) {
    cell->accuracy = double(correct) / n;
    cell->kl = first_kl / n;
    cell->agreement = double(agree) / n;
    cell->trials = n;
    const Interval a = Wilson(correct, n), g = Wilson(agree, n);
    cell->acc_lo = a.lo;
    cell->acc_hi = a.hi;
    cell->agree_lo = g.lo;
    cell->agree_hi = g.hi;
    cell->kl_se = StandardError(n, first_kl, first_kl2);
  }
}

}  // namespace

Status RunQualityCells(EvalModel& model, const Suite& suite, const CacheFactory& make_cache,
                       CellRunner& cells) {
  const int max_ctx = cells.run().max_ctx;
  for (const QualityTask& qt : suite.tasks) {
    if (qt.spec.context_tokens > max_ctx)
      return MakeError("task " + qt.spec.Key() + " exceeds the context cap " +
                       std::to_string(max_ctx));
    PreparedTask task(model, suite, qt, make_cache, cells);
    std::ostringstream config;
    config << qt.spec.Key() << "|" << qt.corpus << "|seeds=" << qt.seeds
           << "|base=" << suite.base_seed << (suite.paired_seeds ? "|paired" : "|independent");
    for (const PolicyPoint& p : suite.policies) {
      HQEKV_RETURN_IF_ERROR(cells.Run(
          "quality", config.str(), p, p.spec + " " + qt.spec.Key(), [&](CellResult* cell) {
            const Status& task_status = task.Ensure();
            cell->task = TaskName(qt.spec.kind);
            cell->task_key = qt.spec.Key();
            cell->corpus = qt.corpus;
            cell->context = qt.spec.context_tokens;
            cell->depth = qt.spec.kind == TaskKind::kLm ? -1 : qt.spec.depth;
            cell->seeds = qt.seeds;
            cell->chance = task.instances().empty() ? 0 : task.instances()[0].task.chance;
            if (!task_status.ok()) {
              // Not cached: the task is retried by the next run.
              cell->error = "task: " + task_status.message();
              return false;
            }
            ScorePolicy(model, p, make_cache, task, cell);
            return true;
          }));
    }
  }
  return Status::Ok();
}

}  // namespace hqekv::eval
