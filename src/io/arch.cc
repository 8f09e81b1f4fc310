#include "io/arch.h"

namespace hqekv {
namespace {

constexpr ArchTraits kArchs[] = {
    // name     rope                 qk_norm qkv_bias gemma_block fused swa_period
    // llama: Mistral-style sliding window when the file declares one.
    {"llama", RopeStyle::kNormal, false, false, false, false, 0, 0, 0, 0, 0, true},
    {"qwen2", RopeStyle::kNeoX, false, true, false, false, 0},
    {"qwen3", RopeStyle::kNeoX, true, false, false, false, 0},
    // Gemma 3: five sliding-window layers then one global (llama.cpp's
    // set_swa_pattern(6)); local RoPE base 10000 unless rope.freq_base_swa.
    {"gemma3", RopeStyle::kNeoX, true, false, true, false, 6},
    // Gemma 2: window and global layers alternate (window 4096 unless the
    // file says), local RoPE base = the global one, attention scores and
    // final logits soft-capped (50, 30 unless the file says).
    {"gemma2", RopeStyle::kNeoX, false, false, true, false, 2, 4096, 0, 50, 30},
    // Phi-3 / 3.5 mini: fused q/k/v and gate/up; llama.cpp ignores the
    // file's sliding window for this architecture, and so does hqekv.
    {"phi3", RopeStyle::kNeoX, false, false, false, true, 0},
};

}  // namespace

const ArchTraits* FindArch(std::string_view name) {
  for (const ArchTraits& a : kArchs) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

std::string SupportedArchNames() {
  std::string out;
  for (const ArchTraits& a : kArchs) out += (out.empty() ? "" : ", ") + std::string(a.name);
  return out;
}

}  // namespace hqekv
