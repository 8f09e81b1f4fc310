#include "eval/report_tables.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

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
      "accuracies over every context length and depth; a task marked 'fp16 fails' is not used to "
      "rank. "
      "Speed at " +
      std::to_string(speed_ctx) + " prompt tokens.";
  t.header = {"policy", "budget", "true bits", "bits/orig", "kept", "KL", "agree", "ppl"};
  for (const auto& task : s.tasks)
    t.header.push_back(task + (Usable(s, task) ? "" : " (fp16 fails)"));
  t.header.insert(t.header.end(), {"decode tok/s", "prefill tok/s", "KV bytes"});
  for (const auto& r : s.rows) {
    std::vector<std::string> row = {r.policy,
                                    Budget(r.budget),
                                    Fmt(r.true_bits, 4),
                                    Fmt(r.bits_per_original, 4),
                                    Pct(r.kept_fraction),
                                    Fmt(r.kl, 3),
                                    Pct(r.agreement),
                                    Fmt(r.ppl, 4)};
    for (const auto& task : s.tasks) {
      auto it = r.accuracy.find(task);
      row.push_back(it == r.accuracy.end() ? "-" : Pct(it->second));
    }
    row.push_back(r.speed_ctx ? FmtFixed(r.decode_tok_s, 0) : "-");
    row.push_back(r.speed_ctx ? FmtFixed(r.prefill_tok_s, 0) : "-");
    row.push_back(r.speed_ctx ? FmtFixed(r.kv_bytes, 0) : "-");
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
  std::vector<std::string> used;
  for (const auto& v : s.verdicts)
    if (v.usable) used.push_back(v.task);
  std::string list;
  for (const auto& u : used) list += (list.empty() ? "" : ", ") + u;
  t.caption =
      used.empty()
          ? "No retrieval task is usable (fp16 fails all of them): policies ranked by KL only."
          : "Policies ranked by mean accuracy over the usable tasks (" + list +
                "), ties by lower KL. Compare rows of similar bits/orig.";
  t.header = {"rank", "policy", "bits/orig", "mean accuracy (usable tasks)", "KL"};
  struct R {
    const PolicyRow* r;
    double acc;
  };
  std::vector<R> rs;
  for (const auto& r : s.rows) {
    double a = 0;
    int n = 0;
    for (const auto& u : used) {
      auto it = r.accuracy.find(u);
      if (it != r.accuracy.end()) {
        a += it->second;
        ++n;
      }
    }
    rs.push_back({&r, n ? a / n : NAN});
  }
  std::stable_sort(rs.begin(), rs.end(), [](const R& a, const R& b) {
    const double aa = std::isnan(a.acc) ? -1 : a.acc, ba = std::isnan(b.acc) ? -1 : b.acc;
    if (aa != ba) return aa > ba;
    const double ak = std::isnan(a.r->kl) ? 1e300 : a.r->kl,
                 bk = std::isnan(b.r->kl) ? 1e300 : b.r->kl;
    return ak < bk;
  });
  int rank = 0;
  for (const auto& x : rs)
    t.rows.push_back({std::to_string(++rank), x.r->policy, Fmt(x.r->bits_per_original, 4),
                      used.empty() ? "-" : Pct(x.acc), Fmt(x.r->kl, 3)});
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
      "bits measured after the decode. Peak RSS is the process high-water mark when the cell "
      "finished "
      "(getrusage), so it only grows during a run. Threads: " +
      std::to_string(run.threads) + ".";
  t.header = {"policy",    "context",       "KV bytes",     "true bits",
              "bits/orig", "prefill tok/s", "decode tok/s", "peak RSS MiB"};
  for (const auto& c : run.cells) {
    if (c.kind != "speed") continue;
    if (!c.error.empty()) {
      t.rows.push_back(
          {c.policy, std::to_string(c.context), "error: " + c.error, "", "", "", "", ""});
      continue;
    }
    t.rows.push_back({c.policy, std::to_string(c.context), FmtFixed(c.kv_bytes, 0),
                      Fmt(c.true_bits, 4), Fmt(c.bits_per_original, 4),
                      FmtFixed(c.prefill_tok_s, 0), FmtFixed(c.decode_tok_s, 0),
                      FmtFixed(c.peak_rss_kb / 1024.0, 1)});
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

std::vector<Table> ReportTables(const EvalRun& run, const Summary& s) {
  std::vector<Table> out = {MainTable(run, s), VerdictTable(s), RankingTable(s), LmTable(run)};
  for (const auto& task : s.tasks) out.push_back(TaskGrid(run, task, Usable(s, task)));
  out.push_back(SpeedTable(run));
  Table ex = ExamplesTable(run);
  if (!ex.rows.empty()) out.push_back(ex);
  Table err = ErrorTable(run);
  if (!err.rows.empty()) out.push_back(err);
  return out;
}

}  // namespace hqekv::eval
