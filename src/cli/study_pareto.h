// `hqekv study pareto`: KL vs true bits of a grid of KV policies on texts,
// with the Pareto frontier and the target check
// (eval/study/pareto_study.h, eval/study/pareto_report.h). Added to `study` by
// cmd_study.cc.
#pragma once

#include <CLI/CLI.hpp>

namespace hqekv::cli {

void AddStudyPareto(CLI::App& study, int* rc);

}  // namespace hqekv::cli
