// `hqekv study pareto`: quality per true byte of every KV policy on a grid of
// specs and texts, against the fp16 reference.
//
// For each (text, spec) cell the text's first `max_tokens` tokens (cut to
// `ctx`) run the prefill-then-teacher-force protocol of lm/lm_compare.h once
// with an fp16 cache (the reference, once per text) and once with the spec's
// cache: mean KL(fp16 || spec) in nats per scored token, top-1 agreement,
// both with standard errors over the scored tokens, and the true bits per
// original element held at the end (every byte the cache accounts x 8 / the
// K and V elements of every token appended; the figure `ppl --kv-report`
// prints) and after the prefill.
//
// Results live in DIR/results.json (ParetoResults), one entry per cell with
// its key (CellKey: format version, code version, model identity, text
// hash, spec, protocol): a re-run reuses every cell whose key matches and
// computes the rest; the file holds the cells of the last run. The report
// (eval/study/pareto_report.h) is generated from the file alone.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace hqekv::eval {

// Bumped when a cell's meaning or the file layout changes.
inline constexpr int kParetoFormatVersion = 1;

struct ParetoProtocol {
  int prefill = 1536;     // P: tokens prefilled as one batch
  int max_tokens = 2048;  // tokens of the text used (cut to ctx); n - P are scored
  int ctx = 2048;         // cache context (tokens)
};

// One measured (text, spec) cell.
struct ParetoCell {
  std::string text;    // the text's label (its path as given)
  std::string spec;    // canonical spec (policy::PolicySpec::Canonical)
  std::string family;  // the policy name
  std::string key;     // CellKey of the run that computed it
  // Empty when the cell was measured; else why its cache could not be made
  // (an infeasible budget for this geometry): reported, not an abort.
  std::string error;
  int scored = 0;                      // next-token predictions scored
  double bits = 0;                     // true bits per original element at the end
  double bits_after_prefill = 0;       // and right after the prefill
  double kl = 0, kl_stderr = 0;        // nats / token
  double agree = 0, agree_stderr = 0;  // top-1 agreement with fp16, fraction
  double seconds = 0;                  // wall time of the test pass
};

struct ParetoText {
  std::string label;  // as given on the command line
  std::string hash;   // FNV-1a 64 of the bytes, 16 hex digits
  int tokens = 0;     // tokens used (after the cut)
};

struct ParetoResults {
  int format = kParetoFormatVersion;
  std::string command;  // the command line that reproduces the run (top of the report)
  std::string model;    // model label (path as given) and identity
  std::string model_identity;
  std::string code_version;
  ParetoProtocol protocol;
  std::vector<ParetoText> texts;
  std::vector<std::string> grid;  // canonical specs, in run order
  std::vector<ParetoCell> cells;  // text-major, grid order
};

// The key of a cell: every input its numbers depend on.
std::string CellKey(const std::string& code_version, const std::string& model_identity,
                    const std::string& text_hash, const std::string& spec, const ParetoProtocol& p);

nlohmann::json ParetoResultsToJson(const ParetoResults& r);
// Errors name the missing or mistyped field and `what` (the file).
Result<ParetoResults> ParetoResultsFromJson(const nlohmann::json& j, const std::string& what);
Result<ParetoResults> LoadParetoResults(const std::string& path);
Status SaveParetoResults(const std::string& path, const ParetoResults& r);  // atomic

// The default grid, built from the policy table (policy/spec.h) so that a new
// policy appears without editing this file:
//   - a row with a budget key `bits` (true bits): NAME:bits=B for B in
//     kParetoBudgets; a real budget key `nominal_bits` (the paper's nominal
//     average): NAME:nominal_bits=N for N in kParetoNominalBits;
//   - a row without budget keys: one spec per value of its first numeric or
//     format choice parameter that is not an on/off switch (choices that
//     are not exactly {0, 1}), every parameter with the same choice list
//     set to the same value (e.g. K and V types; a lone non-numeric key at
//     its default gives NAME alone: fp8, fp8:format=e5m2); otherwise NAME
//     alone;
//   - plus kParetoExtraSpecs whose policy exists (the KIVI points of docs/evaluation.md);
//   - minus the rows of kParetoSkipPolicies (fp32: the oracle holds twice the
//     reference's bytes; it only stretches the bits axis).
// Specs that do not parse are skipped (a row whose defaults need a value).
inline constexpr double kParetoBudgets[] = {2, 3, 3.4, 4.2, 5.4, 8};
inline constexpr double kParetoNominalBits[] = {2, 2.8, 3.2, 3.25};
inline constexpr const char* kParetoExtraSpecs[] = {"kivi:nominal_bits=2,residual=32",
                                                    "kivi:nominal_bits=4,residual=32"};
inline constexpr const char* kParetoSkipPolicies[] = {"fp32"};
std::vector<std::string> DefaultParetoGrid();

// Parses and normalizes a grid (canonical specs, blank entries and duplicates
// dropped, the first kept). Errors: an empty grid, a spec that does not
// parse (named).
Result<std::vector<std::string>> NormalizeGrid(const std::vector<std::string>& specs);

struct ParetoOptions {
  std::string model;               // path
  std::vector<std::string> texts;  // paths
  std::vector<std::string> grid;   // specs (NormalizeGrid applied by the run)
  ParetoProtocol protocol;
  std::string code_version;  // part of every cell key
  std::string command;       // stored in the results
  bool fresh = false;        // recompute every cell
  // Called after each cell: (cells done, total, the cell, reused from the
  // previous results).
  std::function<void(int, int, const ParetoCell&, bool)> on_cell;
};

// Runs the study. `previous` (the last results.json, or nothing) supplies
// cells whose key matches unless opt.fresh; `save` is called with the
// results after every computed cell, so an interrupted run keeps its work.
Result<ParetoResults> RunParetoStudy(const ParetoOptions& opt, const ParetoResults* previous,
                                     const std::function<Status(const ParetoResults&)>& save);

}  // namespace hqekv::eval
