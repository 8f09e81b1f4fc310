// report.html: self-contained (inline CSS and SVG, no script, nothing
// fetched), so it opens anywhere and renders identically offline.
#include <algorithm>
#include <functional>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "eval/report/report.h"
#include "eval/report/report_svg.h"
#include "eval/report/report_tables.h"

namespace hqekv::eval {
namespace {

// The plotting style of a family, or of a policy spec's family ("kivi" of
// "kivi:nominal_bits=2"): the same colour and marker in every plot.
int StyleOfFamily(const std::string& family_or_spec) {
  return FamilyStyle(family_or_spec.substr(0, family_or_spec.find(':')));
}

// Quality vs memory, one series per policy family (its budgets form the line).
Plot QualityVsBits(const Summary& s, const std::string& title, const std::string& ylabel,
                   double (*get)(const PolicyRow&), bool log_y, bool unit) {
  Plot p;
  p.title = title;
  p.xlabel = "bits per original element (all bytes counted)";
  p.ylabel = ylabel;
  p.log_y = log_y;
  p.y_unit = unit;
  std::map<std::string, Series> by_family;
  std::vector<std::string> order;
  for (const auto& r : s.rows) {
    const double y = get(r);
    if (std::isnan(y) || r.bits_per_original <= 0) continue;
    // Natural-bit variants of one family (kivi:nominal_bits=2, kivi:nominal_bits=4) share a line.
    const std::string key = r.family.empty() ? r.policy : r.family;
    if (!by_family.count(key)) order.push_back(key);
    by_family[key].name = key;
    by_family[key].style = StyleOfFamily(key);
    by_family[key].points.push_back({r.bits_per_original, y});
  }
  for (const auto& k : order) p.series.push_back(by_family[k]);
  return p;
}

double TaskAcc(const PolicyRow& r, const std::string& t) {
  auto it = r.accuracy.find(t);
  return it == r.accuracy.end() ? NAN : it->second;
}

// Accuracy on one task vs bits per original element, a line per policy
// family (rows without the task or without a byte count are left out).
Plot TaskAccuracyPlot(const Summary& s, const TaskVerdict& v) {
  Plot p;
  p.title = v.task + " accuracy vs memory" + (v.usable ? "" : " (fp16 fails)");
  p.xlabel = "bits per original element (all bytes counted)";
  p.ylabel = "accuracy";
  p.y_unit = true;
  std::map<std::string, Series> fam;
  std::vector<std::string> order;
  for (const auto& r : s.rows) {
    const double a = TaskAcc(r, v.task);
    if (std::isnan(a) || r.bits_per_original <= 0) continue;
    if (!fam.count(r.family)) order.push_back(r.family);
    fam[r.family].name = r.family;
    fam[r.family].style = StyleOfFamily(r.family);
    fam[r.family].points.push_back({r.bits_per_original, a});
  }
  for (const auto& k : order) p.series.push_back(fam[k]);
  return p;
}

// Policies shown in per-context / per-depth plots: natural-bit ones and the
// budgeted ones at the budget closest to 3.2 bits (the paper's comparison point).
std::set<std::string> PlotPolicies(const EvalRun& run) {
  double best = -1;
  for (const auto& c : run.cells)
    if (c.budget > 0 && (best < 0 || std::fabs(c.budget - 3.2) < std::fabs(best - 3.2)))
      best = c.budget;
  std::set<std::string> out;
  for (const auto& c : run.cells)
    if (c.budget < 0 || c.budget == best) out.insert(c.policy);
  return out;
}

// Mean of a metric per (policy, x) over cells selected by `keep`.
Plot ByX(const EvalRun& run, const std::set<std::string>& policies, const std::string& title,
         const std::string& xlabel, const std::string& ylabel, bool unit,
         const std::function<bool(const CellResult&)>& keep, double (*x)(const CellResult&),
         double (*y)(const CellResult&)) {
  Plot p;
  p.title = title;
  p.xlabel = xlabel;
  p.ylabel = ylabel;
  p.y_unit = unit;
  std::vector<std::string> order;
  std::map<std::string, std::string> family;  // policy -> its family
  std::map<std::string, std::map<double, std::pair<double, int>>> acc;
  for (const auto& c : run.cells) {
    if (!c.error.empty() || !policies.count(c.policy) || !keep(c)) continue;
    if (!acc.count(c.policy)) order.push_back(c.policy);
    family[c.policy] = c.family.empty() ? c.policy : c.family;
    auto& a = acc[c.policy][x(c)];
    a.first += y(c);
    a.second += 1;
  }
  std::map<std::string, int> seen;  // policies of each family so far: the line's dash
  for (const auto& pol : order) {
    Series s;
    s.name = pol;
    s.style = StyleOfFamily(family[pol]);
    s.variant = seen[family[pol]]++;
    for (const auto& [xv, a] : acc[pol]) s.points.push_back({xv, a.first / a.second});
    p.series.push_back(s);
  }
  return p;
}

void Figure(std::ostringstream& o, const Plot& p, const std::string& caption) {
  o << "<figure>" << RenderSvg(p) << "<figcaption>" << XmlEscape(caption)
    << "</figcaption></figure>\n";
}

void HtmlTable(std::ostringstream& o, const Table& t) {
  o << "<h2 id=\"" << XmlEscape(t.id) << "\">" << XmlEscape(t.title) << "</h2>\n";
  if (!t.caption.empty()) o << "<p>" << XmlEscape(t.caption) << "</p>\n";
  o << "<table><thead><tr>";
  for (const auto& h : t.header) o << "<th>" << XmlEscape(h) << "</th>";
  o << "</tr></thead><tbody>\n";
  for (const auto& r : t.rows) {
    o << "<tr>";
    for (const auto& c : r) o << "<td>" << XmlEscape(c) << "</td>";
    o << "</tr>\n";
  }
  o << "</tbody></table>\n";
}

// The answer: quality against true memory, one marker + colour per family,
// the Pareto frontier (front 1 of the ranking) drawn under the points.
// Quality: the pooled accuracy over the usable tasks, else KL (log axis).
Plot ParetoPlot(const Summary& s) {
  bool by_acc = false;
  for (const auto& v : s.verdicts) by_acc = by_acc || v.usable;
  Plot p;
  p.xlabel = "bits per original element (every byte counted)";
  if (by_acc) {
    p.title = "Quality vs memory: accuracy on the usable tasks";
    p.ylabel = "accuracy (usable tasks)";  // the data's range: differences stay visible
  } else {
    p.title = "Quality vs memory: KL(fp16 || policy)";
    p.ylabel = "mean KL (nats/token, lower is better)";
    p.log_y = true;
  }
  std::map<std::string, Series> fam;
  std::vector<std::string> order;
  std::vector<double> cost, quality;
  std::vector<std::pair<double, double>> pts;
  for (const auto& r : s.rows) {
    const double y = by_acc ? UsableAccuracy(s, r).q : r.kl;
    const double q = by_acc ? y : -y;
    if (std::isnan(y) || r.bits_per_original <= 0) continue;
    const std::string key = r.family.empty() ? r.policy : r.family;
    if (!fam.count(key)) order.push_back(key);
    fam[key].name = key;
    fam[key].style = StyleOfFamily(key);
    fam[key].points.push_back({r.bits_per_original, y});
    cost.push_back(r.bits_per_original);
    quality.push_back(q);
    pts.push_back({r.bits_per_original, y});
  }
  for (const auto& k : order) p.series.push_back(fam[k]);
  const std::vector<int> fronts = ParetoFronts(cost, quality);
  for (size_t i = 0; i < pts.size(); ++i)
    if (fronts[i] == 1) p.frontier.push_back(pts[i]);
  return p;
}

}  // namespace

std::string ReportHtml(const EvalRun& run) {
  const Summary s = Summarize(run);
  std::ostringstream o;
  const std::string title = "hqekv evaluation: " + run.model + ", suite " + run.suite;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
    << XmlEscape(title)
    << "</title>\n<style>\n"
       "body{font-family:system-ui,sans-serif;margin:24px;max-width:1400px;color:#222}\n"
       "table{border-collapse:collapse;margin:8px 0 20px;font-size:13px}\n"
       "th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}\n"
       "th:first-child,td:first-child{text-align:left}th{background:#f2f2f2}\n"
       "summary{font-size:18px;font-weight:bold;margin:16px 0;cursor:pointer}\n"
       "figure{display:inline-block;margin:4px;vertical-align:top}figcaption{font-size:12px;max-"
       "width:620px}\n"
       ".meta{font-size:13px;color:#444}code{background:#f4f4f4;padding:1px 4px}\n"
       "</style></head><body>\n";
  o << "<h1>" << XmlEscape(title) << "</h1>\n<p><b>" << XmlEscape(Answer(Summarize(run)))
    << "</b></p>\n<p class=\"meta\">command: <code>" << XmlEscape(run.command)
    << "</code><br>machine: " << XmlEscape(run.machine) << "; threads: " << run.threads
    << "<br>started " << XmlEscape(run.started_utc) << "; wall time " << FmtFixed(run.seconds, 1)
    << " s; cells: " << run.computed << " computed, " << run.reused << " reused; context cap "
    << run.max_ctx << " tokens</p>\n";

  const std::vector<Table> tables = ReportTables(run, s);
  o << "<h2 id=\"answer\">The answer: quality at memory</h2>\n";
  Figure(o, ParetoPlot(s),
         "One point per policy (budgets of a family joined); grey band: the Pareto frontier "
         "(no policy holds fewer bits with equal or better quality). Memory counts every byte "
         "the cache holds.");
  for (const Table& t : tables)
    if (t.id == "main" || t.id == "ranking") HtmlTable(o, t);
  o << "<h2 id=\"plots\">Quality against memory</h2>\n";
  Figure(o,
         QualityVsBits(
             s, "KL(fp16 || policy) vs memory", "mean KL (nats/token)",
             [](const PolicyRow& r) { return r.kl; }, true, false),
         "Language-modelling cells; one line per policy family; KL below 1e-6 drawn at 1e-6 (fp16 "
         "is 0).");
  Figure(o,
         QualityVsBits(
             s, "Top-1 agreement with fp16 vs memory", "agreement",
             [](const PolicyRow& r) { return r.agreement; }, false, true),
         "Language-modelling cells; one line per policy family.");
  for (const auto& v : s.verdicts) {
    if (!v.usable) continue;  // tasks fp16 fails: at the end, collapsed
    Figure(o, TaskAccuracyPlot(s, v), "Mean over contexts and depths.");
  }

  const std::set<std::string> sel = PlotPolicies(run);
  o << "<h2 id=\"retrieval\">Retrieval against context length and depth</h2>\n";
  for (const auto& v : s.verdicts) {
    if (!v.usable) continue;
    const std::string t = v.task;
    int max_ctx = 0;
    for (const auto& c : run.cells)
      if (c.kind == "quality" && c.task == t) max_ctx = std::max(max_ctx, c.context);
    Figure(o,
           ByX(
               run, sel, t + " accuracy vs context length", "context tokens", "accuracy", true,
               [&t](const CellResult& c) { return c.kind == "quality" && c.task == t; },
               [](const CellResult& c) { return double(c.context); },
               [](const CellResult& c) { return c.accuracy; }),
           "Mean over depths. Budgeted policies at the budget nearest 3.2 bits." +
               std::string(v.usable ? "" : " fp16 fails on this task."));
    Figure(o,
           ByX(
               run, sel, t + " accuracy vs depth (" + std::to_string(max_ctx) + " tokens)",
               "depth of the needle", "accuracy", true,
               [&t, max_ctx](const CellResult& c) {
                 return c.kind == "quality" && c.task == t && c.context == max_ctx;
               },
               [](const CellResult& c) { return c.depth; },
               [](const CellResult& c) { return c.accuracy; }),
           "At the largest context." + std::string(v.usable ? "" : " fp16 fails on this task."));
  }

  o << "<h2 id=\"memory\">Memory and speed against context length</h2>\n";
  auto speed = [](const CellResult& c) { return c.kind == "speed"; };
  Figure(o,
         ByX(
             run, sel, "KV bytes vs context", "prompt tokens", "bytes held", false, speed,
             [](const CellResult& c) { return double(c.context); },
             [](const CellResult& c) { return c.kv_bytes; }),
         "Every byte the cache holds (payload, metadata, bookkeeping, residual) after prefill + "
         "decode.");
  Figure(o,
         ByX(
             run, sel, "Decode speed vs context", "prompt tokens", "tokens/s", false, speed,
             [](const CellResult& c) { return double(c.context); },
             [](const CellResult& c) { return c.decode_tok_s; }),
         "Greedy decode after the prompt, whole model (threads: " + std::to_string(run.threads) +
             ").");

  for (const Table& t : tables)
    if (t.id != "main" && t.id != "ranking" && !t.collapsed) HtmlTable(o, t);
  // Tasks the fp16 cache fails: last, collapsed.
  bool any_failed = false;
  for (const auto& v : s.verdicts) any_failed = any_failed || !v.usable;
  if (any_failed) {
    o << "<details id=\"fp16-fails\"><summary>Tasks the fp16 cache fails (not used to rank): ";
    std::string names;
    for (const auto& v : s.verdicts)
      if (!v.usable) names += (names.empty() ? "" : ", ") + v.task;
    o << XmlEscape(names) << "</summary>\n";
    for (const auto& v : s.verdicts) {
      if (v.usable) continue;
      Figure(o, TaskAccuracyPlot(s, v), "fp16 fails on this task: not used to rank.");
    }
    for (const Table& t : tables)
      if (t.collapsed) HtmlTable(o, t);
    o << "</details>\n";
  }
  o << "</body></html>\n";
  return o.str();
}

}  // namespace hqekv::eval
