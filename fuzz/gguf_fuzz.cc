// libFuzzer target for the GGUF reader and everything LoadModel builds on
// it (config, shape validation, tokenizer). Any input must give a model or
// an error: a crash, ASan report, hang or huge allocation is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/gguf.h"
#include "io/model_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = hqekv::ParseGguf(data, size, "fuzz.gguf");
  if (!file.ok()) return 0;
  for (const auto& kv : file->metadata) (void)kv.second.ToString(4);
  auto model = hqekv::LoadGgufImage(data, size, "fuzz.gguf");
  if (!model.ok()) return 0;
  const hqekv::ModelSource& m = **model;
  // Read the last byte of every tensor: views must lie inside the input.
  volatile uint8_t sink = 0;
  for (const auto& [name, t] : m.tensors)
    if (t.nbytes) sink = sink ^ t.data[t.nbytes - 1];
  const auto ids =
      m.tokenizer->Encode("Once upon a time, 12345 caf\xC3\xA9 \xF0\x9F\x98\x80\n\n", true, true);
  (void)m.tokenizer->Decode(ids);
  (void)m.tokenizer->Describe();
  return 0;
}
