#include "eval/run/harness.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <map>
#include <utility>

#include "core/parallel.h"
#include "eval/run/cell_runner.h"
#include "eval/run/quality_cells.h"
#include "eval/run/speed_cells.h"

namespace hqekv::eval {
namespace {

std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

// Fails when every spec of a policy family is refused (a typo in a name or
// key); a single refused budget (e.g. hqekv:nominal_bits=4 without built-in ratios)
// only marks its cells as failed.
Status CheckPolicyFamilies(const Suite& suite, const KvGeometry& g,
                           const CacheFactory& make_cache) {
  std::map<std::string, std::pair<int, std::string>> refused;  // family -> (count, first error)
  std::map<std::string, int> total;
  for (const PolicyPoint& p : suite.policies) {
    ++total[p.family];
    auto c = make_cache(p.spec, g);
    if (!c.ok() && refused[p.family].first++ == 0)
      refused[p.family].second = "--kv " + p.spec + ": " + c.message();
  }
  for (const auto& [family, r] : refused)
    if (r.first == total[family]) return MakeError(r.second);
  return Status::Ok();
}

}  // namespace

std::string MachineDescription() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  std::string model = "unknown CPU";
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c != std::string::npos) model = line.substr(c + 2);
      break;
    }
  }
  return std::to_string(n) + " cores, " + model;
}

Result<EvalRun> RunEval(EvalModel& model, const Suite& suite, const EvalOptions& opt,
                        const CacheFactory& make_cache) {
  const auto t_start = std::chrono::steady_clock::now();
  EvalRun run;
  run.suite = suite.name;
  run.model = model.Name();
  run.model_identity = model.Identity();
  run.max_ctx =
      opt.max_ctx > 0 ? std::min(opt.max_ctx, model.TrainedContext()) : model.TrainedContext();
  run.machine = MachineDescription();
  run.threads = NumThreads();
  run.started_utc = UtcNow();
  HQEKV_RETURN_IF_ERROR(CheckPolicyFamilies(suite, model.Geometry(run.max_ctx), make_cache));

  const int n_cells =
      static_cast<int>((suite.tasks.size() + suite.speed.contexts.size()) * suite.policies.size());
  CellRunner cells(opt, &run, n_cells);
  HQEKV_RETURN_IF_ERROR(RunQualityCells(model, suite, make_cache, cells));
  HQEKV_RETURN_IF_ERROR(RunSpeedCells(model, suite, make_cache, cells));
  cells.Finish();
  run.seconds = Since(t_start);
  return run;
}

}  // namespace hqekv::eval
