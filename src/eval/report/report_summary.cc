// Summary tables shared by the Markdown and HTML reports, and results.json.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/file.h"

#include "eval/report/report.h"

namespace hqekv::eval {
namespace {
const char* const kTaskOrder[] = {"passkey", "multikey", "vartrack", "copy"};
}

std::string Fmt(double v, int digits) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string FmtFixed(double v, int decimals) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

Summary Summarize(const EvalRun& run) {
  Summary s;
  for (const char* t : kTaskOrder) {
    for (const auto& c : run.cells)
      if (c.kind == "quality" && c.task == t) {
        s.tasks.push_back(t);
        break;
      }
  }
  // Verdicts from the fp16 cells.
  for (const std::string& t : s.tasks) {
    TaskVerdict v;
    v.task = t;
    double acc = 0, chance = 0;
    int n = 0;
    for (const auto& c : run.cells)
      if (c.kind == "quality" && c.task == t && c.policy == "fp16" && c.error.empty()) {
        acc += c.accuracy;
        chance += c.chance;
        ++n;
      }
    v.fp16_accuracy = n ? acc / n : 0;
    v.chance = n ? chance / n : 0;
    v.usable = n > 0 && v.fp16_accuracy >= v.chance + kUsableMargin;
    v.note = v.usable ? "ok" : "fp16 fails: not used to rank";
    s.verdicts.push_back(v);
  }
  // One row per policy, in the order the cells first mention them.
  std::vector<std::string> order;
  for (const auto& c : run.cells)
    if (std::find(order.begin(), order.end(), c.policy) == order.end()) order.push_back(c.policy);
  int max_speed_ctx = 0;
  for (const auto& c : run.cells)
    if (c.kind == "speed" && c.error.empty()) max_speed_ctx = std::max(max_speed_ctx, c.context);
  for (const std::string& p : order) {
    PolicyRow r;
    r.policy = p;
    int nlm = 0, nq = 0;
    double qbits = 0, qbpo = 0, qkept = 0;
    std::map<std::string, std::pair<double, int>> acc;
    for (const auto& c : run.cells) {
      if (c.policy != p) continue;
      r.family = c.family;
      r.budget = c.budget;
      if (!c.error.empty()) {
        ++r.errors;
        continue;
      }
      if (c.kind == "speed") {
        if (c.context == max_speed_ctx) {
          r.decode_tok_s = c.decode_tok_s;
          r.prefill_tok_s = c.prefill_tok_s;
          r.kv_bytes = c.kv_bytes;
          r.speed_ctx = c.context;
        }
        continue;
      }
      ++nq;
      qbits += c.true_bits;
      qbpo += c.bits_per_original;
      qkept += c.kept_fraction;
      if (c.task == "lm") {
        ++nlm;
        r.true_bits += c.true_bits;
        r.bits_per_original += c.bits_per_original;
        r.kept_fraction += c.kept_fraction;
        r.kl += c.kl;
        r.kl_se += c.kl_se * c.kl_se;
        r.agreement += c.agreement;
        r.ppl += c.ppl;
      } else {
        acc[c.task].first += c.accuracy;
        acc[c.task].second += 1;
        // Cells written before intervals existed have no trials: their n.
        const double trials = c.trials > 0 ? c.trials : c.n;
        r.hits[c.task].first += c.accuracy * trials;
        r.hits[c.task].second += trials;
      }
    }
    if (nlm) {
      r.true_bits /= nlm;
      r.bits_per_original /= nlm;
      r.kept_fraction /= nlm;
      r.kl /= nlm;
      r.kl_se = std::sqrt(r.kl_se) / nlm;  // se of a mean of independent means
      r.agreement /= nlm;
      r.ppl /= nlm;
    } else {  // no lm cell: memory from the other quality cells, quality unknown
      r.true_bits = nq ? qbits / nq : 0;
      r.bits_per_original = nq ? qbpo / nq : 0;
      r.kept_fraction = nq ? qkept / nq : 0;
      r.kl = r.agreement = r.ppl = r.kl_se = NAN;
    }
    for (const auto& [t, a] : acc) r.accuracy[t] = a.first / a.second;
    s.rows.push_back(r);
  }
  return s;
}

nlohmann::json ResultsJson(const EvalRun& run) {
  nlohmann::json j;
  j["format"] = "hqekv-eval-results v1";
  j["suite"] = run.suite;
  j["model"] = run.model;
  j["model_identity"] = run.model_identity;
  j["max_ctx"] = run.max_ctx;
  j["command"] = run.command;
  j["machine"] = run.machine;
  j["threads"] = run.threads;
  j["started_utc"] = run.started_utc;
  j["seconds"] = run.seconds;
  j["cells_reused"] = run.reused;
  j["cells_computed"] = run.computed;
  const Summary s = Summarize(run);
  nlohmann::json verdicts = nlohmann::json::array();
  for (const auto& v : s.verdicts)
    verdicts.push_back({{"task", v.task},
                        {"fp16_accuracy", v.fp16_accuracy},
                        {"chance", v.chance},
                        {"usable", v.usable},
                        {"note", v.note}});
  j["task_verdicts"] = verdicts;
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& c : run.cells) cells.push_back(ToJson(c));
  j["cells"] = cells;
  return j;
}

Result<EvalRun> RunFromJson(const nlohmann::json& j) {
  if (!j.is_object() || j.value("format", "") != "hqekv-eval-results v1")
    return MakeError("not an hqekv results.json (format 'hqekv-eval-results v1' expected)");
  EvalRun r;
  try {
    r.suite = j.value("suite", "");
    r.model = j.value("model", "");
    r.model_identity = j.value("model_identity", "");
    r.max_ctx = j.value("max_ctx", 0);
    r.command = j.value("command", "");
    r.machine = j.value("machine", "");
    r.threads = j.value("threads", 0);
    r.started_utc = j.value("started_utc", "");
    r.seconds = j.value("seconds", 0.0);
    r.reused = j.value("cells_reused", 0);
    r.computed = j.value("cells_computed", 0);
    if (j.contains("cells")) {
      for (const auto& cj : j.at("cells")) {
        HQEKV_ASSIGN_OR_RETURN(auto c, CellFromJson(cj));
        r.cells.push_back(std::move(c));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return MakeError(std::string("results.json: ") + e.what());
  }
  return r;
}

Status WriteReports(const EvalRun& run, const std::string& dir) {
  const std::pair<std::string, std::string> files[] = {
      {dir + "/results.json",
       ResultsJson(run).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"},
      {dir + "/report.md", ReportMarkdown(run)},
      {dir + "/report.html", ReportHtml(run)},
  };
  for (const auto& [path, text] : files) {
    HQEKV_RETURN_IF_ERROR(WriteFileAtomic(path, text));
  }
  return Status::Ok();
}

}  // namespace hqekv::eval
