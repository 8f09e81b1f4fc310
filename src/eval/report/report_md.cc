#include <sstream>

#include "eval/report/report.h"
#include "eval/report/report_tables.h"

namespace hqekv::eval {
namespace {
std::string Cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}
}  // namespace

std::string ReportMarkdown(const EvalRun& run) {
  const Summary s = Summarize(run);
  std::ostringstream o;
  o << "# hqekv evaluation: " << run.model << ", suite " << run.suite << "\n\n";
  o << "**" << Answer(s) << "**\n\n";
  o << "- command: `" << run.command << "`\n";
  o << "- machine: " << run.machine << "; threads: " << run.threads << "\n";
  o << "- started: " << run.started_utc << "; wall time: " << FmtFixed(run.seconds, 1)
    << " s; cells: " << run.computed << " computed, " << run.reused << " reused from the cache\n";
  o << "- context cap: " << run.max_ctx << " tokens; model identity: " << run.model_identity
    << "\n";
  bool said = false;
  for (const Table& t : ReportTables(run, s)) {
    if (t.collapsed && !said) {
      o << "\n## Tasks the fp16 cache fails (not used to rank)\n";
      said = true;
    }
    o << "\n" << (t.collapsed ? "###" : "##") << " " << t.title << "\n\n";
    if (!t.caption.empty()) o << t.caption << "\n\n";
    o << "|";
    for (const auto& h : t.header) o << " " << Cell(h) << " |";
    o << "\n|";
    for (size_t i = 0; i < t.header.size(); ++i) o << (i == 0 ? "---|" : "---:|");
    o << "\n";
    for (const auto& r : t.rows) {
      o << "|";
      for (const auto& c : r) o << " " << Cell(c) << " |";
      o << "\n";
    }
  }
  return o.str();
}

}  // namespace hqekv::eval
