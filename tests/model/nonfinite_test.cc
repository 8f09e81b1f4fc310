// Silent wrong numbers (issue 19 class 4): a NaN or infinity in a weight must
// give an error that names where it appeared, never logits (a NaN printed as
// a perplexity, KL 0, `<unk>` text).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>
#include <vector>

#include "core/file.h"
#include "io/gguf.h"
#include "io/model_source.h"
#include "io/synthetic.h"
#include "model/llama.h"
#include "policy/factory.h"
#include "../temp_path.h"

namespace hqekv {
namespace {

// A small synthetic model whose F32 tensor `name` has `value` at element `at`.
std::string PoisonedModel(const std::string& name, float value, int64_t at,
                          const std::string& tag) {
  const std::string path = hqekv::test::TempPath("hqekv_nonfinite_") + tag + ".gguf";
  std::filesystem::remove(path);
  SyntheticSpec s;
  s.type = TensorType::kF32;
  EXPECT_TRUE(WriteSyntheticGguf(s, path).ok());
  auto bytes = ReadFileChecked(path, uint64_t{1} << 30);
  EXPECT_TRUE(bytes.ok());
  std::string img = *bytes;
  auto g = ParseGguf(reinterpret_cast<const uint8_t*>(img.data()), img.size(), path);
  EXPECT_TRUE(g.ok()) << g.message();
  const GgufTensorInfo* t = g->FindTensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return path;
  EXPECT_EQ(t->type, TensorType::kF32) << name;
  std::memcpy(&img[g->data_offset + t->offset + at * sizeof(float)], &value, sizeof value);
  EXPECT_TRUE(WriteFileAtomic(path, img).ok());
  return path;
}

// Prefill of 5 tokens; returns Forward's status.
Status RunPrefill(const std::string& path, std::vector<float>* logits) {
  auto src = LoadModel(path);
  if (!src.ok()) return src.error();
  auto m = LlamaModel::Create(**src);
  if (!m.ok()) return m.error();
  auto cache = MakeKvCache("fp16", (*m)->CacheGeometry(64));
  if (!cache.ok()) return cache.error();
  const std::vector<int32_t> toks = {1, 17, 29, 5, 64}, pos = {0, 1, 2, 3, 4};
  logits->assign(5 * (*src)->config.vocab_size, 0.0f);
  return (*m)->Forward(toks.data(), pos.data(), 5, **cache, Logits::kAll, logits->data(), true);
}

TEST(NonFinite, CleanModelRuns) {
  std::vector<float> logits;
  const Status st = RunPrefill(PoisonedModel("output_norm.weight", 1.0f, 0, "clean"), &logits);
  ASSERT_TRUE(st.ok()) << st.message();
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

TEST(NonFinite, NanInOutputNormNamesTheOutputHead) {
  std::vector<float> logits;
  const Status st = RunPrefill(PoisonedModel("output_norm.weight", NAN, 3, "outnorm"), &logits);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("NaN in the activations after the output head (output_norm, "
                              "output) at position 0 (token 1)"),
            std::string::npos)
      << st.message();
}

TEST(NonFinite, InfInALayerNamesTheLayer) {
  std::vector<float> logits;
  const Status st = RunPrefill(
      PoisonedModel("blk.1.ffn_norm.weight", std::numeric_limits<float>::infinity(), 0, "ffn1"),
      &logits);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("after layer 1's feed-forward (blk.1.ffn_*)"), std::string::npos)
      << st.message();
}

TEST(NonFinite, NanInOneEmbeddingRowNamesItsPosition) {
  std::vector<float> logits;
  SyntheticSpec s;
  // Token 29 (third prompt token, position 2): row 29 of token_embd.
  const Status st =
      RunPrefill(PoisonedModel("token_embd.weight", NAN, 29 * s.d_model + 1, "embd"), &logits);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("after the token embedding (token_embd) at position 2 (token 29)"),
            std::string::npos)
      << st.message();
}

// A NaN or infinity in attn_q / attn_k used to be absorbed by the softmax
// (finite logits off by nats, for short prompts, every cache but fp32): the
// error must come at the first position, for one token (the decode path) and
// for a prompt, under every kind of cache.
TEST(NonFinite, NanOrInfInQueryOrKeyWeightsIsAnErrorUnderEveryCache) {
  const std::string q_path = PoisonedModel("blk.0.attn_q.weight", NAN, 7, "attnq");
  const std::string k_path =
      PoisonedModel("blk.1.attn_k.weight", std::numeric_limits<float>::infinity(), 300, "attnk");
  for (const auto& [path, what] : {std::pair{q_path, "layer 0's attn_q projection"},
                                   std::pair{k_path, "layer 1's attn_k projection"}}) {
    auto src = LoadModel(path);
    ASSERT_TRUE(src.ok()) << src.message();
    auto m = LlamaModel::Create(**src);
    ASSERT_TRUE(m.ok()) << m.message();
    for (const char* spec : {"fp16", "fp8", "int8", "kivi:nominal_bits=2", "hqekv:nominal_bits=3.2",
                             "h2o:keep=0.5", "fp32"}) {
      for (const int n : {1, 5}) {
        auto cache = MakeKvCache(spec, (*m)->CacheGeometry(64));
        ASSERT_TRUE(cache.ok()) << spec << ": " << cache.message();
        const std::vector<int32_t> toks = {1, 17, 29, 5, 64}, pos = {0, 1, 2, 3, 4};
        std::vector<float> logits(size_t(n) * (*src)->config.vocab_size);
        const Status st =
            (*m)->Forward(toks.data(), pos.data(), n, **cache, Logits::kAll, logits.data(), true);
        ASSERT_FALSE(st.ok()) << spec << " n=" << n << ": finite logits from non-finite weights";
        EXPECT_NE(st.message().find(what), std::string::npos) << spec << ": " << st.message();
        EXPECT_NE(st.message().find("at position 0"), std::string::npos) << st.message();
      }
    }
  }
}

}  // namespace
}  // namespace hqekv
