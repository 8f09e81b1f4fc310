#include "eval/report/report_tables.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "eval/run/intervals.h"

namespace hqekv::eval {
namespace {

std::string Pct(double v) { return std::isnan(v) ? "-" : FmtFixed(100 * v, 1) + "%"; }
std::string Budget(double b) { return b < 0 ? "natural" : Fmt(b, 3); }

bool Usable(const Summary& s, const std::string& task) {
  for (const auto& v : s.verdicts)
    if (v.task == task) return v.usable;
  return false;
}

Table MainTable(const EvalRun& run, const Summary& s) {
  Table t;
  t.id = "main";
  t.title = "Main table";
  int speed_ctx = 0;
  for (const auto& r : s.rows) speed_ctx = std::max(speed_ctx, r.speed_ctx);
  t.caption =
      "One row per KV policy. Memory: true bits = all bytes held x 8 / kept elements; bits/orig = "
      "all "
      "bytes x 8 / every element appended (what a budget bits=B targets); kept = kept / appended "
      "elements. KL(fp16||policy), top-1 agreement with the fp16 cache and perplexity are means "
      "over "
      "the language-modelling cells (prefill, then teacher-forced continuation). Task columns are "
      "mean "
      "accuracies over every context length and depth with their 95% Wilson interval; tasks the "
      "fp16 cache fails are not used to rank and are listed at the end. "
      "Speed at " +
      std::to_string(speed_ctx) + " prompt tokens.";
  // fp16's memory, the unit of "x smaller" (16 bits when the run has no fp16 row).
  double fp16_bits = 16;
  for (const auto& r : s.rows)
    if (r.policy == "fp16" && r.bits_per_original > 0) fp16_bits = r.bits_per_original;
  t.header = {"policy", "budget",   "true bits", "bits/orig", "x smaller than fp16",
              "kept",   "KL +- se", "agree",     "ppl"};
  // Tasks the fp16 cache fails are left out here (shown last, collapsed).
  for (const auto& task : s.tasks)
    if (Usable(s, task)) t.header.push_back(task + " [95% CI]");
  t.header.insert(t.header.end(), {"decode tok/s", "prefill tok/s", "KV memory"});
  for (const auto& r : s.rows) {
    std::vector<std::string> row = {
        r.policy,
        Budget(r.budget),
        Fmt(r.true_bits, 4),
        Fmt(r.bits_per_original, 4),
        r.bits_per_original > 0 ? FmtFixed(fp16_bits / r.bits_per_original, 1) + "x" : "-",
        Pct(r.kept_fraction),
        std::isnan(r.kl) ? "-" : Fmt(r.kl, 3) + " +- " + Fmt(r.kl_se, 2),
        Pct(r.agreement),
        Fmt(r.ppl, 4)};
    for (const auto& task : s.tasks) {
      if (!Usable(s, task)) continue;
      auto it = r.accuracy.find(task);
      std::string v = it == r.accuracy.end() ? "-" : Pct(it->second);
      auto h = r.hits.find(task);
      if (it != r.accuracy.end() && h != r.hits.end() && h->second.second > 0) {
        const Interval ci = Wilson(h->second.first, h->second.second);
        v += " [" + FmtFixed(100 * ci.lo, 1) + ", " + FmtFixed(100 * ci.hi, 1) + "]";
      }
      row.push_back(v);
    }
    row.push_back(r.speed_ctx ? FmtFixed(r.decode_tok_s, 0) : "-");
    row.push_back(r.speed_ctx ? FmtFixed(r.prefill_tok_s, 0) : "-");
    row.push_back(r.speed_ctx ? Bytes(r.kv_bytes) : "-");
    if (r.errors) row[0] += " (" + std::to_string(r.errors) + " failed cells)";
    t.rows.push_back(row);
  }
  return t;
}

Table VerdictTable(const Summary& s) {
  Table t;
  t.id = "tasks";
  t.title = "Can the model do the task with an fp16 cache?";
  t.caption = "A task ranks policies only when the fp16 cache is at least " + Pct(kUsableMargin) +
              " above chance.";
  t.header = {"task", "fp16 accuracy", "chance", "verdict"};
  for (const auto& v : s.verdicts)
    t.rows.push_back({v.task, Pct(v.fp16_accuracy), Pct(v.chance), v.note});
  return t;
}

Table RankingTable(const Summary& s) {
  Table t;
  t.id = "ranking";
  t.title = "Ranking";
  const Ranking rk = RankPolicies(s);
  t.caption =
      "Policies are ordered by Pareto front (front 1: no other policy holds fewer bits/orig with "
      "equal or better quality), then by lower KL. Quality is " +
      (rk.by_accuracy ? "the pooled accuracy over the usable tasks (" + rk.usable_tasks + ")"
                      : std::string("-KL (no usable task separates the policies: every "
                                    "accuracy interval overlaps the best one)")) +
      ", with its 95% interval (Wilson for accuracies, +-1.96 se for KL); a row whose interval "
      "overlaps the one above is shown as a tie (=).";
  t.header = {"rank", "front", "policy", "bits/orig", "quality [95% CI]", "KL +- se"};
  for (const RankedRow& x : rk.rows) {
    std::string q = "-";
    if (!std::isnan(x.quality)) {
      q = rk.by_accuracy
              ? Pct(x.quality) + " [" + Pct(x.ci.lo) + ", " + Pct(x.ci.hi) + "]"
              : Fmt(-x.quality, 3) + " [" + Fmt(-x.ci.hi, 3) + ", " + Fmt(-x.ci.lo, 3) + "]";
    }
    const std::string kl =
        std::isnan(x.row->kl) ? "-" : Fmt(x.row->kl, 3) + " +- " + Fmt(x.row->kl_se, 2);
    t.rows.push_back({(x.tie ? "=" : "") + std::to_string(x.rank), std::to_string(x.front),
                      x.row->policy, Fmt(x.row->bits_per_original, 4), q, kl});
  }
  return t;
}

Table LmTable(const EvalRun& run) {
  Table t;
  t.id = "lm";
  t.title = "Language modelling by text";
  t.caption = "KL(fp16||policy) / top-1 agreement / perplexity of the teacher-forced continuation.";
  std::vector<std::string> corpora, policies;
  for (const auto& c : run.cells) {
    if (c.task != "lm") continue;
    if (std::find(corpora.begin(), corpora.end(), c.corpus) == corpora.end())
      corpora.push_back(c.corpus);
    if (std::find(policies.begin(), policies.end(), c.policy) == policies.end())
      policies.push_back(c.policy);
  }
  t.header = {"policy"};
  for (const auto& c : corpora) t.header.push_back(c);
  for (const auto& p : policies) {
    std::vector<std::string> row = {p};
    for (const auto& corp : corpora) {
      std::string v = "-";
      for (const auto& c : run.cells)
        if (c.task == "lm" && c.policy == p && c.corpus == corp)
          v = c.error.empty() ? Fmt(c.kl, 3) + " / " + Pct(c.agreement) + " / " + Fmt(c.ppl, 4)
                              : "error";
      row.push_back(v);
    }
    t.rows.push_back(row);
  }
  return t;
}

Table TaskGrid(const EvalRun& run, const std::string& task, bool usable) {
  Table t;
  t.id = "grid-" + task;
  t.title = task + " accuracy by context length and depth";
  t.caption = usable ? "Columns: context tokens @ depth."
                     : "fp16 fails on this task: shown, not used to rank.";
  std::vector<std::pair<int, double>> cols;
  std::vector<std::string> policies;
  for (const auto& c : run.cells) {
    if (c.kind != "quality" || c.task != task) continue;
    std::pair<int, double> k{c.context, c.depth};
    if (std::find(cols.begin(), cols.end(), k) == cols.end()) cols.push_back(k);
    if (std::find(policies.begin(), policies.end(), c.policy) == policies.end())
      policies.push_back(c.policy);
  }
  std::sort(cols.begin(), cols.end());
  t.header = {"policy"};
  for (const auto& [ctx, d] : cols) t.header.push_back(std::to_string(ctx) + "@" + Fmt(d, 2));
  for (const auto& p : policies) {
    std::vector<std::string> row = {p};
    for (const auto& k : cols) {
      std::string v = "-";
      double sum = 0;
      int n = 0;
      bool err = false;
      for (const auto& c : run.cells)
        if (c.kind == "quality" && c.task == task && c.policy == p && c.context == k.first &&
            c.depth == k.second) {
          if (!c.error.empty())
            err = true;
          else {
            sum += c.accuracy;
            ++n;
          }
        }
      if (n)
        v = Pct(sum / n);
      else if (err)
        v = "error";
      row.push_back(v);
    }
    t.rows.push_back(row);
  }
  return t;
}

Table SpeedTable(const EvalRun& run) {
  Table t;
  t.id = "speed";
  t.title = "Memory and speed";
  t.caption =
      "Prompt of held-out text prefilled at once, then greedy decode, best of 3 runs; KV bytes and "
      "bits measured after the decode. Threads: " +
      std::to_string(run.threads) + ".";
  t.header = {"policy",    "context",       "KV memory",   "true bits",
              "bits/orig", "prefill tok/s", "decode tok/s"};
  for (const auto& c : run.cells) {
    if (c.kind != "speed") continue;
    if (!c.error.empty()) {
      t.rows.push_back({c.policy, std::to_string(c.context), "error: " + c.error, "", "", "", ""});
      continue;
    }
    t.rows.push_back({c.policy, std::to_string(c.context), Bytes(c.kv_bytes), Fmt(c.true_bits, 4),
                      Fmt(c.bits_per_original, 4), FmtFixed(c.prefill_tok_s, 0),
                      FmtFixed(c.decode_tok_s, 0)});
  }
  return t;
}

Table ExamplesTable(const EvalRun& run) {
  Table t;
  t.id = "examples";
  t.title = "Sample generations (fp16 cache)";
  t.caption = "The first greedy answers of the generation tasks, to show what the model does.";
  t.header = {"task", "context@depth", "generations"};
  for (const auto& c : run.cells) {
    if (c.kind != "quality" || c.policy != "fp16" || c.examples.empty()) continue;
    std::string g;
    for (const auto& e : c.examples) g += (g.empty() ? "" : " | ") + e;
    t.rows.push_back({c.task, std::to_string(c.context) + "@" + Fmt(c.depth, 2), g});
    if (t.rows.size() >= 12) break;
  }
  return t;
}

Table ErrorTable(const EvalRun& run) {
  Table t;
  t.id = "errors";
  t.title = "Cells that could not run";
  t.header = {"policy", "cell", "error"};
  for (const auto& c : run.cells)
    if (!c.error.empty())
      t.rows.push_back({c.policy,
                        c.kind == "speed" ? "speed ctx=" + std::to_string(c.context) : c.task_key,
                        c.error});
  return t;
}

}  // namespace

Ranking RankPolicies(const Summary& s) {
  Ranking out;
  std::vector<std::string> used;
  for (const auto& v : s.verdicts)
    if (v.usable) used.push_back(v.task);
  for (const auto& u : used) out.usable_tasks += (out.usable_tasks.empty() ? "" : ", ") + u;
  std::vector<PooledQuality> acc;
  for (const auto& r : s.rows) acc.push_back(UsableAccuracy(s, r));
  bool separates = false;  // some policy is surely worse than the best on accuracy
  if (!used.empty()) {
    const PooledQuality* best = nullptr;
    for (const auto& a : acc)
      if (!std::isnan(a.q) && (!best || a.q > best->q)) best = &a;
    for (const auto& a : acc)
      if (best && !std::isnan(a.q) && a.ci.hi < best->ci.lo) separates = true;
  }
  out.by_accuracy = separates;
  if (!separates) out.usable_tasks.clear();
  for (size_t k = 0; k < s.rows.size(); ++k) {
    const PolicyRow& r = s.rows[k];
    RankedRow x;
    x.row = &r;
    if (out.by_accuracy) {
      x.quality = acc[k].q;
      x.ci = acc[k].ci;
    } else if (!std::isnan(r.kl)) {
      x.quality = -r.kl;
      const double h = kZ95 * (std::isnan(r.kl_se) ? 0 : r.kl_se);
      x.ci = {-r.kl - h, -r.kl + h};
    }
    out.rows.push_back(x);
  }
  std::vector<double> cost, quality;
  for (const auto& x : out.rows) {
    cost.push_back(x.row->bits_per_original);
    quality.push_back(x.quality);
  }
  const std::vector<int> fronts = ParetoFronts(cost, quality);
  for (size_t i = 0; i < out.rows.size(); ++i) out.rows[i].front = fronts[i];
  std::stable_sort(out.rows.begin(), out.rows.end(), [](const RankedRow& a, const RankedRow& b) {
    if (a.front != b.front) return a.front < b.front;
    const double ak = std::isnan(a.row->kl) ? 1e300 : a.row->kl,
                 bk = std::isnan(b.row->kl) ? 1e300 : b.row->kl;
    return ak < bk;
  });
  int shown = 0;
  for (size_t i = 0; i < out.rows.size(); ++i) {
    RankedRow& x = out.rows[i];
    const RankedRow* above = i > 0 ? &out.rows[i - 1] : nullptr;
    x.tie =
        above && !std::isnan(x.quality) && !std::isnan(above->quality) && x.ci.Overlaps(above->ci);
    if (!x.tie) shown = static_cast<int>(i) + 1;
    x.rank = shown;
  }
  return out;
}

std::string Answer(const Summary& s) {
  const Ranking rk = RankPolicies(s);
  const PolicyRow* fp16 = nullptr;
  for (const auto& r : s.rows)
    if (r.policy == "fp16") fp16 = &r;
  // Front 1 by bits: the cheapest policy no other beats on quality, and the best quality.
  const RankedRow* cheapest = nullptr;
  for (const auto& x : rk.rows) {
    if (x.front != 1 || x.row->policy == "fp16" || std::isnan(x.row->bits_per_original)) continue;
    if (!cheapest || x.row->bits_per_original < cheapest->row->bits_per_original) cheapest = &x;
  }
  if (rk.rows.empty()) return "No policy ran.";
  const RankedRow& top = rk.rows.front();
  auto describe = [&](const PolicyRow& r) {
    std::string d = r.policy + " holds " + FmtFixed(r.bits_per_original, 2) + " bits per element";
    if (fp16 && fp16 != &r && r.bits_per_original > 0)
      d += " (" + FmtFixed(fp16->bits_per_original / r.bits_per_original, 1) +
           "x smaller than fp16)";
    if (!std::isnan(r.kl)) d += " at KL " + Fmt(r.kl, 3);
    return d;
  };
  std::string a = "Best quality: " + describe(*top.row) + ".";
  if (cheapest && cheapest->row != top.row)
    a += " Least memory without losing to a cheaper policy: " + describe(*cheapest->row) + ".";
  a += rk.by_accuracy ? " Ranked by accuracy on " + rk.usable_tasks + "."
                      : " Ranked by KL: the tasks' accuracies do not separate the policies.";
  return a;
}

std::string RankingText(const Summary& s) {
  const Table t = RankingTable(s);
  std::vector<size_t> width(t.header.size(), 0);
  auto fit = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  };
  fit(t.header);
  for (const auto& r : t.rows) fit(r);
  std::string out;
  auto line = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      out += row[c];
      if (c + 1 < row.size()) out += std::string(width[c] - row[c].size() + 2, ' ');
    }
    out += "\n";
  };
  line(t.header);
  for (const auto& r : t.rows) line(r);
  return out;
}

std::vector<Table> ReportTables(const EvalRun& run, const Summary& s) {
  std::vector<Table> out = {MainTable(run, s), RankingTable(s), VerdictTable(s), LmTable(run)};
  for (const auto& task : s.tasks)
    if (Usable(s, task)) out.push_back(TaskGrid(run, task, true));
  out.push_back(SpeedTable(run));
  Table ex = ExamplesTable(run);
  if (!ex.rows.empty()) out.push_back(ex);
  Table err = ErrorTable(run);
  if (!err.rows.empty()) out.push_back(err);
  for (const auto& task : s.tasks) {
    if (Usable(s, task)) continue;
    out.push_back(TaskGrid(run, task, false));
    out.back().collapsed = true;
  }
  return out;
}

PooledQuality UsableAccuracy(const Summary& s, const PolicyRow& r) {
  double k = 0, n = 0;
  for (const auto& v : s.verdicts) {
    if (!v.usable) continue;
    auto it = r.hits.find(v.task);
    if (it == r.hits.end()) continue;
    k += it->second.first;
    n += it->second.second;
  }
  PooledQuality p;
  if (n > 0) {
    p.q = k / n;
    p.ci = Wilson(k, n);
  }
  return p;
}

std::vector<int> ParetoFronts(const std::vector<double>& cost, const std::vector<double>& quality) {
  const size_t n = cost.size();
  std::vector<int> front(n, 0);
  auto valid = [&](size_t i) { return !std::isnan(cost[i]) && !std::isnan(quality[i]); };
  auto dominates = [&](size_t a, size_t b) {
    return cost[a] <= cost[b] && quality[a] >= quality[b] &&
           (cost[a] < cost[b] || quality[a] > quality[b]);
  };
  size_t left = 0;
  for (size_t i = 0; i < n; ++i) left += valid(i);
  int f = 0;
  while (left > 0) {
    ++f;
    std::vector<size_t> now;
    for (size_t i = 0; i < n; ++i) {
      if (!valid(i) || front[i]) continue;
      bool dominated = false;
      for (size_t j = 0; j < n && !dominated; ++j)
        dominated = j != i && valid(j) && !front[j] && dominates(j, i);
      if (!dominated) now.push_back(i);
    }
    for (size_t i : now) front[i] = f;
    left -= now.size();
  }
  for (size_t i = 0; i < n; ++i)
    if (!valid(i)) front[i] = f + 1;
  return front;
}

std::string Bytes(double bytes) {
  if (std::isnan(bytes)) return "-";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? FmtFixed(bytes, 0) + " B" : FmtFixed(bytes, bytes < 10 ? 2 : 1) + " " + units[u];
}

}  // namespace hqekv::eval
