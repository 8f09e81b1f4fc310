// Report tables as plain strings, rendered by both report.md and report.html.
#pragma once

#include <string>
#include <vector>

#include "eval/report.h"

namespace hqekv::eval {

struct Table {
  std::string id;  // HTML anchor
  std::string title;
  std::string caption;  // one paragraph under the title
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

std::vector<Table> ReportTables(const EvalRun& run, const Summary& s);

}  // namespace hqekv::eval
