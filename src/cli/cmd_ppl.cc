// `hqekv ppl`: perplexity of a text file.
//   Plain mode: sliding windows of --ctx tokens every --stride tokens, each
//   window one batch through an fp16 cache.
//   Comparison mode (--kv SPEC): the first --max-tokens (<= --ctx) tokens run
//   the prefill-then-teacher-force protocol (lm/lm_compare.h) once with the
//   --ref cache and once with SPEC: perplexity of both, KL(ref || SPEC),
//   top-1 agreement and the true bits of SPEC's cache.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "cache/kv_report.h"
#include "cli/model_args.h"
#include "cli/registry.h"
#include "model/llama.h"
#include "lm/lm_compare.h"
#include "policy/factory.h"

namespace hqekv::cli {
namespace {

struct PplArgs {
  std::string model, text, tokenizer, kv, ref = "fp16";
  int ctx = 0, stride = 0, prefill = 0, threads = 0, ref_top_k = -1;
  int64_t max_tokens = 0;
  bool kv_report = false;
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "hqekv ppl: error: %s\n", msg.c_str());
  return 1;
}

int Ppl(const PplArgs& a) {
  if (Status st = ApplyThreads(a.threads); !st.ok()) return Fail(st.message());
  auto text_or = ReadTextFile(a.text);
  if (!text_or.ok()) return Fail(text_or.message());
  const std::string& text = *text_or;
  if (a.ctx < 0 || a.stride < 0 || a.prefill < 0 || a.max_tokens < 0) {
    return Fail("--ctx, --stride, --prefill and --max-tokens must be >= 0");
  }
  const std::string path = ModelPathOrDefault(a.model);
  auto src = LoadModel(path, a.tokenizer);
  if (!src.ok()) return Fail(src.message());
  auto model = LlamaModel::Create(**src);
  if (!model.ok()) return Fail(model.message());
  const ModelConfig& c = (*src)->config;
  if (Status st = CheckContext(a.ctx, c); !st.ok()) return Fail(st.message());
  const int ctx = a.ctx > 0 ? a.ctx : std::min(c.max_ctx, 512);
  const Tokenizer& tok = *(*src)->tokenizer;
  std::vector<int32_t> ids = tok.Encode(text, tok.bos() >= 0);
  if (a.max_tokens > 0 && static_cast<int64_t>(ids.size()) > a.max_tokens) ids.resize(a.max_tokens);
  if (ids.size() < 2) return Fail("'" + a.text + "' has fewer than 2 tokens");

  if (a.kv.empty()) {
    auto cache = MakeKvCache("fp16", (*model)->CacheGeometry(ctx));
    if (!cache.ok()) return Fail(cache.message());
    auto r = lm::SlidingPerplexity(**model, **cache, ids, ctx, a.stride);
    if (!r.ok()) return Fail(r.message());
    std::printf(
        "model %s | text %s | %zu tokens | ctx %d stride %d | %d windows, %d tokens scored\n",
        c.name.c_str(), a.text.c_str(), ids.size(), ctx, a.stride > 0 ? a.stride : ctx, r->windows,
        r->scored);
    std::printf("perplexity %.4f (mean NLL %.4f nats/token, %.1f s, %.0f tok/s)\n", r->ppl, r->nll,
                r->seconds, r->seconds > 0 ? r->scored / r->seconds : 0.0);
    return 0;
  }

  if (static_cast<int>(ids.size()) > ctx) ids.resize(ctx);
  const int n = static_cast<int>(ids.size());
  const int prefill = a.prefill > 0 ? a.prefill : n / 2;
  if (prefill >= n) {
    return Fail("--prefill " + std::to_string(prefill) + " leaves nothing to score in " +
                std::to_string(n) + " tokens (the text, cut to --ctx / --max-tokens)");
  }
  auto ref_spec = policy::ParseSpec(a.ref);
  if (!ref_spec.ok()) return Fail("--ref: " + ref_spec.message());
  auto kv_spec = policy::ParseSpec(a.kv);
  if (!kv_spec.ok()) return Fail("--kv: " + kv_spec.message());
  // Created for this model: calibration profiles must have been made for it.
  const policy::CacheContext for_model = policy::ForModel(c.name, (*src)->identity, c.n_layers);
  auto ref_cache = policy::CreateCache(*ref_spec, (*model)->CacheGeometry(ctx), for_model);
  if (!ref_cache.ok()) return Fail("--ref: " + ref_cache.message());
  auto test_cache = policy::CreateCache(*kv_spec, (*model)->CacheGeometry(ctx), for_model);
  if (!test_cache.ok()) return Fail("--kv: " + test_cache.message());
  // Exact KL (whole vocabulary) unless that would store > 64M values.
  int top_k = a.ref_top_k;
  if (top_k < 0) top_k = static_cast<int64_t>(c.vocab_size) * (n - prefill) <= (64 << 20) ? 0 : 256;
  auto ref = lm::ComputeReference(**model, **ref_cache, ids, prefill, top_k);
  if (!ref.ok()) return Fail(ref.message());
  auto s = lm::ScoreAgainstReference(**model, **test_cache, *ref);
  if (!s.ok()) return Fail(s.message());
  std::printf("model %s | text %s | %d tokens: prefill %d, scored %d | ref %s, test %s\n",
              c.name.c_str(), a.text.c_str(), n, prefill, s->scored,
              (*ref_cache)->Describe().c_str(), (*test_cache)->Describe().c_str());
  std::printf(
      "ppl ref %.4f | ppl test %.4f | KL(ref||test) %.6f nats/token%s | top-1 agreement %.4f\n",
      ref->Perplexity(), s->ppl, s->kl, ref->top_k < ref->vocab ? " (top-k bound)" : "",
      s->top1_agree);
  // Bits per original element (every byte held x 8 / K and V elements of
  // every token fed): the figure `calibrate` and `eval` report for the same
  // state; true bits per KEPT element in brackets.
  std::printf(
      "test KV after prefill: %s (%lld bytes, %.3f true bits per kept element) | "
      "at end: %s (%lld bytes, %.3f true bits per kept element)\n",
      MemorySummary(s->stats_after_prefill).c_str(),
      static_cast<long long>(s->stats_after_prefill.bytes.total()),
      s->stats_after_prefill.true_bits(), MemorySummary(s->stats_end).c_str(),
      static_cast<long long>(s->stats_end.bytes.total()), s->stats_end.true_bits());
  const std::string note = (*test_cache)->BudgetNote();
  if (!note.empty()) std::printf("note: %s\n", note.c_str());
  if (a.kv_report) {
    std::printf("after prefill (peak of the prefill):\n%s",
                FormatKvReport(s->stats_after_prefill).c_str());
    std::printf("at end:\n%s", FormatKvReport(s->stats_end).c_str());
  }
  return 0;
}

const CommandRegistrar kRegister(11, [](CLI::App& app, int* rc) {
  auto a = std::make_shared<PplArgs>();
  CLI::App* cmd = app.add_subcommand(
      "ppl", "Perplexity of a text; with --kv, compare a KV policy against a reference");
  cmd->add_option("-m,--model", a->model, kDefaultModelHelp);
  cmd->add_option("-f,--file", a->text, "Text file")->required();
  cmd->add_option("--ctx", a->ctx,
                  "Window / context length in tokens (default: min(model context, 512))");
  cmd->add_option("--stride", a->stride, "Window start every S tokens (default: --ctx)");
  cmd->add_option("--kv", a->kv, "Comparison mode: KV policy spec to score");
  cmd->add_option("--ref", a->ref, "Comparison mode: reference KV spec")->capture_default_str();
  cmd->add_option("--prefill", a->prefill,
                  "Comparison mode: prefill length P (default: half the tokens)");
  cmd->add_option("--ref-top-k", a->ref_top_k,
                  "Comparison mode: reference tokens kept per position (0 = all)");
  cmd->add_option("--max-tokens", a->max_tokens, "Use at most N tokens of the text");
  cmd->add_option("-t,--threads", a->threads, "Threads (0 = all cores)");
  cmd->add_flag(
      "--kv-report", a->kv_report,
      "Comparison mode: per-layer tiers and bytes of the test cache after prefill and at the end");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "llama2.c tokenizer.bin (llama2.c checkpoints only)");
  cmd->callback([a, rc] { *rc = Ppl(*a); });
});

}  // namespace
}  // namespace hqekv::cli
