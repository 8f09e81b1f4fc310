// Report tables as plain strings, rendered by both report.md and report.html.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "eval/run/intervals.h"
#include "eval/report/report.h"

namespace hqekv::eval {

struct Table {
  std::string id;  // HTML anchor
  std::string title;
  std::string caption;  // one paragraph under the title
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  // A task the fp16 cache fails: listed last, collapsed in report.html.
  bool collapsed = false;
};

// In reading order: the answer first (main table, ranking), then the
// details; tables of tasks the fp16 cache fails last (collapsed = true).
std::vector<Table> ReportTables(const EvalRun& run, const Summary& s);

// Per policy: the quality the ranking and the Pareto plot use -- the pooled
// accuracy over the usable tasks, or NaN when there is none (then the report
// ranks by KL) -- and its 95% Wilson interval.
struct PooledQuality {
  double q = NAN;
  Interval ci;
};
PooledQuality UsableAccuracy(const Summary& s, const PolicyRow& r);

// The ranking of the report and of the terminal summary. Quality is the
// pooled accuracy over the usable tasks -- unless no policy's interval lies
// wholly below the best one's (the tasks cannot tell the policies apart),
// or no task is usable: then quality is -KL(fp16 || policy), so a tie on
// accuracy never hides a difference the language-modelling cells measure.
// Rows are ordered by Pareto front (cost: bits per original element), then
// by lower KL; `tie` marks a row whose quality interval overlaps the row
// above.
struct RankedRow {
  const PolicyRow* row = nullptr;
  double quality = NAN;
  Interval ci;
  int front = 0;
  int rank = 0;  // shown rank (equal for tied rows)
  bool tie = false;
};
struct Ranking {
  bool by_accuracy = false;
  std::string usable_tasks;  // "a, b" (empty when by KL)
  std::vector<RankedRow> rows;
};
// The rows point into `s`, which must outlive the Ranking.
Ranking RankPolicies(const Summary& s);

// The one-sentence answer every report leads with: which policy gives the
// best quality at the least memory (front 1, fewest bits) and how it
// compares with fp16, e.g. "hqekv:bits=3.2 holds 3.18 bits per element
// (5.0x smaller than fp16) at KL 0.012; ...".
std::string Answer(const Summary& s);

// The ranking as aligned plain-text columns for the terminal (`hqekv eval`).
std::string RankingText(const Summary& s);

// Pareto fronts of items with a cost (lower is better: bits per original
// element) and a quality (higher is better): front 1 holds the items no
// other item dominates (no more cost and no less quality, one strictly
// better), front 2 those dominated only by front 1, and so on. Items with a
// NaN cost or quality get the last front + 1.
std::vector<int> ParetoFronts(const std::vector<double>& cost, const std::vector<double>& quality);

// Memory as people read it: "512 B", "12.5 KiB", "3.2 MiB", "1.1 GiB".
std::string Bytes(double bytes);

}  // namespace hqekv::eval
