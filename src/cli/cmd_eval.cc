// `hqekv eval`: runs an evaluation suite (tasks x KV policies x memory
// budgets, plus memory/speed cells) on one model and writes
// DIR/results.json, DIR/report.md and DIR/report.html. Finished cells are
// cached in DIR/cells/<hash>.json: re-running with the same arguments reuses
// them. `--report-only` rebuilds the three files from DIR/results.json.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli/model_args.h"
#include "eval/report/report_tables.h"
#include "cli/number_flags.h"
#include "cli/registry.h"
#include "core/parallel.h"
#include "eval/run/engine_model.h"
#include "eval/run/harness.h"
#include "eval/report/report.h"
#include "eval/run/suite.h"
#include "policy/factory.h"

namespace hqekv::cli::cmd_eval {
namespace {
namespace fs = std::filesystem;

constexpr const char* kMarker = ".hqekv-eval";

struct EvalArgs {
  std::string model, suite = "quick", out, bits;
  std::vector<std::string> kv;
  int seeds = 0, ctx = 0, threads = 0;
  bool force = false, fresh = false, no_progress = false, report_only = false, paired_seeds = false;
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "hqekv eval: error: %s\n", msg.c_str());
  return 1;
}

// The folder holding data/text/ (the repository, or the installed
// share/hqekv/): eval's task texts are read under it.
std::string SourceRoot() {
  const fs::path text = BundledPath("data/text");
  std::error_code ec;
  if (!fs::is_directory(text, ec)) return ".";
  const std::string root = text.parent_path().parent_path().string();
  return root.empty() ? "." : root;
}

// Prepares DIR: an existing hqekv eval dir is resumed; any other existing
// non-empty path is refused unless --force.
Status PrepareDir(const std::string& dir, bool force) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec))
      return MakeError("-o '" + dir + "' exists and is not a directory");
    const bool ours = fs::exists(fs::path(dir) / kMarker, ec);
    if (!ours && !fs::is_empty(dir, ec) && !force)
      return MakeError("-o '" + dir +
                       "' exists and is not an hqekv eval directory; use --force to write into it");
  }
  fs::create_directories(fs::path(dir) / "cells", ec);
  if (ec) return MakeError("cannot create '" + dir + "': " + ec.message());
  return WriteFileAtomic((fs::path(dir) / kMarker).string(),
                         "hqekv eval output directory (cells/ holds cached results)\n");
}

std::string CommandLine(const EvalArgs& a) {
  std::ostringstream o;
  o << "hqekv eval";
  if (!a.model.empty()) o << " -m " << a.model;
  o << " --suite " << a.suite;
  for (const auto& k : a.kv) o << " --kv " << k;
  if (!a.bits.empty()) o << " --bits " << a.bits;
  if (a.seeds) o << " --seeds " << a.seeds;
  if (a.paired_seeds) o << " --paired-seeds";
  if (a.ctx) o << " --ctx " << a.ctx;
  if (a.threads) o << " -t " << a.threads;
  o << " -o " << a.out;
  return o.str();
}

int ReportOnly(const EvalArgs& a) {
  const std::string results = (fs::path(a.out) / "results.json").string();
  std::error_code ec;
  if (!fs::exists(results, ec)) return Fail("no results.json in '" + a.out + "'");
  auto text = ReadFileChecked(results, kMaxJsonFileBytes);
  if (!text.ok()) return Fail(text.message());
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return Fail("'" + a.out + "/results.json' is not valid JSON");
  auto run = eval::RunFromJson(j);
  if (!run.ok()) return Fail(run.message());
  if (auto st = eval::WriteReports(*run, a.out); !st.ok()) return Fail(st.message());
  // The answer and the ranking on the terminal; the rest is in the report.
  const eval::Summary summary = eval::Summarize(*run);
  std::printf("%s\n\n%s\n", eval::Answer(summary).c_str(), eval::RankingText(summary).c_str());
  std::printf("rewrote %s/report.md and %s/report.html\n", a.out.c_str(), a.out.c_str());
  return 0;
}

int Eval(EvalArgs a) {
  if (a.out.empty()) a.out = "eval-" + a.suite;
  if (a.report_only) return ReportOnly(a);
  if (a.seeds < 0 || a.ctx < 0 || a.threads < 0) return Fail("--seeds, --ctx and -t must be >= 0");
  if (Status st = CheckThreads(a.threads); !st.ok()) return Fail(st.message());
  if (a.threads > 0) SetNumThreads(a.threads);
  std::vector<double> budgets;
  if (!a.bits.empty()) {
    auto b = eval::ParseBudgets(a.bits);
    if (!b.ok()) return Fail(b.message());
    budgets = *b;
  }
  const std::string root = SourceRoot();
  // Default: the bundled refmodel-4l (head_dim 64), where compressed caches
  // are as small as on real models (stories260K's head_dim 8 makes every
  // quantized cache look big); $HQEKV_MODEL and -m win.
  const std::string path = ModelPathOrDefault(a.model, "models/refmodel-4l.gguf");
  auto model = eval::EngineModel::Load(path, a.ctx);
  if (!model.ok()) return Fail(model.message());
  if (Status st = CheckContext(a.ctx, (*model)->source().config); !st.ok())
    return Fail(st.message());
  auto suite = eval::MakeSuite(a.suite, (*model)->TrainedContext(), a.kv, budgets, a.seeds);
  if (!suite.ok()) return Fail(suite.message());
  suite->paired_seeds = a.paired_seeds;
  // Every cache is created for this model: a calibration profile (hqekv:profile=FILE) must have
  // been made for it. Checked for every policy before any cell runs (a spec that does not parse
  // is left to the run, which names it).
  const ModelSource& src = (*model)->source();
  const policy::CacheContext for_model =
      policy::ForModel(src.config.name, src.identity, src.config.n_layers);
  for (const auto& p : suite->policies) {
    auto spec = policy::ParseSpec(p.spec);
    if (!spec.ok()) continue;
    if (auto st = policy::CheckSpecForModel(*spec, for_model); !st.ok()) {
      return Fail("--kv " + p.spec + ": " + st.message());
    }
  }
  auto make_cache = [&for_model](const std::string& text,
                                 const KvGeometry& g) -> Result<std::unique_ptr<KvCache>> {
    HQEKV_ASSIGN_OR_RETURN(const policy::PolicySpec spec, policy::ParseSpec(text));
    return policy::CreateCache(spec, g, for_model);
  };
  if (auto st = PrepareDir(a.out, a.force); !st.ok()) return Fail(st.message());

  eval::EvalOptions opt;
  opt.out_dir = a.out;
  opt.text_root = root;
  opt.fresh = a.fresh;
  opt.progress = !a.no_progress;
  std::fprintf(
      stderr,
      "hqekv eval: %s, suite %s: %zu tasks x %zu policies + %zu speed contexts, %d threads\n",
      (*model)->Name().c_str(), a.suite.c_str(), suite->tasks.size(), suite->policies.size(),
      suite->speed.contexts.size(), NumThreads());
  auto run = eval::RunEval(**model, *suite, opt, make_cache);
  if (!run.ok()) return Fail(run.message());
  run->command = CommandLine(a);
  if (auto st = eval::WriteReports(*run, a.out); !st.ok()) return Fail(st.message());
  // The answer and the ranking on the terminal; the rest is in the report.
  const eval::Summary summary = eval::Summarize(*run);
  std::printf("%s\n\n%s\n", eval::Answer(summary).c_str(), eval::RankingText(summary).c_str());
  std::printf(
      "%d cells (%d computed, %d reused) in %.1f s\nwrote %s/results.json, %s/report.md, "
      "%s/report.html\n",
      static_cast<int>(run->cells.size()), run->computed, run->reused, run->seconds, a.out.c_str(),
      a.out.c_str(), a.out.c_str());
  int failed = 0;
  for (const auto& c : run->cells) failed += !c.error.empty();
  if (failed) std::printf("%d cells could not run (listed in the report)\n", failed);
  return 0;
}

const CommandRegistrar kRegistrar(70, [](CLI::App& app, int* rc) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand("eval",
                                     "Evaluate KV policies: quality vs true memory on retrieval, "
                                     "copy and language-modelling tasks");
  cmd->add_option("-m,--model", args->model,
                  "model file (default: $HQEKV_MODEL, else the bundled models/refmodel-4l.gguf)");
  cmd->add_option("--suite", args->suite, "quick | standard | paper")
      ->check(CLI::IsMember({"quick", "standard", "paper"}));
  cmd->add_option("--kv", args->kv,
                  "policy spec (repeatable); a bare eviction/hybrid family runs at every --bits");
  cmd->add_option("--bits", args->bits, "memory budgets in bits per element, e.g. 2,3.2,4");
  cmd->add_option("-o,--out", args->out, "output directory (default eval-<suite>)");
  cmd->add_option("--seeds", args->seeds, "instances per task configuration (default: suite's)")
      ->check(IntFlag(0, 1 << 20));
  cmd->add_flag("--paired-seeds", args->paired_seeds,
                "paired design: instance i is the same in every configuration (default: "
                "independent instances, seeds mixed with the task configuration)");
  cmd->add_option("--ctx", args->ctx, "context the model is trusted with (default: the model's)")
      ->check(IntFlag(0, std::numeric_limits<int>::max()));
  cmd->add_option("-t,--threads", args->threads, "threads (default: all cores)");
  cmd->add_flag("--force", args->force,
                "write into an existing directory that is not an hqekv eval directory");
  cmd->add_flag("--fresh", args->fresh, "recompute every cell (ignore DIR/cells)");
  cmd->add_flag("--no-progress", args->no_progress, "no progress bar");
  cmd->add_flag("--report-only", args->report_only, "rewrite report.md/html from DIR/results.json");
  cmd->callback([args, rc] { *rc = Eval(*args); });
});

}  // namespace
}  // namespace hqekv::cli::cmd_eval
