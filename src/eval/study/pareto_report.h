// The report of a Pareto study (eval/study/pareto_study.h), made from its results
// alone so that `study pareto --report-only` regenerates it byte for byte:
// report.md (the command, the target check, then per text a plot and
// a table sorted by true bits) and one SVG plot per text.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "eval/study/pareto_study.h"

namespace hqekv::eval {

struct ParetoReport {
  std::string markdown;                                   // report.md
  std::vector<std::pair<std::string, std::string>> svgs;  // (file name, SVG), one per text
};

// The family compared against every other by the target check.
inline constexpr const char* kParetoTargetFamily = "hqekv";

// File name of a text's plot: "pareto-<basename without extension>.svg",
// characters other than [A-Za-z0-9._-] replaced by '_'.
std::string ParetoSvgName(const std::string& text_label);

ParetoReport RenderParetoReport(const ParetoResults& r);

}  // namespace hqekv::eval
