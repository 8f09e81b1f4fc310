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

// Pareto fronts of items with a cost (lower is better: bits per original
// element) and a quality (higher is better): front 1 holds the items no
// other item dominates (no more cost and no less quality, one strictly
// better), front 2 those dominated only by front 1, and so on. Items with a
// NaN cost or quality get the last front + 1.
std::vector<int> ParetoFronts(const std::vector<double>& cost, const std::vector<double>& quality);

// Memory as people read it: "512 B", "12.5 KiB", "3.2 MiB", "1.1 GiB".
std::string Bytes(double bytes);

}  // namespace hqekv::eval
