// The skeleton every cell of RunEval shares: hash the cell's canonical
// configuration, advance the progress bar, reuse the cell cached by an
// earlier run, or else compute it, time it and store it. The quality and
// speed runners (quality_cells.h, speed_cells.h) supply the compute step.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "cache/kv_cache.h"
#include "core/status.h"
#include "eval/run/cell.h"
#include "eval/run/cell_store.h"
#include "eval/run/corpus.h"
#include "eval/run/harness.h"
#include "eval/run/suite.h"

namespace hqekv::eval {

// Seconds since t0.
double Since(std::chrono::steady_clock::time_point t0);

// Memory statistics of finished runs, averaged over instances.
struct MemAcc {
  double true_bits = 0, bpo = 0, bytes = 0, kept = 0;
  int n = 0;
  void Add(const KvStats& s);
  void Into(CellResult* c) const;  // no-op when nothing was added
};

class CellRunner {
 public:
  // n_cells: the total for the progress bar.
  CellRunner(const EvalOptions& opt, EvalRun* run, int n_cells);

  // Fills `cell` (kind, model, policy fields, threads and hash already set)
  // and says whether it may be cached: false for a cell that records a
  // transient failure, so the next run retries it.
  using Compute = std::function<bool(CellResult* cell)>;

  // One cell: kind "quality" or "speed"; config the kind's canonical
  // configuration (the cell's hash covers the harness version, the model
  // identity, kind, config and policy spec); label for the progress bar.
  // Appends the cell to the run; an error is a failure to store the cell.
  Status Run(const std::string& kind, const std::string& config, const PolicyPoint& policy,
             const std::string& label, const Compute& compute);

  // The bundled corpus `name`, loaded once per run.
  Result<const Corpus*> GetCorpus(const std::string& name);

  const EvalRun& run() const { return *run_; }
  void Finish();  // ends the progress line

 private:
  void Step(const std::string& label);

  EvalRun* run_;
  CellStore store_;
  bool fresh_;
  std::string text_root_;
  std::map<std::string, Corpus> corpora_;
  // Progress on stderr: a bar redrawn with '\r' on a terminal, one plain
  // line per cell otherwise (log files).
  bool progress_;
  bool tty_;
  int total_;
  int done_ = 0;
  std::string code_version_;
};

}  // namespace hqekv::eval
