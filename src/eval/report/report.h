// The three report files of an evaluation run:
//   results.json  every cell (model, task, policy spec, budget, true bits,
//                 bytes, metrics, timing, config hash) plus provenance;
//   report.md     tables;
//   report.html   self-contained: the tables and inline SVG plots (quality
//                 vs true bits, accuracy vs context and depth, memory and
//                 speed vs context); no script, no external resource.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "eval/run/harness.h"

namespace hqekv::eval {

// Whether a task can rank policies: the fp16 cache must do clearly better
// than chance (accuracy >= chance + kUsableMargin).
constexpr double kUsableMargin = 0.2;

struct TaskVerdict {
  std::string task;
  double fp16_accuracy = 0;
  double chance = 0;
  bool usable = false;
  std::string note;  // "ok" or "fp16 fails: not used to rank"
};

struct PolicyRow {
  std::string policy, family;
  double budget = -1;
  double true_bits = 0, bits_per_original = 0, kept_fraction = 0;  // mean over lm cells
  double kl = 0, agreement = 0, ppl = 0;                           // mean over lm cells
  std::map<std::string, double> accuracy;                          // task -> mean accuracy
  // task -> (successes, trials) pooled over the task's cells (accuracy x
  // CellResult::trials), for Wilson intervals of pooled accuracies.
  std::map<std::string, std::pair<double, double>> hits;
  double kl_se = 0;  // standard error of `kl` (the lm cells' se combined)
  double decode_tok_s = 0, prefill_tok_s = 0, kv_bytes = 0;  // speed cell at speed_ctx
  int speed_ctx = 0;
  int errors = 0;
};

struct Summary {
  std::vector<std::string> tasks;  // retrieval / copy tasks present, in a fixed order
  std::vector<TaskVerdict> verdicts;
  std::vector<PolicyRow> rows;  // suite order
};

Summary Summarize(const EvalRun& run);

nlohmann::json ResultsJson(const EvalRun& run);
Result<EvalRun> RunFromJson(const nlohmann::json& j);  // for regenerating reports
std::string ReportMarkdown(const EvalRun& run);
std::string ReportHtml(const EvalRun& run);

// Writes DIR/results.json, DIR/report.md and DIR/report.html.
Status WriteReports(const EvalRun& run, const std::string& dir);

// Small formatting helpers shared by the writers.
std::string Fmt(double v, int digits = 3);  // "%.{digits}g"-like, "-" for NaN
std::string FmtFixed(double v, int decimals);

}  // namespace hqekv::eval
