// GGUF v3 writer (v2 on request, same layout), used by tests, the fuzz seed
// corpus and the synthetic-model bench generator.
//
//   GgufWriter w;
//   w.SetString("general.architecture", "llama");
//   w.SetU32("llama.block_count", 2);
//   w.SetStringArray("tokenizer.ggml.tokens", tokens);
//   w.AddTensor("token_embd.weight", TensorType::kQ8_0, {d_model, vocab}, bytes);
//   Status s = w.WriteFile("m.gguf");            // refuses to overwrite
//
// Large models: AddTensorFill() takes a callback that produces the data in
// pieces at write time, so a ~1 GB file never needs its weights in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/gguf.h"
#include "io/gguf_types.h"

namespace hqekv {

class GgufWriter {
 public:
  // Called with (offset into the tensor's bytes, destination, count): write
  // `count` bytes of the tensor starting at `offset` into `dst`.
  using Filler = std::function<void(uint64_t offset, uint8_t* dst, size_t count)>;

  void set_version(uint32_t v) { version_ = v; }  // 2 or 3 (default 3)
  // Alignment of tensor data (power of two). Also written as
  // general.alignment (u32) when != 32.
  void set_alignment(uint32_t a) { alignment_ = a; }

  // Metadata. Setting an existing key replaces its value (order kept).
  void Set(const std::string& key, GgufValue value);
  void SetU8(const std::string& key, uint8_t v);
  void SetI8(const std::string& key, int8_t v);
  void SetU16(const std::string& key, uint16_t v);
  void SetI16(const std::string& key, int16_t v);
  void SetU32(const std::string& key, uint32_t v);
  void SetI32(const std::string& key, int32_t v);
  void SetU64(const std::string& key, uint64_t v);
  void SetI64(const std::string& key, int64_t v);
  void SetF32(const std::string& key, float v);
  void SetF64(const std::string& key, double v);
  void SetBool(const std::string& key, bool v);
  void SetString(const std::string& key, const std::string& v);
  void SetStringArray(const std::string& key, const std::vector<std::string>& v);
  void SetF32Array(const std::string& key, const std::vector<float>& v);
  void SetI32Array(const std::string& key, const std::vector<int32_t>& v);
  // Generic numeric array: element type `elem` (any scalar except string).
  void SetIntArray(const std::string& key, GgufType elem, const std::vector<int64_t>& v);
  void SetFloatArray(const std::string& key, GgufType elem, const std::vector<double>& v);

  // Tensors, written in the order added. `ne` in ggml order. Errors: bad
  // shape for the type, size mismatch, duplicate name.
  Status AddTensor(const std::string& name, TensorType type, std::vector<int64_t> ne,
                   std::vector<uint8_t> bytes);
  Status AddTensor(const std::string& name, TensorType type, std::vector<int64_t> ne,
                   const void* bytes, size_t nbytes);
  Status AddTensorFill(const std::string& name, TensorType type, std::vector<int64_t> ne,
                       Filler fill);

  std::vector<uint8_t> Serialize() const;  // whole file in memory
  // Writes to `path`; refuses an existing file unless overwrite is true.
  Status WriteFile(const std::string& path, bool overwrite = false) const;

 private:
  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> ne;
    uint64_t nbytes = 0;
    std::vector<uint8_t> bytes;  // empty when `fill` is set
    Filler fill;
  };
  std::vector<uint8_t> Header() const;  // everything before the data section, padded
  uint32_t version_ = 3;
  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace hqekv
