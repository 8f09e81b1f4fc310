#include "io/arch.h"

namespace hqekv {
namespace {

constexpr ArchTraits kArchs[] = {
    // name     rope                 qk_norm qkv_bias gemma_block swa_period
    {"llama", RopeStyle::kNormal, false, false, false, 0},
    {"qwen2", RopeStyle::kNeoX, false, true, false, 0},
    {"qwen3", RopeStyle::kNeoX, true, false, false, 0},
    // Gemma 3: five sliding-window layers then one global (llama.cpp's
    // set_swa_pattern(6)); local RoPE base 10000 unless rope.freq_base_swa.
    {"gemma3", RopeStyle::kNeoX, true, false, true, 6},
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
