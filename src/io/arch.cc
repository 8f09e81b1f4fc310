#include "io/arch.h"

namespace hqekv {
namespace {

constexpr ArchTraits kArchs[] = {
    // name     rope                 qk_norm qkv_bias
    {"llama", RopeStyle::kNormal, false, false},
    {"qwen2", RopeStyle::kNeoX, false, true},
    {"qwen3", RopeStyle::kNeoX, true, false},
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
