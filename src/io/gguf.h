// GGUF v2/v3 reader: parses a file image that is already in memory (normally
// a MappedFile), zero copy for tensor data. Layout (little endian):
//   "GGUF" u32 version, u64 n_tensors, u64 n_kv,
//   n_kv × { string key, u32 type, value },
//   n_tensors × { string name, u32 n_dims, n_dims × u64 ne, u32 ggml_type, u64 offset },
//   padding to `alignment` (general.alignment, default 32), tensor data.
// A string is u64 length + bytes; an array is u32 element type + u64 count +
// elements. Every count and length is checked against the bytes that remain
// before anything is allocated, so a corrupt file gives an Error, never a
// crash or a huge allocation.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/gguf_types.h"

namespace hqekv {

// One metadata value. Scalars: integers are in `i` (signed view) and `u`
// (unsigned view) at once, floats in `f`, bools in `u` (0/1), strings in
// `str`. Arrays: `array_type` is the element type and exactly one of
// `strings`, `ints`, `floats` holds the elements (ints also holds bools and
// unsigned values, converted to int64; u64 values above INT64_MAX are
// rejected by the reader). Nested arrays are not supported (rejected).
struct GgufValue {
  GgufType type = GgufType::kU32;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string str;
  GgufType array_type = GgufType::kU32;
  std::vector<std::string> strings;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  bool is_integer() const;                           // scalar u8..i64 (not bool)
  bool is_float() const;                             // scalar f32/f64
  size_t array_size() const;                         // elements of an array, 0 otherwise
  std::string ToString(size_t max_items = 8) const;  // for `inspect` and errors
};

struct GgufTensorInfo {
  std::string name;
  TensorType type = TensorType::kF32;
  std::vector<int64_t> ne;  // ggml order: ne[0] = contiguous row length
  uint64_t offset = 0;      // from the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // into the parsed image
};

struct GgufFile {
  std::string path;  // for error messages
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // absolute file offset of the data section
  uint64_t file_size = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata;  // file order
  std::vector<GgufTensorInfo> tensors;                      // file order

  const GgufValue* Find(const std::string& key) const;
  const GgufTensorInfo* FindTensor(const std::string& name) const;

  // Typed getters: errors name the file and the key (missing / wrong type /
  // out of range for int).
  Result<std::string> GetString(const std::string& key) const;
  Result<int64_t> GetInt(const std::string& key) const;   // any integer type
  Result<double> GetFloat(const std::string& key) const;  // f32/f64 or integer
  // Optional variants: nullopt when absent, Error when present with a bad type.
  Result<std::optional<int64_t>> GetOptionalInt(const std::string& key) const;
  Result<std::optional<double>> GetOptionalFloat(const std::string& key) const;
  Result<std::optional<std::string>> GetOptionalString(const std::string& key) const;
  Result<std::optional<bool>> GetOptionalBool(const std::string& key) const;

 private:
  std::map<std::string, size_t> index_;
  std::map<std::string, size_t> tensor_index_;
  friend Result<GgufFile> ParseGguf(const uint8_t*, size_t, const std::string&);
};

// Parses a GGUF image of `size` bytes. `name` (the path) is used in errors.
// Checks: magic, version (2 or 3), counts bounded by the remaining bytes,
// string lengths, value types, array counts, duplicate keys or tensor names,
// alignment (power of two, <= 1 MiB), n_dims in 1..4, dimensions >= 0,
// known tensor types, row length a multiple of the block size, every tensor
// aligned and inside the file, no two tensors overlapping.
Result<GgufFile> ParseGguf(const uint8_t* data, size_t size, const std::string& name);

}  // namespace hqekv
