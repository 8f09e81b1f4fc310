// llama.cpp's command-line habits: its multi-letter single-dash flags
// (`-ngl 99`, `-fa on`, `-sys TEXT`, `-cnv`), which CLI11 would read as a
// short flag plus a value (`-n gl`), and the flags that only make sense on a
// GPU build, which hqekv accepts with a warning instead of refusing a
// command line copied from llama.cpp's docs. Header-only: the CLI is one
// executable.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hqekv::cli {

// llama.cpp's multi-letter single-dash spellings and the long option each
// means here. Applied to argv before parsing (an argument equal to the left
// side is replaced; `-fa=on` style is not llama.cpp's either).
inline constexpr std::pair<std::string_view, std::string_view> kLlamaDashAliases[] = {
    {"-np", "--np"},               // serve: slots
    {"-ctk", "--cache-type-k"},    // KV cache types (cli/kv_flags.h)
    {"-ctv", "--cache-type-v"},    //
    {"-ngl", "--n-gpu-layers"},    // GPU offload: accepted, ignored
    {"-sm", "--split-mode"},       //
    {"-mg", "--main-gpu"},         //
    {"-ts", "--tensor-split"},     //
    {"-nkvo", "--no-kv-offload"},  //
    {"-dev", "--device"},          //
    {"-fa", "--flash-attn"},       // always on here
    {"-sys", "--system-prompt"},   // run / chat: system message
    {"-cnv", "--conversation"},    // run: chat mode
    {"-no-cnv", "--no-conversation"},
    {"-ub", "--ubatch-size"},  // accepted, ignored
};

// Rewrites llama.cpp's multi-letter single-dash flags to their long forms.
// Only arguments before a lone "--" are touched (after it everything is a
// value).
inline void RewriteLlamaDashFlags(std::vector<const char*>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string_view s = args[i];
    if (s == "--") break;
    for (const auto& [from, to] : kLlamaDashAliases) {
      if (s == from) {
        args[i] = to.data();  // string_view literals are NUL-terminated
        break;
      }
    }
  }
}

// The flags a llama.cpp user passes to a model-running command that have no
// effect in hqekv (a CPU engine whose attention is always fused): read, then
// reported once on stderr by Warn(). `-b` / `--batch-size` and
// `-ub` / `--ubatch-size`: hqekv's prefill takes the whole prompt as one
// batch and splits it internally by cache-friendly tiles.
struct LlamaCompatFlags {
  std::string gpu_layers, split_mode, main_gpu, tensor_split, device, flash_attn, batch, ubatch;
  bool no_kv_offload = false;

  // Adds the flags to `cmd` in a group of their own. `has_batch_b`: the
  // command already uses `-b` for something else (then only --batch-size).
  void Add(CLI::App* cmd, bool has_batch_b = false) {
    const char* group = "llama.cpp compatibility (accepted; no effect on a CPU engine)";
    cmd->add_option("--n-gpu-layers,--gpu-layers", gpu_layers, "GPU layers: ignored (CPU only)")
        ->group(group);
    cmd->add_option("--split-mode", split_mode, "Multi-GPU split: ignored")->group(group);
    cmd->add_option("--main-gpu", main_gpu, "Main GPU: ignored")->group(group);
    cmd->add_option("--tensor-split", tensor_split, "Tensor split: ignored")->group(group);
    cmd->add_option("--device", device, "Device list: ignored (CPU only)")->group(group);
    cmd->add_flag("--no-kv-offload", no_kv_offload, "KV offload: ignored (the KV cache is in RAM)")
        ->group(group);
    cmd->add_option("--flash-attn", flash_attn,
                    "on|off|auto: hqekv's attention is always fused (flash-style); accepted")
        ->expected(0, 1)
        ->check(CLI::IsMember({"on", "off", "auto", "1", "0"}))
        ->group(group);
    cmd->add_option(has_batch_b ? "--batch-size" : "-b,--batch-size", batch,
                    "Logical batch size: ignored (the prefill batches the whole prompt)")
        ->group(group);
    cmd->add_option("--ubatch-size", ubatch, "Physical batch size: ignored")->group(group);
  }

  // One warning line per given flag, naming it, on stderr (never stdout:
  // `--json` output stays pure).
  void Warn(const char* command) const {
    auto warn = [&](bool given, const char* flag, const char* why) {
      if (given) std::fprintf(stderr, "hqekv %s: warning: %s ignored (%s)\n", command, flag, why);
    };
    warn(!gpu_layers.empty(), "--n-gpu-layers/-ngl", "hqekv runs on the CPU");
    warn(!split_mode.empty(), "--split-mode/-sm", "hqekv runs on the CPU");
    warn(!main_gpu.empty(), "--main-gpu/-mg", "hqekv runs on the CPU");
    warn(!tensor_split.empty(), "--tensor-split/-ts", "hqekv runs on the CPU");
    warn(!device.empty(), "--device/-dev", "hqekv runs on the CPU");
    warn(no_kv_offload, "--no-kv-offload/-nkvo", "the KV cache is always in RAM");
    warn(flash_attn == "off" || flash_attn == "0", "--flash-attn off",
         "hqekv's attention is always fused; results are the same as unfused up to rounding");
    warn(!batch.empty(), "--batch-size/-b", "the prefill takes the whole prompt at once");
    warn(!ubatch.empty(), "--ubatch-size/-ub", "the prefill tiles the prompt internally");
  }
};

}  // namespace hqekv::cli
