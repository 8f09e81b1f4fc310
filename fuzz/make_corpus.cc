// Writes the fuzz seed corpus: small valid GGUF files covering each
// architecture, weight type, both tokenizer kinds and every metadata value
// type. Usage: fuzz_make_corpus OUT_DIR (files are overwritten: the corpus is
// generated content).
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "io/gguf_writer.h"
#include "tokenizer/tokenizer.h"

namespace {

using hqekv::GgufType;
using hqekv::GgufWriter;
using hqekv::TensorType;

std::vector<uint8_t> Bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng() & 0x3F);  // small values: finite floats
  return b;
}

void SpmVocab(GgufWriter& w) {
  const std::vector<std::string> tokens = {"<unk>",
                                           "<s>",
                                           "</s>",
                                           "<0x0A>",
                                           "\xE2\x96\x81",
                                           "O",
                                           "n",
                                           "c",
                                           "e",
                                           "\xE2\x96\x81"
                                           "O",
                                           "nc",
                                           "once"};
  std::vector<float> scores(tokens.size());
  std::vector<int32_t> types(tokens.size(), hqekv::kTokNormal);
  for (size_t k = 0; k < tokens.size(); ++k) scores[k] = -static_cast<float>(k);
  types[0] = hqekv::kTokUnknown;
  types[1] = types[2] = hqekv::kTokControl;
  types[3] = hqekv::kTokByte;
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetF32Array("tokenizer.ggml.scores", scores);
  w.SetI32Array("tokenizer.ggml.token_type", types);
  w.SetU32("tokenizer.ggml.bos_token_id", 1);
  w.SetU32("tokenizer.ggml.eos_token_id", 2);
}

void BpeVocab(GgufWriter& w, const std::string& pre) {
  // Byte-level pieces for a few bytes ("Ġ" = space) plus merges.
  const std::vector<std::string> tokens = {"O",
                                           "n",
                                           "c",
                                           "e",
                                           "\xC4\xA0",
                                           "nc",
                                           "nce",
                                           "\xC4\xA0"
                                           "n",
                                           "1",
                                           "2",
                                           "<|begin_of_text|>",
                                           "<|eot_id|>"};
  std::vector<int32_t> types(tokens.size(), hqekv::kTokNormal);
  types[10] = types[11] = hqekv::kTokControl;
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", pre);
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetI32Array("tokenizer.ggml.token_type", types);
  w.SetStringArray("tokenizer.ggml.merges", {"n c", "nc e", "\xC4\xA0 n"});
  w.SetU32("tokenizer.ggml.bos_token_id", 10);
  w.SetU32("tokenizer.ggml.eos_token_id", 11);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
}

GgufWriter Model(const std::string& arch, TensorType wt, int d, bool bpe,
                 const std::string& pre = "llama-bpe") {
  GgufWriter w;
  const int heads = 2, kv = 1, ff = d, layers = 1, vocab = 12, hd = d / heads;
  const std::string a = arch + ".";
  w.SetString("general.architecture", arch);
  w.SetU32(a + "block_count", layers);
  w.SetU32(a + "embedding_length", d);
  w.SetU32(a + "feed_forward_length", ff);
  w.SetU32(a + "attention.head_count", heads);
  w.SetU32(a + "attention.head_count_kv", kv);
  w.SetU32(a + "context_length", 64);
  w.SetF32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetF32(a + "rope.freq_base", 10000.0f);
  if (bpe)
    BpeVocab(w, pre);
  else
    SpmVocab(w);
  uint32_t seed = 1;
  auto add = [&](const std::string& n, TensorType t, std::vector<int64_t> ne) {
    (void)w.AddTensor(n, t, ne, Bytes(*hqekv::TensorBytes(t, ne), seed++));
  };
  add("token_embd.weight", wt, {d, vocab});
  add("output_norm.weight", TensorType::kF32, {d});
  for (int l = 0; l < layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", TensorType::kF32, {d});
    add(b + "attn_q.weight", wt, {d, heads * hd});
    add(b + "attn_k.weight", wt, {d, kv * hd});
    add(b + "attn_v.weight", wt, {d, kv * hd});
    add(b + "attn_output.weight", wt, {heads * hd, d});
    add(b + "ffn_norm.weight", TensorType::kF32, {d});
    add(b + "ffn_gate.weight", wt, {d, ff});
    add(b + "ffn_up.weight", wt, {d, ff});
    add(b + "ffn_down.weight", wt, {ff, d});
    if (arch == "qwen2")
      for (const char* n : {"attn_q.bias", "attn_k.bias", "attn_v.bias"})
        add(b + n, TensorType::kF32, {std::string(n) == "attn_q.bias" ? heads * hd : kv * hd});
    if (arch == "qwen3")
      for (const char* n : {"attn_q_norm.weight", "attn_k_norm.weight"})
        add(b + n, TensorType::kF32, {hd});
  }
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  int rc = 0;
  auto write = [&](const std::string& name, const GgufWriter& w) {
    auto s = w.WriteFile(dir + "/" + name, /*overwrite=*/true);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      rc = 1;
    }
  };
  write("llama_f32_spm.gguf", Model("llama", TensorType::kF32, 8, false));
  write("llama_f16_bpe.gguf", Model("llama", TensorType::kF16, 8, true));
  write("qwen2_q8_0_bpe.gguf", Model("qwen2", TensorType::kQ8_0, 32, true, "qwen2"));
  write("qwen3_q4_0_spm.gguf", Model("qwen3", TensorType::kQ4_0, 32, false));
  write("llama_bf16_spm.gguf", Model("llama", TensorType::kBF16, 8, false));
  {
    GgufWriter w = Model("llama", TensorType::kF32, 8, false);
    w.set_version(2);
    w.set_alignment(16);
    w.SetF32("llama.rope.scaling.factor", 8.0f);
    w.SetU32("llama.rope.scaling.original_context_length", 8192);
    write("llama_v2_align16_ropescale.gguf", w);
  }
  {
    GgufWriter w;  // every value type, K-quant tensors, no model keys
    w.SetU8("u8", 1);
    w.SetI8("i8", -1);
    w.SetU16("u16", 2);
    w.SetI16("i16", -2);
    w.SetU32("u32", 3);
    w.SetI32("i32", -3);
    w.SetU64("u64", 4);
    w.SetI64("i64", -4);
    w.SetF32("f32", 0.5f);
    w.SetF64("f64", 0.25);
    w.SetBool("bool", true);
    w.SetString("str", "s");
    w.SetStringArray("astr", {"x", "y"});
    w.SetIntArray("au16", GgufType::kU16, {1, 2});
    w.SetFloatArray("af64", GgufType::kF64, {1.0});
    (void)w.AddTensor("q4k", TensorType::kQ4_K, {256}, Bytes(144, 9));
    (void)w.AddTensor("q6k", TensorType::kQ6_K, {256}, Bytes(210, 10));
    write("all_value_types.gguf", w);
  }
  return rc;
}
