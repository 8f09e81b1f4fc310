#include "io/gguf_types.h"

#include <cctype>

namespace hqekv {
std::optional<TensorType> TensorTypeFromGgml(uint32_t ggml_id) {
  for (const auto& i : kTensorTypes)
    if (i.ggml_id == ggml_id) return i.type;
  return std::nullopt;
}

uint32_t GgmlTypeId(TensorType t) { return TensorTypeInfoOf(t).ggml_id; }
const char* TensorTypeName(TensorType t) { return TensorTypeInfoOf(t).name; }

std::optional<TensorType> TensorTypeFromName(const std::string& name) {
  std::string up;
  for (char c : name) up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& i : kTensorTypes)
    if (up == i.name) return i.type;
  return std::nullopt;
}

std::string SupportedTensorTypeNames() {
  std::string out;
  for (const auto& i : kTensorTypes) out += (out.empty() ? "" : ", ") + std::string(i.name);
  return out;
}

std::optional<uint64_t> TensorBytes(TensorType t, const std::vector<int64_t>& ne) {
  constexpr uint64_t kLimit = uint64_t{1} << 62;
  if (ne.empty()) return std::nullopt;
  for (int64_t n : ne)
    if (n < 0) return std::nullopt;
  const uint64_t bs = static_cast<uint64_t>(BlockSize(t));
  if (static_cast<uint64_t>(ne[0]) % bs != 0) return std::nullopt;
  // bytes = (ne0 / bs) * block_bytes * prod(ne[1..]); check each step.
  const uint64_t blocks = static_cast<uint64_t>(ne[0]) / bs;
  if (blocks >= kLimit / static_cast<uint64_t>(BlockBytes(t))) return std::nullopt;
  uint64_t bytes = blocks * static_cast<uint64_t>(BlockBytes(t));
  for (size_t d = 1; d < ne.size(); ++d) {
    const uint64_t n = static_cast<uint64_t>(ne[d]);
    if (n != 0 && bytes > kLimit / n) return std::nullopt;
    bytes *= n;
  }
  return bytes;
}

const char* GgufTypeName(GgufType t) {
  switch (t) {
    case GgufType::kU8:
      return "u8";
    case GgufType::kI8:
      return "i8";
    case GgufType::kU16:
      return "u16";
    case GgufType::kI16:
      return "i16";
    case GgufType::kU32:
      return "u32";
    case GgufType::kI32:
      return "i32";
    case GgufType::kF32:
      return "f32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kU64:
      return "u64";
    case GgufType::kI64:
      return "i64";
    case GgufType::kF64:
      return "f64";
  }
  return "unknown";
}

}  // namespace hqekv
