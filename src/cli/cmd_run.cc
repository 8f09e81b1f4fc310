// `hqekv run`: generate text with a model and a (possibly compressed) KV
// cache, streaming it to stdout; one summary line on stderr at the end.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "cache/kv_report.h"
#include "cli/model_args.h"
#include "cli/registry.h"
#include "model/generate.h"
#include "model/llama.h"
#include "model/sampler.h"
#include "policy/factory.h"

namespace hqekv::cli {
namespace {

struct RunArgs {
  std::string model, prompt, prompt_file, tokenizer, kv = "fp16";
  bool kv_report = false;
  int n = 256, threads = 0, ctx = 0;
  SamplerConfig sampler{0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 0};
};

int Run(const RunArgs& a) {
  ApplyThreads(a.threads);
  std::string prompt = a.prompt;
  if (!a.prompt_file.empty()) {
    auto text = ReadTextFile(a.prompt_file);
    if (!text.ok()) {
      std::fprintf(stderr, "hqekv run: error: %s\n", text.message().c_str());
      return 1;
    }
    prompt = std::move(text).value();
  }
  if (a.n < 0) {
    std::fprintf(stderr, "hqekv run: error: -n must be >= 0, got %d\n", a.n);
    return 1;
  }
  auto sampler = Sampler::Create(a.sampler);
  if (!sampler.ok()) {
    std::fprintf(stderr, "hqekv run: error: %s\n", sampler.message().c_str());
    return 1;
  }
  const std::string path = ModelPathOrDefault(a.model);
  auto src = LoadModel(path, a.tokenizer);
  if (!src.ok()) {
    std::fprintf(stderr, "hqekv run: error: %s\n", src.message().c_str());
    return 1;
  }
  auto model = LlamaModel::Create(**src);
  if (!model.ok()) {
    std::fprintf(stderr, "hqekv run: error: %s\n", model.message().c_str());
    return 1;
  }
  const ModelConfig& c = (*src)->config;
  if (a.ctx < 0) {
    std::fprintf(stderr, "hqekv run: error: --ctx must be > 0, got %d\n", a.ctx);
    return 1;
  }
  const int ctx = a.ctx > 0 ? a.ctx : std::min(c.max_ctx, 4096);
  auto spec = policy::ParseSpec(a.kv);
  if (!spec.ok()) {
    std::fprintf(stderr, "hqekv run: error: --kv: %s\n", spec.message().c_str());
    return 1;
  }
  // Created for this model: a calibration profile must have been made for it.
  auto cache = policy::CreateCache(*spec, (*model)->CacheGeometry(ctx),
                                   policy::ForModel(c.name, (*src)->identity, c.n_layers));
  if (!cache.ok()) {
    std::fprintf(stderr, "hqekv run: error: --kv: %s\n", cache.message().c_str());
    return 1;
  }
  const Tokenizer& tok = *(*src)->tokenizer;
  std::vector<int32_t> ids = tok.Encode(prompt, tok.add_bos() || prompt.empty());
  if (ids.empty()) {
    std::fprintf(stderr, "hqekv run: error: empty prompt and the model's tokenizer has no BOS token\n");
    return 1;
  }
  if (static_cast<int>(ids.size()) >= ctx) {
    std::fprintf(stderr, "hqekv run: error: the prompt has %zu tokens, more than the context of %d allows "
                 "(use a larger --ctx or a shorter prompt)\n", ids.size(), ctx);
    return 1;
  }
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  GenerateOptions opt;
  opt.max_new = a.n;
  opt.is_eog = [&tok](int32_t t) { return tok.IsEndOfGeneration(t); };
  int32_t prev = ids.back();
  auto r = Generate(**model, **cache, ids, *sampler, opt, [&](int32_t t) {
    const std::string piece = tok.DecodePiece(prev, t);
    prev = t;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!r.ok()) {
    std::fprintf(stderr, "hqekv run: error: %s\n", r.message().c_str());
    return 1;
  }
  const KvStats st = (*cache)->Stats();
  const int decoded_steps = std::max<int>(0, static_cast<int>(r->tokens.size()) - 1);
  std::fprintf(stderr,
               "[hqekv run] %s | kv %s | prompt %d tok, generated %zu tok%s | prefill %.1f tok/s, decode %.1f tok/s "
               "| %s (%lld bytes held, %.3f true bits per kept element)\n",
               c.name.c_str(), (*cache)->Describe().c_str(), r->prompt_tokens, r->tokens.size(),
               r->hit_context_end ? " (context full)" : "",
               r->prefill_seconds > 0 ? r->prompt_tokens / r->prefill_seconds : 0.0,
               r->decode_seconds > 0 && decoded_steps > 0 ? decoded_steps / r->decode_seconds : 0.0,
               MemorySummary(st).c_str(), static_cast<long long>(st.bytes.total()), st.true_bits());
  const std::string note = (*cache)->BudgetNote();
  if (!note.empty()) std::fprintf(stderr, "[hqekv run] note: %s\n", note.c_str());
  if (a.kv_report) std::fputs(FormatKvReport(st).c_str(), stderr);
  return 0;
}

const CommandRegistrar kRegister(10, [](CLI::App& app, int* rc) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text (streams to stdout; a summary line on stderr)");
  cmd->add_option("-m,--model", a->model, kDefaultModelHelp);
  auto* p = cmd->add_option("-p,--prompt", a->prompt, "Prompt text (default: empty, generate from BOS)");
  cmd->add_option("-f,--file", a->prompt_file, "Read the prompt from a file")->excludes(p);
  cmd->add_option("-n,--n-predict", a->n, "Tokens to generate")->capture_default_str();
  cmd->add_option("--temp", a->sampler.temperature, "Temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", a->sampler.top_k, "Top-k (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", a->sampler.top_p, "Top-p / nucleus (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", a->sampler.min_p, "Min-p (0 = off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", a->sampler.repeat_penalty, "Repetition penalty (1 = off)")->capture_default_str();
  cmd->add_option("--seed", a->sampler.seed, "Sampling seed")->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "Threads (0 = all cores)");
  cmd->add_option("--ctx", a->ctx, "Context length of the KV cache (default: the model's, at most 4096)");
  cmd->add_option("--kv", a->kv, "KV cache policy spec")->capture_default_str();
  cmd->add_flag("--kv-report", a->kv_report, "Print per-layer tier histograms and bytes of the KV cache at the end");
  cmd->add_option("--tokenizer", a->tokenizer, "llama2.c tokenizer.bin (llama2.c checkpoints only)");
  cmd->callback([a, rc] { *rc = Run(*a); });
});

}  // namespace
}  // namespace hqekv::cli
