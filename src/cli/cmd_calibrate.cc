// `hqekv calibrate`: offline TPE search of HqeKV tier ratios for a memory
// budget, saved as a profile (docs/calibration.md). With --score SPEC it
// instead prints KL(full || SPEC) and the true bits of any cache spec on the
// text (no search): how profiles are compared on evaluation texts. With
// --layer-bits it measures each layer's K and V sensitivity and prints the
// `layer_bits=` offsets for hqekv:bits=B (calib/layer_bits.h).
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include "calib/layer_bits.h"
#include "calib/lm_scorer.h"
#include "calib/profile.h"
#include "calib/search.h"
#include "cli/model_args.h"
#include "cli/number_flags.h"
#include "cli/registry.h"
#include "core/parallel.h"
#include "io/model_source.h"

namespace hqekv::cli::cmd_calibrate {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void OnSigint(int) { g_stop = true; }

struct CalibrateArgs {
  std::string model;  // "" = the default model (core/file.h)
  std::string text = "data/text/wiki.valid.raw";
  std::string out;
  double bits = NAN;
  int trials = 200;
  int64_t tokens = 16384;
  uint64_t seed = 0;
  std::string bits_mode = "true";
  double alpha = 2, beta = 4;
  bool per_layer = false;
  bool force = false;
  int window = 0, prefill = 0;
  std::string reference = "fp16";
  std::string kv_options;
  double bits_tolerance = 0.05;
  int threads = 0;
  std::vector<std::string> score;
  bool layer_bits = false;
  std::string layer_probe = "q5_1";
  double layer_shrink = 0.5, layer_max = 0.6;
  bool quiet = false;
};

std::string Duration(double s) {
  char buf[32];
  if (!std::isfinite(s) || s < 0) return "?";
  const int t = static_cast<int>(s + 0.5);
  if (t >= 60) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", t / 60, t % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ds", t);
  }
  return buf;
}

int RunCalibrate(const CalibrateArgs& a) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  if (Status st = CheckThreads(a.threads); !st.ok()) {
    std::fprintf(stderr, "hqekv calibrate: %s\n", st.message().c_str());
    return 2;
  }
  if (a.threads > 0) SetNumThreads(a.threads);
  if (a.score.empty() && !a.layer_bits) {
    if (!std::isfinite(a.bits)) {
      std::fprintf(stderr, "hqekv calibrate: --bits is required (the memory budget)\n");
      return 2;
    }
    if (a.out.empty()) {
      std::fprintf(stderr, "hqekv calibrate: -o PROFILE is required\n");
      return 2;
    }
    std::error_code ec;
    if (!a.force && std::filesystem::exists(a.out, ec)) {
      std::fprintf(stderr, "hqekv calibrate: %s exists; pass --force to overwrite it\n",
                   a.out.c_str());
      return 1;
    }
    // Before the search, not after it: an unwritable -o fails in a second.
    if (Status st = CheckWritable(a.out); !st.ok()) {
      std::fprintf(stderr, "hqekv calibrate: -o: %s\n", st.message().c_str());
      return 1;
    }
  }
  const std::string model_path =
      a.model.empty() ? ModelPathOrDefault(a.model) : BundledPath(a.model);
  const std::string text_path = BundledPath(a.text);
  auto text_or = ReadTextFile(text_path);
  if (!text_or.ok()) {
    std::fprintf(stderr, "hqekv calibrate: %s\n", text_or.message().c_str());
    return 1;
  }
  const std::string& text = *text_or;
  auto model = LoadModel(model_path);
  if (!model.ok()) {
    std::fprintf(stderr, "hqekv calibrate: %s\n", model.message().c_str());
    return 1;
  }
  const ModelSource& src = **model;

  calib::LmScorerOptions so;
  so.tokens = a.tokens;
  so.window = a.window;
  so.prefill = a.prefill;
  so.reference = a.reference;
  so.kv_options = a.kv_options;
  auto scorer = calib::LmScorer::Create(src, text, so);
  if (!scorer.ok()) {
    std::fprintf(stderr, "hqekv calibrate: %s\n", scorer.message().c_str());
    return 1;
  }
  calib::LmScorer& sc = **scorer;
  const double t_ref = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!a.quiet) {
    std::fprintf(
        stderr,
        "model %s (identity %s), text %s: %d windows of %d tokens (prefill %d), %lld scored "
        "positions; reference (%s) in %.1fs\n",
        src.config.name.c_str(), src.identity.c_str(), text_path.c_str(),
        static_cast<int>(sc.tokens_used() / sc.window()), sc.window(), sc.prefill(),
        static_cast<long long>(sc.scored_positions()), a.reference.c_str(), t_ref);
  }

  if (!a.score.empty()) {
    std::printf("%-60s %12s %10s %8s\n", "spec", "kl", "true_bits", "seconds");
    for (const std::string& spec : a.score) {
      const auto ts = Clock::now();
      // The caches are created for this model: a profile must match it.
      auto s = sc.ScoreSpec(spec);
      if (!s.ok()) {
        std::fprintf(stderr, "hqekv calibrate: %s: %s\n", spec.c_str(), s.message().c_str());
        return 1;
      }
      std::printf("%-60s %12.6f %10.4f %8.1f\n", spec.c_str(), s->kl, s->true_bits,
                  std::chrono::duration<double>(Clock::now() - ts).count());
      std::fflush(stdout);
    }
    return 0;
  }

  if (a.layer_bits) {
    if (!a.quiet) {
      std::fprintf(stderr, "measuring %d probes (one layer's K or V in %s, the rest u8)...\n",
                   2 * sc.n_layers() + 1, a.layer_probe.c_str());
    }
    auto sens = calib::MeasureLayerSensitivity(sc, a.layer_probe, a.kv_options);
    if (!sens.ok()) {
      std::fprintf(stderr, "hqekv calibrate: --layer-bits: %s\n", sens.message().c_str());
      return 1;
    }
    const std::vector<double> d =
        calib::LayerBitsFromSensitivity(*sens, a.layer_shrink, a.layer_max);
    std::printf("KL with every stream at u8: %.4e\n%-6s %12s %12s %9s\n", sens->floor, "layer",
                ("K " + a.layer_probe).c_str(), ("V " + a.layer_probe).c_str(), "offset");
    for (size_t l = 0; l < d.size(); ++l) {
      std::printf("%-6zu %12.4e %12.4e %+9.2f\n", l, sens->k[l], sens->v[l], d[l]);
    }
    std::printf("layer_bits=%s\n", calib::LayerBitsText(d).c_str());
    return 0;
  }

  calib::CalibOptions co;
  co.budget = a.bits;
  co.nominal = a.bits_mode == "nominal";
  co.trials = a.trials;
  co.seed = a.seed;
  co.alpha = a.alpha;
  co.beta = a.beta;
  co.per_layer = a.per_layer;
  co.bits_tolerance = a.bits_tolerance;

  const bool tty = isatty(fileno(stderr));
  auto t_search = Clock::now();
  auto progress = [&](const calib::CalibProgress& p) {
    if (a.quiet) return;
    if (p.measuring_costs) {
      std::fprintf(stderr, "measuring tier costs (4 pure-tier runs)...\n");
      return;
    }
    if (p.trial == 1) t_search = Clock::now();
    const double el = std::chrono::duration<double>(Clock::now() - t_search).count();
    const double eta = p.trial > 1 ? el / (p.trial - 1) * (p.n_trials - p.trial) : NAN;
    if (tty || p.trial % 10 == 0 || p.trial == p.n_trials) {
      std::fprintf(stderr, "%strial %d/%d  best loss %s  elapsed %s  ETA %s%s", tty ? "\r" : "",
                   p.trial, p.n_trials,
                   std::isfinite(p.best) ? std::to_string(p.best).c_str() : "none yet",
                   Duration(el).c_str(), Duration(eta).c_str(), tty ? "   " : "\n");
    }
  };
  g_stop = false;
  auto old_handler = std::signal(SIGINT, OnSigint);
  auto prof = calib::Calibrate(sc, co, progress, &g_stop);
  std::signal(SIGINT, old_handler);
  if (tty && !a.quiet) std::fprintf(stderr, "\n");
  if (!prof.ok()) {
    std::fprintf(stderr, "hqekv calibrate: %s\n", prof.message().c_str());
    return 1;
  }
  if (g_stop) {
    std::fprintf(stderr, "interrupted: writing the best of the %d trials done\n", prof->trials);
  }
  prof->model_name = src.config.name;
  prof->model_identity = src.identity;
  prof->calib_text = a.text;
  prof->kv_options = a.kv_options;
  prof->calib_hash = calib::TextHash(text);
  prof->calib_tokens = sc.tokens_used();
  prof->window = sc.window();
  prof->prefill = sc.prefill();
  Status st = policy::SaveProfile(*prof, a.out, a.force);
  if (!st.ok()) {
    std::fprintf(stderr, "hqekv calibrate: %s\n", st.message().c_str());
    return 1;
  }
  const double total = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("profile %s: ratios r4/r2/r1/r0 = %s%s\n", a.out.c_str(),
              calib::RatiosText(prof->ratios).c_str(),
              prof->per_layer.empty() ? "" : " (layer mean)");
  for (size_t l = 0; l < prof->per_layer.size(); ++l) {
    std::printf("  layer %zu: %s\n", l, calib::RatiosText(prof->per_layer[l]).c_str());
  }
  std::printf(
      "loss %.6f = KL %.6f + %.3g r1 + %.3g r0; true bits %.4f (budget %g %s); %d trials, %s\n",
      prof->loss, prof->kl, a.alpha, a.beta, prof->achieved_true_bits, a.bits, a.bits_mode.c_str(),
      prof->trials, Duration(total).c_str());
  return g_stop ? 130 : 0;
}

const CommandRegistrar kRegistrar(60, [](CLI::App& app, int* rc) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* c = app.add_subcommand("calibrate",
                                   "TPE search of HqeKV tier ratios for a memory budget on a "
                                   "calibration text; writes a profile");
  c->add_option("-m,--model", args->model, kDefaultModelHelp);
  c->add_option("-f,--file", args->text, "calibration text (disjoint from evaluation texts)")
      ->capture_default_str();
  // Checked at parse time, before any work: `--bits nan` is not "missing", and
  // `--trials 0` / `--tokens 0` are refused instead of failing late or meaning 512.
  c->add_option("--bits", args->bits, "memory budget in bits per element (see --bits-mode)")
      ->check(RealFlag({.min = 0, .max = 64, .min_open = true}));
  c->add_option("--trials", args->trials, "TPE trials (infeasible ones count)")
      ->check(IntFlag(1, 1000000))
      ->capture_default_str();
  c->add_option("--tokens", args->tokens, "calibration tokens (whole windows)")
      ->check(IntFlag(1, int64_t{1} << 31))
      ->capture_default_str();
  c->add_option("-o,--output", args->out, "profile JSON to write");
  c->add_option("--seed", args->seed, "TPE seed (runs are reproducible)")->capture_default_str();
  c->add_option(
       "--bits-mode", args->bits_mode,
       "true: every byte of the cache counted per original element; nominal: 4 r4 + 2 r2 + r1")
      ->check(CLI::IsMember({"true", "nominal"}))
      ->capture_default_str();
  c->add_option("--alpha", args->alpha, "loss weight of the 1-bit ratio")
      ->check(RealFlag({.min = 0, .max = 1e6}))
      ->capture_default_str();
  c->add_option("--beta", args->beta, "loss weight of the evicted ratio")
      ->check(RealFlag({.min = 0, .max = 1e6}))
      ->capture_default_str();
  c->add_flag("--per-layer", args->per_layer, "search layer-wise ratios (depth tilt and slope)");
  c->add_flag("--force", args->force, "overwrite an existing profile");
  c->add_option("--window", args->window, "tokens per window (default min(512, context))")
      ->check(IntFlag(0, std::numeric_limits<int>::max()));
  c->add_option("--prefill", args->prefill, "prefilled tokens per window (default window/2)")
      ->check(IntFlag(0, std::numeric_limits<int>::max()));
  c->add_option("--reference", args->reference, "reference cache spec")->capture_default_str();
  c->add_option("--kv-options", args->kv_options,
                "extra hqekv keys for every trial, e.g. m=20,fp16_chunks=2");
  c->add_option("--bits-tolerance", args->bits_tolerance,
                "reject trials whose measured true bits exceed the budget by more")
      ->check(RealFlag({.min = 0, .max = 64}))
      ->capture_default_str();
  c->add_option("-t,--threads", args->threads, "worker threads (default: all cores)");
  c->add_option("--score", args->score,
                "no search: print KL and true bits of these cache specs on the text");
  c->add_flag("--layer-bits", args->layer_bits,
              "no search: measure each layer's K and V sensitivity and print the layer_bits= "
              "offsets for hqekv:bits=B");
  c->add_option("--layer-probe", args->layer_probe,
                "--layer-bits: the format one probed stream is held in (the rest u8)")
      ->capture_default_str();
  c->add_option("--layer-shrink", args->layer_shrink,
                "--layer-bits: share of the rate-distortion split 1/2 log2(s_l / geomean s)")
      ->check(RealFlag({.min = 0, .max = 4}))
      ->capture_default_str();
  c->add_option("--layer-max", args->layer_max, "--layer-bits: largest offset, in bits")
      ->check(RealFlag({.min = 0, .max = 8}))
      ->capture_default_str();
  c->add_flag("-q,--quiet", args->quiet, "no progress output");
  c->callback([args, rc] { *rc = RunCalibrate(*args); });
});

}  // namespace
}  // namespace hqekv::cli::cmd_calibrate
