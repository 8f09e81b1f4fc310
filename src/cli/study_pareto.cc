#include "cli/study_pareto.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/model_args.h"
#include "core/file.h"
#include "core/hash.h"
#include "eval/study/pareto_report.h"
#include "eval/study/pareto_study.h"

namespace hqekv::cli {
namespace {

namespace fs = std::filesystem;

struct ParetoArgs {
  std::string model, out = "pareto-study";
  std::vector<std::string> texts, specs;
  eval::ParetoProtocol protocol;
  int threads = 0;
  bool fresh = false, report_only = false, list_grid = false;
};

const std::vector<std::string> kDefaultTexts = {"data/text/pg11_alice_in_wonderland.txt",
                                                "data/text/wiki.test.raw",
                                                "data/text/tinystories_val_subset.txt"};

int Fail(const std::string& m) {
  std::fprintf(stderr, "hqekv study pareto: error: %s\n", m.c_str());
  return 2;
}

// The code that computed a cell: FNV-1a 64 of this executable, so that a
// rebuilt binary (new kernels, new policies) never reuses an old number.
std::string CodeVersion() {
  auto bytes = ReadFileChecked("/proc/self/exe", kMaxTextFileBytes);
  char buf[40];
  std::snprintf(buf, sizeof buf, "exe-%016llx",
                bytes.ok() ? static_cast<unsigned long long>(Fnv1a64(*bytes)) : 0ull);
  return buf;
}

// Quotes an argument for a POSIX shell when it needs it.
std::string Quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-.,/:=+") == std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The one-line command that reproduces this run (flags left at their
// defaults are omitted).
std::string CommandLine(const ParetoArgs& a) {
  std::string c = "hqekv study pareto";
  if (!a.model.empty()) c += " -m " + Quote(a.model);
  for (const auto& t : a.texts) c += " -f " + Quote(t);
  for (const auto& s : a.specs) c += " --kv " + Quote(s);
  const eval::ParetoProtocol d;
  if (a.protocol.prefill != d.prefill) c += " --prefill " + std::to_string(a.protocol.prefill);
  if (a.protocol.max_tokens != d.max_tokens)
    c += " --max-tokens " + std::to_string(a.protocol.max_tokens);
  if (a.protocol.ctx != d.ctx) c += " --ctx " + std::to_string(a.protocol.ctx);
  if (a.threads) c += " -t " + std::to_string(a.threads);
  return c + " -o " + Quote(a.out);
}

Status WriteReport(const std::string& dir, const eval::ParetoResults& r) {
  const eval::ParetoReport rep = eval::RenderParetoReport(r);
  HQEKV_RETURN_IF_ERROR(WriteFileAtomic((fs::path(dir) / "report.md").string(), rep.markdown));
  for (const auto& [name, svg] : rep.svgs)
    HQEKV_RETURN_IF_ERROR(WriteFileAtomic((fs::path(dir) / name).string(), svg));
  return Status::Ok();
}

// One plain line per cell when stderr is not a terminal (logs get no \r);
// a one-line progress bar redrawn in place on a terminal.
void Progress(int done, int total, const eval::ParetoCell& c, bool reused) {
  std::string what;
  char buf[160];
  if (!c.error.empty()) {
    what = "not measurable: " + c.error;
  } else {
    std::snprintf(
        buf, sizeof buf, "%.3f bits | KL %.4g | agree %.3f | %s", c.bits, c.kl, c.agree,
        reused ? "cached" : (std::to_string(static_cast<int>(c.seconds + 0.5)) + " s").c_str());
    what = buf;
  }
  if (isatty(fileno(stderr))) {
    constexpr int kBar = 24;
    const int fill = total ? done * kBar / total : kBar;
    std::fprintf(stderr, "\r[%s%s] %d/%d %s\033[K", std::string(fill, '#').c_str(),
                 std::string(kBar - fill, '.').c_str(), done, total, c.spec.c_str());
    if (done == total) std::fprintf(stderr, "\n");
  } else {
    std::fprintf(stderr, "[%d/%d] %s | %s | %s\n", done, total, c.text.c_str(), c.spec.c_str(),
                 what.c_str());
  }
}

int StudyPareto(const ParetoArgs& a) {
  const std::string results_path = (fs::path(a.out) / "results.json").string();
  if (a.report_only) {
    auto r = eval::LoadParetoResults(results_path);
    if (!r.ok()) return Fail("--report-only: " + r.message());
    if (Status st = WriteReport(a.out, *r); !st.ok()) return Fail(st.message());
    std::printf("report: %s\n", (fs::path(a.out) / "report.md").string().c_str());
    return 0;
  }
  if (Status st = ApplyThreads(a.threads); !st.ok()) return Fail(st.message());
  if (Status st = CheckWritable(results_path); !st.ok()) return Fail(st.message());
  std::error_code ec;
  // A report.md with no results.json beside it was not written by a study
  // (a study saves results.json after its first cell, the report at the end):
  // it is the user's, and the run would replace it.
  if (!fs::exists(results_path, ec) && fs::exists(fs::path(a.out) / "report.md", ec)) {
    return Fail(
        "-o '" + a.out +
        "' holds a report.md but no results.json: not a study directory; choose another -o");
  }
  eval::ParetoOptions o;
  o.model = ModelPathOrDefault(a.model);
  if (a.texts.empty()) {
    for (const auto& t : kDefaultTexts) o.texts.push_back(BundledPath(t));
  } else {
    o.texts = a.texts;
  }
  o.grid = a.specs.empty() ? eval::DefaultParetoGrid() : a.specs;
  o.protocol = a.protocol;
  o.code_version = CodeVersion();
  o.command = CommandLine(a);
  o.fresh = a.fresh;
  o.on_cell = Progress;
  std::unique_ptr<eval::ParetoResults> previous;
  if (!a.fresh && fs::exists(results_path, ec)) {
    auto p = eval::LoadParetoResults(results_path);
    if (!p.ok()) return Fail(p.message() + " (remove it or pass --fresh)");
    previous = std::make_unique<eval::ParetoResults>(std::move(*p));
  }
  fs::create_directories(a.out, ec);
  if (ec) return Fail("cannot create '" + a.out + "': " + ec.message());
  auto r = eval::RunParetoStudy(o, previous.get(), [&](const eval::ParetoResults& partial) {
    return eval::SaveParetoResults(results_path, partial);
  });
  if (!r.ok()) return Fail(r.message());
  if (Status st = WriteReport(a.out, *r); !st.ok()) return Fail(st.message());
  std::printf("%zu cells, %zu texts x %zu specs | results: %s | report: %s\n", r->cells.size(),
              r->texts.size(), r->grid.size(), results_path.c_str(),
              (fs::path(a.out) / "report.md").string().c_str());
  return 0;
}

}  // namespace

void AddStudyPareto(CLI::App& study, int* rc) {
  auto a = std::make_shared<ParetoArgs>();
  CLI::App* p = study.add_subcommand(
      "pareto",
      "KL vs true bits of every KV policy family against fp16, on texts: results.json, "
      "report.md (the frontier and the target check) and one SVG plot per text");
  p->add_option("-m,--model", a->model, kDefaultModelHelp);
  p->add_option("-f,--file", a->texts,
                "Text (repeatable; default: data/text/pg11_alice_in_wonderland.txt, "
                "data/text/wiki.test.raw, data/text/tinystories_val_subset.txt)");
  p->add_option("--kv", a->specs,
                "KV spec of the grid (repeatable; default: every policy of `hqekv policies` at "
                "its budgets, see --list-grid)");
  p->add_option("--prefill", a->protocol.prefill, "Prefill length P (tokens)")
      ->capture_default_str();
  p->add_option("--max-tokens", a->protocol.max_tokens, "Tokens of each text used (n - P scored)")
      ->capture_default_str();
  p->add_option("--ctx", a->protocol.ctx, "Cache context (tokens); texts are cut to it")
      ->capture_default_str();
  p->add_option("-t,--threads", a->threads, "Threads (0 = all cores)");
  p->add_option("-o,--out", a->out, "Output directory (results.json, report.md, *.svg)")
      ->capture_default_str();
  p->add_flag("--fresh", a->fresh, "Recompute every cell (ignore results.json)");
  p->add_flag("--report-only", a->report_only,
              "Regenerate report.md and the SVGs from results.json, computing nothing");
  p->add_flag("--list-grid", a->list_grid, "Print the default grid and exit");
  p->callback([a, rc] {
    if (a->list_grid) {
      for (const auto& s : eval::DefaultParetoGrid()) std::printf("%s\n", s.c_str());
      *rc = 0;
      return;
    }
    *rc = StudyPareto(*a);
  });
}

}  // namespace hqekv::cli
