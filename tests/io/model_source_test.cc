// Loading the bundled stories260K model from GGUF and from the llama2.c pair.
#include "io/model_source.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <iterator>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "io/gguf.h"

namespace hqekv {
namespace {

const std::string kDir = std::string(HQEKV_SOURCE_DIR) + "/models/";

TEST(ModelSource, LoadsStoriesGguf) {
  auto m = LoadModel(kDir + "stories260K.gguf");
  ASSERT_TRUE(m.ok()) << m.message();
  const ModelConfig& c = (*m)->config;
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.d_model, 64);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.d_ff, 172);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_ctx, 2048);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.rope, RopeStyle::kNormal);
  EXPECT_FALSE(c.tied_output);  // this GGUF carries output.weight explicitly
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.attn_bias);
  EXPECT_EQ((*m)->tensors.size(), 48u);
  EXPECT_EQ((*m)->format, "gguf");
  EXPECT_EQ((*m)->gguf_version, 3u);
  EXPECT_EQ((*m)->file_bytes, 1185376u);
  EXPECT_EQ((*m)->identity.size(), 16u);
  const Tensor& wq = (*m)->Get("blk.0.attn_q.weight");
  EXPECT_EQ(wq.ne, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(wq.type, TensorType::kF32);
  EXPECT_EQ(wq.nbytes, 64u * 64 * 4);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(wq.data) % 32, 0u);  // zero copy, aligned
  const Tensor& down = (*m)->Get("blk.4.ffn_down.weight");
  EXPECT_EQ(down.ne, (std::vector<int64_t>{172, 64}));
  EXPECT_EQ((*m)->ParameterCount(),
            64 * 512 * 2 + 64 + 5 * (64 * 64 * 2 + 64 * 32 * 2 + 64 * 2 + 3 * 64 * 172));
  ASSERT_NE((*m)->tokenizer, nullptr);
  EXPECT_EQ((*m)->tokenizer->vocab_size(), 512);
  EXPECT_EQ((*m)->tokenizer->bos(), 1);
  EXPECT_EQ((*m)->tokenizer->eos(), 2);
}

TEST(ModelSource, LlamaCAndGgufHoldIdenticalTensors) {
  auto g = LoadModel(kDir + "stories260K.gguf");
  auto b = LoadModel(kDir + "stories260K.bin");  // finds tok512.bin next to it
  ASSERT_TRUE(g.ok()) << g.message();
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ((*b)->format, "llama2c");
  EXPECT_EQ((*b)->tokenizer_path, kDir + "tok512.bin");
  const ModelConfig &cg = (*g)->config, &cb = (*b)->config;
  EXPECT_EQ(cb.n_layers, cg.n_layers);
  EXPECT_EQ(cb.d_model, cg.d_model);
  EXPECT_EQ(cb.n_heads, cg.n_heads);
  EXPECT_EQ(cb.n_kv_heads, cg.n_kv_heads);
  EXPECT_EQ(cb.head_dim, cg.head_dim);
  EXPECT_EQ(cb.d_ff, cg.d_ff);
  EXPECT_EQ(cb.vocab_size, cg.vocab_size);
  EXPECT_EQ(cb.max_ctx, 512);  // llama2.c seq_len (the GGUF says 2048)
  EXPECT_TRUE(cb.tied_output);
  // Every llama2.c tensor exists in the GGUF with the same type, shape, bytes.
  EXPECT_EQ((*b)->tensors.size() + 1, (*g)->tensors.size());  // + output.weight
  for (const auto& [name, tb] : (*b)->tensors) {
    const Tensor* tg = (*g)->Find(name);
    ASSERT_NE(tg, nullptr) << name;
    EXPECT_EQ(tb.type, tg->type) << name;
    EXPECT_EQ(tb.ne, tg->ne) << name;
    ASSERT_EQ(tb.nbytes, tg->nbytes) << name;
    EXPECT_EQ(std::memcmp(tb.data, tg->data, tb.nbytes), 0) << name << " differs";
  }
  // The GGUF's explicit output.weight is the tied embedding.
  const Tensor& out_g = (*g)->Output();
  const Tensor& out_b = (*b)->Output();
  EXPECT_EQ(out_b.name, "token_embd.weight");
  ASSERT_EQ(out_g.nbytes, out_b.nbytes);
  EXPECT_EQ(std::memcmp(out_g.data, out_b.data, out_g.nbytes), 0);
  // Same tokenizer vocabulary.
  const Tokenizer &tg = *(*g)->tokenizer, &tb = *(*b)->tokenizer;
  ASSERT_EQ(tg.vocab_size(), tb.vocab_size());
  for (int id = 0; id < tg.vocab_size(); ++id) EXPECT_EQ(tg.Piece(id), tb.Piece(id)) << id;
  EXPECT_EQ(tg.Encode("Once upon a time", true), tb.Encode("Once upon a time", true));
}

TEST(ModelSource, ExplicitTokenizerPath) {
  auto b = LoadModel(kDir + "stories260K.bin", kDir + "tok512.bin");
  ASSERT_TRUE(b.ok()) << b.message();
  auto bad = LoadModel(kDir + "stories260K.bin", kDir + "does-not-exist.bin");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("does-not-exist.bin"), std::string::npos) << bad.message();
}

TEST(ModelSource, MissingFileNamesThePath) {
  auto m = LoadModel("/nonexistent/model.gguf");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("/nonexistent/model.gguf"), std::string::npos) << m.message();
}

TEST(ModelSource, NotAModelIsAnError) {
  // The tokenizer file is neither GGUF nor a plausible llama2.c checkpoint.
  auto m = LoadModel(kDir + "SOURCES.md");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("SOURCES.md"), std::string::npos) << m.message();
}

// Truncated, extended and header-corrupted copies of stories260K.bin (with
// tok512.bin next to them) all give errors naming the file.
TEST(ModelSource, CorruptLlama2cCheckpoints) {
  char tmpl[] = "/tmp/hqekv_l2c_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ifstream in(kDir + "stories260K.bin", std::ios::binary);
  const std::string bin((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ifstream tin(kDir + "tok512.bin", std::ios::binary);
  const std::string tok((std::istreambuf_iterator<char>(tin)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bin.size(), 1056540u);
  std::ofstream(dir + "/tok512.bin", std::ios::binary) << tok;
  auto expect_error = [&](const std::string& bytes, const std::string& what,
                          const std::string& part) {
    const std::string path = dir + "/m.bin";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    auto m = LoadModel(path);
    ASSERT_FALSE(m.ok()) << what;
    EXPECT_NE(m.message().find(path), std::string::npos) << what << ": " << m.message();
    EXPECT_NE(m.message().find(part), std::string::npos) << what << ": " << m.message();
    std::remove(path.c_str());
  };
  for (size_t n :
       {size_t{0}, size_t{3}, size_t{27}, size_t{28}, size_t{1000}, bin.size() / 2, bin.size() - 1})
    expect_error(bin.substr(0, n), "truncated to " + std::to_string(n),
                 n < 28 ? "too small" : "size mismatch");
  expect_error(bin + std::string(4, '\0'), "extended", "size mismatch");
  std::string bad = bin;
  const int32_t zero = 0, huge = 1 << 30, odd = 7;
  std::memcpy(&bad[8], &zero, 4);  // n_layers = 0
  expect_error(bad, "zero layers", "n_layers");
  bad = bin;
  std::memcpy(&bad[4], &huge, 4);  // hidden_dim
  expect_error(bad, "huge hidden", "hidden_dim");
  bad = bin;
  std::memcpy(&bad[16], &odd, 4);  // n_kv_heads 7 does not divide 8 heads
  expect_error(bad, "kv heads", "inconsistent header");
  // Untied flag (negative vocab) without the classifier bytes: size mismatch.
  bad = bin;
  const int32_t neg = -512;
  std::memcpy(&bad[20], &neg, 4);
  expect_error(bad, "untied", "size mismatch");
  std::remove((dir + "/tok512.bin").c_str());
  rmdir(tmpl);
}

}  // namespace
}  // namespace hqekv
