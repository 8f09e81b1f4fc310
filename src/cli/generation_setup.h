// What a generating subcommand (`run`, `chat`) needs before its first token: the
// model, its KV cache under the --kv policy (or -ctk/-ctv), the sampler, and
// the flags that choose them. Header-only: the CLI is one executable.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>

#include "cache/kv_cache.h"
#include "cli/kv_flags.h"
#include "cli/model_args.h"
#include "cli/number_flags.h"
#include "core/status.h"
#include "io/model_source.h"
#include "model/llama.h"
#include "model/sampler.h"
#include "policy/factory.h"

namespace hqekv::cli {

struct GenerationArgs {
  std::string model, tokenizer, kv = "fp16";
  int threads = 0, ctx = 0;
  SamplerConfig sampler = kRunSamplerDefaults;
  KvTypeFlags kv_types;  // -ctk / -ctv / --kv-cache-dtype instead of --kv
};

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, -s (run and chat).
inline void AddSamplerFlags(CLI::App* cmd, SamplerConfig& s) {
  cmd->add_option("--temp", s.temperature, "Temperature (0 = greedy)")
      ->check(RealFlag({.min = 0, .max = 1e6}))
      ->capture_default_str();
  cmd->add_option("--top-k", s.top_k, "Top-k (0 = off)")
      ->check(IntFlag(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--top-p", s.top_p, "Top-p / nucleus (1 = off)")
      ->check(RealFlag({.min = 0, .max = 1, .min_open = true}))
      ->capture_default_str();
  cmd->add_option("--min-p", s.min_p, "Min-p (0 = off)")
      ->check(RealFlag({.min = 0, .max = 1}))
      ->capture_default_str();
  cmd->add_option("--repeat-penalty", s.repeat_penalty, "Repetition penalty (1 = off)")
      ->check(RealFlag({.min = 0, .max = 1e6, .min_open = true}))
      ->capture_default_str();
  cmd->add_option("-s,--seed", s.seed, "Sampling seed (-1 = random)")
      ->check(SeedFlag())
      ->capture_default_str();
}

// -m, --tokenizer, sampling (--temp, --top-k, --top-p, --min-p,
// --repeat-penalty, -s), -t, -c/--ctx, --kv and -ctk/-ctv, as `run` has them.
inline void AddGenerationFlags(CLI::App* cmd, GenerationArgs& a) {
  cmd->add_option("-m,--model", a.model, kDefaultModelHelp);
  cmd->add_option("--tokenizer", a.tokenizer, "llama2.c tokenizer.bin (llama2.c checkpoints only)");
  AddSamplerFlags(cmd, a.sampler);
  cmd->add_option("-t,--threads", a.threads, "Threads (0 = all cores)");
  cmd->add_option("-c,--ctx,--ctx-size", a.ctx,
                  "Context length of the KV cache (default: the model's, at most 4096)")
      ->check(IntFlag(0, std::numeric_limits<int>::max()));
  a.kv_types.Add(cmd, cmd->add_option("--kv", a.kv, "KV cache policy spec")->capture_default_str());
}

struct Generation {
  std::string path;  // the model file
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<Sampler> sampler;
  std::string spec;  // the --kv spec in canonical form (names saved KV states)
  int ctx = 0;       // tokens the cache holds at most
};

// Threads, sampler, model, context and cache, in that order; errors name the
// flag or the file.
inline Result<Generation> OpenGeneration(const GenerationArgs& a) {
  HQEKV_RETURN_IF_ERROR(ApplyThreads(a.threads));
  HQEKV_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(a.sampler));
  Generation g;
  g.sampler = std::make_unique<Sampler>(std::move(sampler));
  g.path = ModelPathOrDefault(a.model);
  HQEKV_ASSIGN_OR_RETURN(g.src, LoadModel(g.path, a.tokenizer));
  HQEKV_ASSIGN_OR_RETURN(g.model, LlamaModel::Create(*g.src));
  const ModelConfig& c = g.src->config;
  HQEKV_RETURN_IF_ERROR(CheckContext(a.ctx, c));
  g.ctx = a.ctx > 0 ? a.ctx : std::min(c.max_ctx, 4096);
  HQEKV_ASSIGN_OR_RETURN(std::string kv, a.kv_types.Resolve(a.kv));
  auto spec = policy::ParseSpec(kv);
  if (!spec.ok()) return MakeError("--kv: " + spec.message());
  g.spec = spec->Canonical();
  auto cache = policy::CreateCache(*spec, g.model->CacheGeometry(g.ctx),
                                   policy::ForModel(c.name, g.src->identity, c.n_layers));
  if (!cache.ok()) return MakeError("--kv: " + cache.message());
  g.cache = std::move(*cache);
  return g;
}

}  // namespace hqekv::cli
