// Weight tensor types and their storage geometry (ggml block layout).
//
// A tensor of type T with ne[0] elements per row is stored as rows of
// ne[0] / BlockSize(T) blocks of BlockBytes(T) bytes; ne[0] must be a multiple
// of BlockSize(T). Numbers are those of ggml (ggml.h / ggml-common.h):
//   F32 (id 0): 1 value, 4 B      F16 (1): 1, 2 B      BF16 (30): 1, 2 B
//   Q4_0 (2): 32 values, 18 B (fp16 d + 16 B nibbles)
//   Q8_0 (8): 32 values, 34 B (fp16 d + 32 int8)
//   Q4_K (12): 256 values, 144 B (fp16 d, dmin, 12 B scales, 128 B nibbles)
//   Q6_K (14): 256 values, 210 B (128 B ql, 64 B qh, 16 int8 scales, fp16 d)
//   Q4_1 (3): 32 values, 20 B (fp16 d, fp16 m, 16 B nibbles)
//   Q5_0 (6): 32 values, 22 B (fp16 d, 4 B high bits, 16 B nibbles)
//   Q5_1 (7): 32 values, 24 B (fp16 d, fp16 m, 4 B high bits, 16 B nibbles)
//   Q2_K (10): 256 values, 84 B (16 B 4-bit scale/min pairs, 64 B 2-bit quants, fp16 d, dmin)
//   Q3_K (11): 256 values, 110 B (32 B high-bit mask, 64 B 2-bit quants, 12 B 6-bit scales, fp16 d)
//   Q5_K (13): 256 values, 176 B (fp16 d, dmin, 12 B scales, 32 B high bits, 128 B nibbles)
//   IQ4_NL (20): 32 values, 18 B (fp16 d, 16 B nibbles indexing a fixed 16-value table)
//   IQ4_XS (23): 256 values, 136 B (fp16 d, u16 scales_h, 4 B scales_l, 128 B table nibbles)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hqekv {

enum class TensorType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_K,
  kQ6_K,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ2_K,
  kQ3_K,
  kQ5_K,
  kIQ4_NL,
  kIQ4_XS,
  kLast = kIQ4_XS,
};

// ggml type id <-> TensorType. Unsupported ids give nullopt.
std::optional<TensorType> TensorTypeFromGgml(uint32_t ggml_id);
uint32_t GgmlTypeId(TensorType t);
const char* TensorTypeName(TensorType t);  // "F32", "F16", "BF16", "Q8_0", ...
std::optional<TensorType> TensorTypeFromName(const std::string& name);  // inverse, case-insensitive
std::string SupportedTensorTypeNames();  // "F32, F16, ..." in table order (for messages and --help)

// The one table of tensor types, in TensorType order: ggml id, name and block
// geometry (ggml.h / ggml-common.h; see above). The weight kernels
// (kernels/kernels.h) and the GGUF reader and writer all read it.
struct TensorTypeInfo {
  TensorType type;
  uint32_t ggml_id;
  const char* name;
  int block_size;   // values per block
  int block_bytes;  // bytes per block
};
inline constexpr TensorTypeInfo kTensorTypes[] = {
    {TensorType::kF32, 0, "F32", 1, 4},
    {TensorType::kF16, 1, "F16", 1, 2},
    {TensorType::kBF16, 30, "BF16", 1, 2},
    {TensorType::kQ8_0, 8, "Q8_0", 32, 34},
    {TensorType::kQ4_0, 2, "Q4_0", 32, 18},
    {TensorType::kQ4_K, 12, "Q4_K", 256, 144},
    {TensorType::kQ6_K, 14, "Q6_K", 256, 210},
    {TensorType::kQ4_1, 3, "Q4_1", 32, 20},
    {TensorType::kQ5_0, 6, "Q5_0", 32, 22},
    {TensorType::kQ5_1, 7, "Q5_1", 32, 24},
    {TensorType::kQ2_K, 10, "Q2_K", 256, 84},
    {TensorType::kQ3_K, 11, "Q3_K", 256, 110},
    {TensorType::kQ5_K, 13, "Q5_K", 256, 176},
    {TensorType::kIQ4_NL, 20, "IQ4_NL", 32, 18},
    {TensorType::kIQ4_XS, 23, "IQ4_XS", 256, 136},
};
// Every TensorType, in enum order (for loops over types in tests and tools).
inline constexpr int kNumTensorTypes = static_cast<int>(TensorType::kLast) + 1;

constexpr const TensorTypeInfo& TensorTypeInfoOf(TensorType t) {
  return kTensorTypes[static_cast<size_t>(t)];
}
constexpr int BlockSize(TensorType t) {
  return TensorTypeInfoOf(t).block_size;
}  // values per block
constexpr int BlockBytes(TensorType t) {
  return TensorTypeInfoOf(t).block_bytes;
}  // bytes per block

namespace internal {
constexpr bool TensorTypesInEnumOrder() {
  for (size_t i = 0; i < sizeof(kTensorTypes) / sizeof(kTensorTypes[0]); ++i) {
    if (static_cast<size_t>(kTensorTypes[i].type) != i) return false;
  }
  return sizeof(kTensorTypes) / sizeof(kTensorTypes[0]) ==
         static_cast<size_t>(TensorType::kLast) + 1;
}
}  // namespace internal
static_assert(internal::TensorTypesInEnumOrder(), "kTensorTypes: one row per TensorType, in order");
// Block layouts (the fields of ggml-common.h's block structs).
static_assert(BlockBytes(TensorType::kQ8_0) == 2 + 32 && BlockSize(TensorType::kQ8_0) == 32,
              "Q8_0: fp16 d + 32 int8");
static_assert(BlockBytes(TensorType::kQ4_0) == 2 + 32 / 2 && BlockSize(TensorType::kQ4_0) == 32,
              "Q4_0: fp16 d + 16 B of nibbles");
static_assert(BlockBytes(TensorType::kQ4_K) == 2 + 2 + 12 + 256 / 2 &&
                  BlockSize(TensorType::kQ4_K) == 256,
              "Q4_K: fp16 d, dmin, 12 B scales, 128 B nibbles");
static_assert(BlockBytes(TensorType::kQ6_K) == 256 / 2 + 256 / 4 + 256 / 16 + 2 &&
                  BlockSize(TensorType::kQ6_K) == 256,
              "Q6_K: 128 B ql, 64 B qh, 16 int8 scales, fp16 d");
static_assert(BlockBytes(TensorType::kQ4_1) == 2 + 2 + 32 / 2 && BlockSize(TensorType::kQ4_1) == 32,
              "Q4_1: fp16 d, fp16 m, 16 B of nibbles");
static_assert(BlockBytes(TensorType::kQ5_0) == 2 + 4 + 32 / 2 && BlockSize(TensorType::kQ5_0) == 32,
              "Q5_0: fp16 d, u32 high bits, 16 B of nibbles");
static_assert(BlockBytes(TensorType::kQ5_1) == 2 + 2 + 4 + 32 / 2 &&
                  BlockSize(TensorType::kQ5_1) == 32,
              "Q5_1: fp16 d, fp16 m, u32 high bits, 16 B of nibbles");
static_assert(BlockBytes(TensorType::kQ2_K) == 256 / 16 + 256 / 4 + 2 + 2 &&
                  BlockSize(TensorType::kQ2_K) == 256,
              "Q2_K: 16 B scales/mins, 64 B 2-bit quants, fp16 d, dmin");
static_assert(BlockBytes(TensorType::kQ3_K) == 256 / 8 + 256 / 4 + 12 + 2 &&
                  BlockSize(TensorType::kQ3_K) == 256,
              "Q3_K: 32 B hmask, 64 B 2-bit quants, 12 B 6-bit scales, fp16 d");
static_assert(BlockBytes(TensorType::kQ5_K) == 2 + 2 + 12 + 256 / 8 + 256 / 2 &&
                  BlockSize(TensorType::kQ5_K) == 256,
              "Q5_K: fp16 d, dmin, 12 B scales, 32 B qh, 128 B nibbles");
static_assert(BlockBytes(TensorType::kIQ4_NL) == 2 + 32 / 2 && BlockSize(TensorType::kIQ4_NL) == 32,
              "IQ4_NL: fp16 d + 16 B of table indices");
static_assert(BlockBytes(TensorType::kIQ4_XS) == 2 + 2 + 256 / 64 + 256 / 2 &&
                  BlockSize(TensorType::kIQ4_XS) == 256,
              "IQ4_XS: fp16 d, u16 scales_h, 4 B scales_l, 128 B table indices");

// Bytes of a tensor with shape ne (ggml order), or nullopt when ne[0] is not a
// multiple of the block size, a dimension is < 0, or the size overflows
// (the bound keeps every product below 2^62).
std::optional<uint64_t> TensorBytes(TensorType t, const std::vector<int64_t>& ne);

// GGUF metadata value types (gguf.h enum gguf_type).
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
const char* GgufTypeName(GgufType t);

}  // namespace hqekv
