// libFuzzer target for the llama2.c reader (io/llama2c.h): the input is a
// little-endian uint16 length n, then n bytes of tokenizer.bin image (fewer
// if the input is shorter), then the checkpoint. Any input
// must give a model/vocabulary or an error: a crash, ASan report, hang or
// huge allocation is a finding. The checkpoint goes through a temporary file
// because the checkpoint is mapped from a path (as LoadModel does).
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>

#include "io/llama2c.h"
#include "io/mmap_file.h"
#include "io/model_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > 65536) return 0;
  const size_t body = size - 2;
  const size_t tok_bytes = std::min<size_t>(body, data[0] | (size_t(data[1]) << 8));
  const uint8_t* tok = data + 2;
  const uint8_t* ckpt = tok + tok_bytes;
  const size_t ckpt_bytes = body - tok_bytes;
  for (int vocab : {1, 3, 32, 512}) {
    auto v = hqekv::ParseLlama2cTokenizer(tok, tok_bytes, vocab, "fuzz-tokenizer.bin");
    (void)v;
  }
  static const std::string dir = [] {
    char tmpl[] = "/tmp/hqekv-fuzz-llama2c-XXXXXX";
    const char* d = mkdtemp(tmpl);
    return std::string(d ? d : "/tmp");
  }();
  const std::string ckpt_path = dir + "/model.bin", tok_path = dir + "/tokenizer.bin";
  for (const auto& [path, p, n] :
       {std::tuple{ckpt_path, ckpt, ckpt_bytes}, std::tuple{tok_path, tok, tok_bytes}}) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    if (n) std::fwrite(p, 1, n, f);
    std::fclose(f);
  }
  auto map = hqekv::MappedFile::Open(ckpt_path);
  if (!map.ok()) return 0;
  auto model = hqekv::LoadLlama2c(std::move(*map), ckpt_path, tok_path);
  if (!model.ok()) return 0;
  const hqekv::ModelSource& m = **model;
  volatile uint8_t sink = 0;
  for (const auto& [name, t] : m.tensors)
    if (t.nbytes) sink = sink ^ t.data[t.nbytes - 1];
  const auto ids = m.tokenizer->Encode("Once upon a time, caf\xC3\xA9\n", true, true);
  (void)m.tokenizer->Decode(ids);
  return 0;
}
