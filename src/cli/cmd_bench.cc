// `hqekv bench`: prompt-processing and generation throughput (like
// llama-bench): ppN / tgN at context depths, per --kv spec and thread count,
// mean ± sd over repetitions; markdown table or JSON (lm/bench.h).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/kv_flags.h"
#include "cli/model_args.h"
#include "cli/registry.h"
#include "eval/run/engine_model.h"
#include "lm/bench.h"
#include "model/llama.h"
#include "policy/factory.h"

namespace hqekv::cli::cmd_bench {
namespace {

struct BenchArgs {
  std::string model, output, format = "md";
  lm::BenchConfig config;
  bool fp32_acts = false;
  KvTypeFlags kv_types;  // -ctk / -ctv / --kv-cache-dtype instead of --kv
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "hqekv bench: error: %s\n", msg.c_str());
  return 1;
}

int Bench(BenchArgs a) {
  if (a.format != "md" && a.format != "json") {
    return Fail("-o must be md or json, got '" + a.format + "'");
  }
  for (int& t : a.config.threads) {
    if (Status st = CheckThreads(t); !st.ok()) return Fail(st.message());
    if (t == 0) t = CpuCount();
  }
  if (a.kv_types.Given()) {  // one spec instead of --kv's list
    auto kv = a.kv_types.Resolve("fp16");
    if (!kv.ok()) return Fail(kv.message());
    a.config.kv = {*kv};
  }
  for (const std::string& kv : a.config.kv) {
    if (auto spec = policy::ParseSpec(kv); !spec.ok()) return Fail("--kv " + spec.message());
  }
  const std::string path = ModelPathOrDefault(a.model);
  auto src = LoadModel(path);
  if (!src.ok()) return Fail(src.message());
  auto model = LlamaModel::Create(**src);
  if (!model.ok()) return Fail(model.message());
  kernels::SetInt8Activations(!a.fp32_acts);
  const std::string name = (*src)->config.name.empty() ? path : (*src)->config.name;
  if (!a.config.state_path.empty()) {  // ties the file to these weights, not only the shapes
    auto print = eval::FileFingerprint(path);
    if (!print.ok()) return Fail(print.message());
    a.config.model_identity = (*src)->identity + "-" + *print;
  }
  const int64_t bytes = (*model)->WeightBytesPerToken();
  auto rows = lm::RunBench(
      **model, a.config,
      [](const std::string& spec, const KvGeometry& g) { return MakeKvCache(spec, g); },
      [](const lm::BenchRow& r) {
        std::fprintf(stderr, "  %s t=%d %s d=%d: %.2f ± %.2f t/s\n", r.kv.c_str(), r.threads,
                     r.test.c_str(), r.depth, r.mean, r.sd);
      },
      [](const lm::FillEvent& e) {
        if (!e.loaded_from.empty()) {
          std::fprintf(stderr, "  %s: loaded depth %d from %s in %.1f s (restored for every run)\n",
                       e.kv.c_str(), e.depth, e.loaded_from.c_str(), e.seconds);
          return;
        }
        std::fprintf(stderr, "  %s: filled depth %d in %.1f s (%s)\n", e.kv.c_str(), e.depth,
                     e.seconds,
                     e.reused ? "restored for every run" : "cannot be saved: filled again per run");
        if (!e.saved_to.empty()) std::fprintf(stderr, "  saved to %s\n", e.saved_to.c_str());
      });
  if (!rows.ok()) return Fail(rows.message());
  const std::string text = a.format == "json" ? lm::BenchJson(name, bytes, *rows)
                                              : lm::BenchMarkdown(name, bytes, *rows);
  if (a.output.empty()) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  if (Status st = WriteFileAtomic(a.output, text); !st.ok()) return Fail(st.message());
  return 0;
}

const CommandRegistrar kRegister(14, [](CLI::App& app, int* rc) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Throughput like llama-bench: ppN and tgN at context depths, per KV spec/threads");
  cmd->add_option("-m,--model", a->model, kDefaultModelHelp);
  cmd->add_option("-p,--n-prompt", a->config.pp, "Prompt sizes (comma list; 0 = none)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", a->config.tg, "Generation lengths (comma list; 0 = none)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("-d,--depth", a->config.depths, "Context depths before each test (comma list)")
      ->delimiter(',')
      ->capture_default_str();
  a->kv_types.Add(cmd, cmd->add_option("--kv", a->config.kv,
                                       "KV cache spec; repeat --kv for several (specs contain "
                                       "commas)")
                           ->capture_default_str());
  cmd->add_option("-t,--threads", a->config.threads,
                  "Thread counts (comma list; 0 = all cores, the default)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("-r,--repetitions", a->config.reps, "Repetitions per test")
      ->capture_default_str();
  cmd->add_option("-o,--output-format", a->format, "md or json")->capture_default_str();
  cmd->add_option("--state", a->config.state_path,
                  "KV state file for the one depth > 0 of one --kv spec: loaded instead of "
                  "filling when it exists (it must match the model, spec and depth), else "
                  "written after the fill");
  cmd->add_option("--out", a->output, "Write the table / JSON to this file (default: stdout)");
  cmd->add_flag("--fp32-acts", a->fp32_acts,
                "Keep fp32 activations in every matrix product (no int8 path for quantized "
                "weights, no bf16 path for BF16 weights)");
  cmd->callback([a, rc] { *rc = Bench(*a); });
});

}  // namespace
}  // namespace hqekv::cli::cmd_bench
