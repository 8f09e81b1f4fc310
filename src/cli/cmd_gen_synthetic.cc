// `hqekv gen-synthetic` (hidden): writes a random Llama-shaped GGUF for tests
// and benchmarks, e.g. the ~1B-parameter Q8_0 model of bench/engine_bench:
//   hqekv gen-synthetic -o /tmp/synth-1b-q8.gguf --preset 1b
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "cli/number_flags.h"
#include "cli/registry.h"
#include "io/arch.h"
#include "io/synthetic.h"

namespace hqekv::cli::cmd_gen_synthetic {
namespace {

struct GenArgs {
  std::string out, preset, type = "Q8_0";
  SyntheticSpec spec;
  bool untied = false, force = false;
};

int Gen(GenArgs a) {
  if (a.preset ==
      "1b") {  // Llama-3.2-1B-like: 16 x 2048, 32/8 heads, d_ff 8192, 32000 vocab, untied
    a.spec.n_layers = 16;
    a.spec.d_model = 2048;
    a.spec.n_heads = 32;
    a.spec.n_kv_heads = 8;
    a.spec.d_ff = 8192;
    a.spec.vocab = 32000;
    a.spec.max_ctx = 4096;
    a.untied = true;
  } else if (!a.preset.empty()) {
    std::fprintf(stderr, "hqekv gen-synthetic: error: unknown --preset '%s' (known: 1b)\n",
                 a.preset.c_str());
    return 1;
  }
  auto t = TensorTypeFromName(a.type);
  if (!t) {
    std::fprintf(stderr, "hqekv gen-synthetic: error: unknown --type '%s'\n", a.type.c_str());
    return 1;
  }
  a.spec.type = *t;
  a.spec.tied_output = !a.untied;
  const Status s = WriteSyntheticGguf(a.spec, a.out, a.force);
  if (!s.ok()) {
    std::fprintf(stderr, "hqekv gen-synthetic: error: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("wrote %s (%s, %d layers, d_model %d, %.2f GB of weights)\n", a.out.c_str(),
              a.type.c_str(), a.spec.n_layers, a.spec.d_model, SyntheticWeightBytes(a.spec) / 1e9);
  return 0;
}

const CommandRegistrar kRegister(90, [](CLI::App& app, int* rc) {
  auto a = std::make_shared<GenArgs>();
  CLI::App* cmd =
      app.add_subcommand("gen-synthetic", "Write a random Llama-shaped GGUF (tests, benchmarks)");
  cmd->group("");  // hidden from --help
  cmd->add_option("-o,--output", a->out, "Output .gguf path")->required();
  cmd->add_option("--preset", a->preset, "Shape preset: 1b");
  cmd->add_option("--type", a->type, "Weight type: " + SupportedTensorTypeNames())
      ->capture_default_str();
  cmd->add_option("--arch", a->spec.arch, "architecture: " + SupportedArchNames())
      ->capture_default_str();
  cmd->add_option("--layers", a->spec.n_layers)
      ->check(IntFlag(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--dim", a->spec.d_model)
      ->check(IntFlag(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--heads", a->spec.n_heads)
      ->check(IntFlag(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--kv-heads", a->spec.n_kv_heads)
      ->check(IntFlag(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--ff", a->spec.d_ff)
      ->check(IntFlag(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--vocab", a->spec.vocab)
      ->check(IntFlag(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--ctx", a->spec.max_ctx)
      ->check(IntFlag(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--head-dim", a->spec.head_dim, "Head dimension (0: dim / heads)")
      ->check(IntFlag(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--rope-dim", a->spec.rope_dim,
                  "Rotated dimensions per head (rope.dimension_count; 0: head dim; less: "
                  "partial rotary)")
      ->check(IntFlag(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_flag("--longrope", a->spec.longrope,
                "LongRoPE factor tensors and keys as in Phi-3 128K files (long factors apply "
                "when the context exceeds --rope-orig-ctx)");
  cmd->add_option("--rope-orig-ctx", a->spec.rope_orig_ctx,
                  "rope.scaling.original_context_length (LongRoPE)")
      ->check(IntFlag(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--window", a->spec.sliding_window,
                  "Sliding window in tokens (gemma3: <arch>.attention.sliding_window; 0: none)")
      ->check(IntFlag(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--rope-theta", a->spec.rope_theta, "RoPE base (rope.freq_base)")
      ->capture_default_str();
  cmd->add_option("--rope-theta-swa", a->spec.rope_theta_swa,
                  "RoPE base of window layers (rope.freq_base_swa; 0: not written)")
      ->capture_default_str();
  cmd->add_option("--final-softcap", a->spec.final_softcap,
                  "Final logit soft-cap (final_logit_softcapping; 0: not written)")
      ->capture_default_str();
  cmd->add_option("--name", a->spec.name, "general.name (default synthetic-<arch>)");
  cmd->add_option("--seed", a->spec.seed)->capture_default_str();
  cmd->add_flag("--untied", a->untied, "Separate output matrix");
  cmd->add_flag("--force", a->force, "Overwrite an existing output file");
  cmd->callback([a, rc] { *rc = Gen(*a); });
});

}  // namespace
}  // namespace hqekv::cli::cmd_gen_synthetic
