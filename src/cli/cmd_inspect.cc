// `hqekv inspect [-m MODEL]`: what a model file holds — architecture, shapes,
// weight types, tokenizer, context length, rope settings, parameter count.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>
#include <string>

#include "cli/model_args.h"
#include "cli/registry.h"
#include "io/gguf.h"
#include "io/model_source.h"

namespace hqekv::cli::cmd_inspect {
namespace {

struct InspectArgs {
  std::string model;
  std::string tokenizer;
  bool tensors = false;
  bool metadata = false;
};

// 1234567 -> "1,234,567"
std::string Thousands(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string Shape(const std::vector<int64_t>& ne) {
  std::string s;
  for (size_t k = 0; k < ne.size(); ++k) s += (k ? " x " : "") + std::to_string(ne[k]);
  return s;
}

int Inspect(const InspectArgs& a) {
  const std::string path = ModelPathOrDefault(a.model);
  auto loaded = LoadModel(path, a.tokenizer);
  if (!loaded.ok()) {
    std::fprintf(stderr, "hqekv inspect: error: %s\n", loaded.message().c_str());
    return 1;
  }
  const ModelSource& m = **loaded;
  const ModelConfig& c = m.config;
  std::printf("file:           %s\n", m.path.c_str());
  if (m.format == "gguf")
    std::printf("format:         GGUF v%u, %s bytes\n", m.gguf_version,
                Thousands(m.file_bytes).c_str());
  else
    std::printf("format:         llama2.c checkpoint, %s bytes (tokenizer %s)\n",
                Thousands(m.file_bytes).c_str(), m.tokenizer_path.c_str());
  std::printf("name:           %s\n", c.name.c_str());
  std::printf("architecture:   %s%s%s\n", c.arch.c_str(), c.qk_norm ? " (QK-norm)" : "",
              c.attn_bias ? " (q/k/v biases)" : "");
  std::printf("layers:         %d\n", c.n_layers);
  std::printf("d_model:        %d\n", c.d_model);
  std::printf("attention:      %d query heads, %d KV heads (%s), head_dim %d\n", c.n_heads,
              c.n_kv_heads, c.n_kv_heads == c.n_heads ? "MHA" : (c.n_kv_heads == 1 ? "MQA" : "GQA"),
              c.head_dim);
  std::printf("d_ff:           %d (SwiGLU)\n", c.d_ff);
  std::printf("vocab:          %d\n", c.vocab_size);
  std::printf("context length: %d\n", c.max_ctx);
  std::printf("rope:           %s, theta %g, %d dims",
              c.rope == RopeStyle::kNormal ? "normal (adjacent pairs)" : "NeoX (halves)",
              static_cast<double>(c.rope_theta), c.rope_dim);
  if (c.rope_scaling == RopeScaling::kLlama3)
    std::printf(", llama3 scaling factor %g (low %g, high %g, original ctx %d)",
                static_cast<double>(c.rope_factor), static_cast<double>(c.rope_low_freq_factor),
                static_cast<double>(c.rope_high_freq_factor), c.rope_orig_ctx);
  else if (c.rope_scaling == RopeScaling::kLinear)
    std::printf(", linear scaling factor %g", static_cast<double>(c.rope_factor));
  else if (c.rope_scaling == RopeScaling::kYarn)
    std::printf(", yarn scaling factor %g (original ctx %d, attn_factor %g)",
                static_cast<double>(c.rope_factor), c.rope_orig_ctx,
                static_cast<double>(c.rope_attn_factor));
  if (m.Find("rope_freqs.weight")) std::printf(", scaled by rope_freqs.weight");
  std::printf("\n");
  std::printf("rms_eps:        %g\n", static_cast<double>(c.rms_eps));
  std::printf("output:         %s\n",
              c.tied_output ? "tied to token_embd.weight" : "output.weight");
  const int64_t params = m.ParameterCount();
  std::printf("parameters:     %s (%.3g M)\n", Thousands(static_cast<uint64_t>(params)).c_str(),
              params / 1e6);

  std::map<std::string, std::pair<int, uint64_t>> per_type;  // type -> (tensors, bytes)
  uint64_t weight_bytes = 0;
  for (const auto& [name, t] : m.tensors) {
    auto& e = per_type[TensorTypeName(t.type)];
    ++e.first;
    e.second += t.nbytes;
    weight_bytes += t.nbytes;
  }
  std::printf("tensors:        %zu, %s bytes:", m.tensors.size(), Thousands(weight_bytes).c_str());
  for (const auto& [type, e] : per_type)
    std::printf(" %s x%d (%s B)", type.c_str(), e.first, Thousands(e.second).c_str());
  std::printf("\n");
  const Tensor& q0 = m.Get("blk.0.attn_q.weight");
  const Tensor& d0 = m.Get("blk.0.ffn_down.weight");
  std::printf("layer 0:        attn_q %s %s, ffn_down %s %s\n", TensorTypeName(q0.type),
              Shape(q0.ne).c_str(), TensorTypeName(d0.type), Shape(d0.ne).c_str());
  std::printf("tokenizer:      %s\n", m.tokenizer->Describe().c_str());
  std::printf("identity:       %s\n", m.identity.c_str());

  if (a.tensors) {
    std::printf("\n%-32s %-6s %-16s %12s\n", "tensor", "type", "shape (ne)", "bytes");
    for (const auto& [name, t] : m.tensors)
      std::printf("%-32s %-6s %-16s %12s\n", name.c_str(), TensorTypeName(t.type),
                  Shape(t.ne).c_str(), Thousands(t.nbytes).c_str());
  }
  if (a.metadata && m.gguf) {
    std::printf("\nmetadata (%zu keys):\n", m.gguf->metadata.size());
    for (const auto& [key, v] : m.gguf->metadata)
      std::printf("  %s = %s\n", key.c_str(), v.ToString().c_str());
  }
  return 0;
}

const CommandRegistrar kRegistrar(40, [](CLI::App& app, int* rc) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Print a model's architecture, shapes, weight types, tokenizer, context");
  cmd->add_option("-m,--model", args->model, kDefaultModelHelp);
  cmd->add_option("--tokenizer", args->tokenizer,
                  "llama2.c tokenizer.bin (default: tok<vocab>.bin or tokenizer.bin next to it)");
  cmd->add_flag("--tensors", args->tensors, "List every tensor");
  cmd->add_flag("--metadata", args->metadata, "Dump every GGUF metadata key");
  cmd->callback([args, rc] { *rc = Inspect(*args); });
});

}  // namespace
}  // namespace hqekv::cli::cmd_inspect
