#include "eval/study/pareto_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "eval/study/pareto_analysis.h"
#include "eval/study/pareto_plot.h"

namespace hqekv::eval {
namespace {

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string Kl(double v) { return v == 0 ? "0" : Fmt("%.3g", v); }

// The measured cells of one text, in grid order, and their families in order
// of first appearance.
struct TextCells {
  std::vector<const ParetoCell*> ok, failed;
  std::vector<std::string> missing;  // grid specs without a cell (an interrupted run)
  std::vector<std::string> families;
};

TextCells CellsOf(const ParetoResults& r, const std::string& text) {
  std::map<std::string, const ParetoCell*> by_spec;
  for (const auto& c : r.cells) {
    if (c.text == text && !by_spec.count(c.spec)) by_spec[c.spec] = &c;
  }
  TextCells t;
  for (const auto& spec : r.grid) {
    auto it = by_spec.find(spec);
    if (it == by_spec.end()) {
      t.missing.push_back(spec);
      continue;
    }
    const ParetoCell* c = it->second;
    (c->error.empty() ? t.ok : t.failed).push_back(c);
    if (std::find(t.families.begin(), t.families.end(), c->family) == t.families.end())
      t.families.push_back(c->family);
  }
  return t;
}

std::string CellRef(const ParetoCell& c) {
  return "`" + c.spec + "` (" + Fmt("%.2f", c.bits) + " bits, KL " + Kl(c.kl) + ")";
}

std::string CommandBlock(const ParetoResults& r) { return "```\n" + r.command + "\n```\n"; }

}  // namespace

std::string ParetoSvgName(const std::string& text_label) {
  std::string base = text_label;
  if (auto slash = base.find_last_of('/'); slash != std::string::npos)
    base = base.substr(slash + 1);
  if (auto dot = base.find_last_of('.'); dot != std::string::npos && dot > 0)
    base = base.substr(0, dot);
  for (char& ch : base) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    if (!ok) ch = '_';
  }
  return "pareto-" + base + ".svg";
}

ParetoReport RenderParetoReport(const ParetoResults& r) {
  ParetoReport out;
  std::string md = "# Pareto study: KL vs true bits on " + r.model + "\n\n";
  md +=
      "Regenerate (computes only cells missing from `results.json`; add `--fresh` to recompute "
      "all, `--report-only` to redraw):\n\n" +
      CommandBlock(r) + "\n";
  md += "Protocol: each text's first " + std::to_string(r.protocol.max_tokens) +
        " tokens (cut to the context of " + std::to_string(r.protocol.ctx) + "), prefill " +
        std::to_string(r.protocol.prefill) +
        " tokens as one batch, then teacher-forced one token at a time; every prediction after "
        "the prefill is scored against the fp16 cache's (`hqekv ppl --kv SPEC --ref fp16`). "
        "**KL** = mean KL(fp16 || cache) in nats per scored token; **agree** = top-1 agreement "
        "with fp16; ± = standard error over the scored tokens (tokens treated as independent). "
        "**True bits** = every byte the cache holds at the end x 8 / the K and V elements of "
        "every token appended (codes, scales, residual, bookkeeping, page slack; as `ppl "
        "--kv-report`); fp16 = 16. Model identity `" +
        r.model_identity + "`, code version `" + r.code_version + "`.\n\n";

  // Per text: points, frontier, target rows.
  struct PerText {
    TextCells cells;
    std::vector<bool> frontier;
    std::vector<TargetRow> target;
  };
  std::vector<PerText> per_text;
  for (const auto& t : r.texts) {
    PerText p;
    p.cells = CellsOf(r, t.label);
    std::vector<BitsKl> pts;
    std::vector<std::string> fams;
    for (const ParetoCell* c : p.cells.ok) {
      pts.push_back({c->bits, c->kl});
      fams.push_back(c->family);
    }
    p.frontier = ParetoFrontier(pts);
    p.target = TargetCheck(pts, fams, kParetoTargetFamily);
    per_text.push_back(std::move(p));
  }

  // Every family of the study, the target first, then in grid order: the
  // legend's order (each family's colour and marker: FamilyStyle).
  std::vector<std::string> families = {kParetoTargetFamily};
  for (const PerText& p : per_text) {
    for (const auto& f : p.cells.families) {
      if (std::find(families.begin(), families.end(), f) == families.end()) families.push_back(f);
    }
  }

  // The target check first: the answer.
  md += "## Target check\n\n";
  md += std::string("At each budget B, the lowest-KL `") + kParetoTargetFamily +
        "` point with true bits within ±" + Fmt("%g", kParetoTolerance * 100) +
        "% of B against the lowest-KL point of every other policy in the same window. PASS "
        "when KL ratio <= the need (0.8 at 3.4, 4.2, 5.4 bits; 1.0 at 8 bits). When no hqekv "
        "point lies in the window, the row names the nearest one and compares it with the best "
        "other point within ±3% of that point's own bits; that ratio is in parentheses (equal "
        "bits, but not the budget asked for).\n\n";
  md += "| text | budget | best hqekv | best other | KL ratio | need | result |\n";
  md += "|---|---:|---|---|---:|---:|---|\n";
  int pass = 0, rows = 0;
  for (size_t i = 0; i < r.texts.size(); ++i) {
    const auto& ok = per_text[i].cells.ok;
    for (const TargetRow& row : per_text[i].target) {
      ++rows;
      pass += row.verdict == "PASS";
      const std::string hq = row.target.found ? CellRef(*ok[row.target.index]) : "—";
      const std::string other = row.other.found ? CellRef(*ok[row.other.index]) : "—";
      const bool compared = row.target.found && row.other.found;
      std::string ratio = compared ? (std::isinf(row.ratio) ? "inf" : Fmt("%.2f", row.ratio)) : "—";
      std::string verdict = row.verdict;
      if (row.nearest.found) {  // how far off the nearest point is, and how it compares there
        const ParetoCell& n = *ok[row.nearest.index];
        verdict += "; nearest " + CellRef(n) + ", " +
                   Fmt("%+.1f%%", 100 * (n.bits - row.budget) / row.budget);
        if (row.nearest_other.found) {
          const ParetoCell& o = *ok[row.nearest_other.index];
          verdict += ", vs best other at its bits " + CellRef(o);
          if (o.kl > 0) ratio = "(" + Fmt("%.2f", n.kl / o.kl) + ")";
        } else {
          verdict += ", no other point within ±3% of its bits";
        }
      }
      if (row.verdict == "PASS" || row.verdict == "FAIL") {
        // How far the hqekv point is from B, and the margin (PASS) or the
        // miss (FAIL) as KL ratio / need.
        const ParetoCell& t = *ok[row.target.index];
        verdict = "**" + row.verdict +
                  "**: " + Fmt("%+.1f%%", 100 * (t.bits - row.budget) / row.budget) +
                  " of B; KL ratio / need = " + Fmt("%.2f", row.ratio / row.threshold);
        if (row.verdict == "FAIL") {
          verdict += " (misses by " + Fmt("%.0f%%", 100 * (row.ratio / row.threshold - 1)) + ")";
        }
      }
      md += "| " + r.texts[i].label + " | " + Fmt("%g", row.budget) + " | " + hq + " | " + other +
            " | " + ratio + " | " + Fmt("%.1f", row.threshold) + " | " + verdict + " |\n";
    }
  }
  md += "\n" + std::to_string(pass) + " of " + std::to_string(rows) + " budget checks pass.\n\n";

  // Per text: the plot and the table.
  std::set<std::string> names;
  for (size_t i = 0; i < r.texts.size(); ++i) {
    const auto& t = r.texts[i];
    const PerText& p = per_text[i];
    const std::string base = ParetoSvgName(t.label);  // "pareto-NAME.svg"
    std::string name = base;
    for (int k = 2; names.count(name); ++k)  // two texts of the same base name
      name = base.substr(0, base.size() - 4) + "-" + std::to_string(k) + ".svg";
    names.insert(name);
    std::vector<ParetoPlotPoint> pts;
    for (size_t j = 0; j < p.cells.ok.size(); ++j)
      pts.push_back({p.cells.ok[j]->family, p.cells.ok[j]->bits, p.cells.ok[j]->kl,
                     static_cast<bool>(p.frontier[j])});
    out.svgs.emplace_back(
        name, RenderParetoSvg(t.label + ": KL vs true bits (" + r.model + ")", families, pts));

    md += "## " + t.label + "\n\n";
    md += std::to_string(t.tokens) + " tokens, " +
          std::to_string(std::max(0, t.tokens - r.protocol.prefill)) + " scored; text hash `" +
          t.hash + "`.\n\n";
    md += "![" + t.label + "](" + name + ")\n\n";
    md +=
        "| spec | family | true bits | after prefill | x smaller than fp16 | KL ± s.e. | top-1 "
        "agree ± s.e. | frontier |\n";
    md += "|---|---|---:|---:|---:|---:|---:|:---:|\n";
    std::vector<size_t> order(p.cells.ok.size());
    for (size_t j = 0; j < order.size(); ++j) order[j] = j;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const ParetoCell &x = *p.cells.ok[a], &y = *p.cells.ok[b];
      return x.bits < y.bits || (x.bits == y.bits && x.kl < y.kl);
    });
    for (size_t j : order) {
      const ParetoCell& c = *p.cells.ok[j];
      md += "| `" + c.spec + "` | " + c.family + " | " + Fmt("%.3f", c.bits) + " | " +
            Fmt("%.3f", c.bits_after_prefill) + " | " +
            (c.bits > 0 ? Fmt("%.2f", 16.0 / c.bits) : "—") + " | " + Kl(c.kl) + " ± " +
            Kl(c.kl_stderr) + " | " + Fmt("%.3f", c.agree) + " ± " + Fmt("%.3f", c.agree_stderr) +
            " | " + (p.frontier[j] ? "**yes**" : "") + " |\n";
    }
    if (!p.cells.failed.empty()) {
      md += "\nNot measurable (the cache could not be made for this model):\n\n";
      for (const ParetoCell* c : p.cells.failed) md += "- `" + c->spec + "`: " + c->error + "\n";
    }
    if (!p.cells.missing.empty()) {
      md += "\nNot run yet (an interrupted run):";
      for (const auto& s : p.cells.missing) md += " `" + s + "`";
      md += "\n";
    }
    md += "\n";
  }
  out.markdown = md;
  return out;
}

}  // namespace hqekv::eval
