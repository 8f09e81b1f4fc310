// THE acceptance test: greedy decoding from BOS on the bundled stories260K
// model reproduces llama2.c's known 200-token output, token for token and as
// text, from the GGUF file and from the llama2.c checkpoint + tokenizer.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "core/parallel.h"
#include "model/generate.h"
#include "model/llama.h"
#include "io/model_source.h"
#include "policy/factory.h"
#include "../source_root.h"

namespace hqekv {
namespace {

std::vector<int32_t> ExpectedIds() {
  std::ifstream f(test::kSourceRoot + "/tests/data/stories260K.greedy200.ids");
  std::vector<int32_t> ids;
  int32_t x;
  while (f >> x) ids.push_back(x);
  return ids;
}

std::string ExpectedText() {
  std::ifstream f(test::kSourceRoot + "/tests/data/stories260K.greedy200.txt", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void CheckGreedy(const std::string& model_path, const std::string& tok_path, const std::string& kv,
                 int threads) {
  SetNumThreads(threads);
  auto src = LoadModel(model_path, tok_path);
  ASSERT_TRUE(src.ok()) << src.message();
  auto m = LlamaModel::Create(**src);
  ASSERT_TRUE(m.ok()) << m.message();
  auto cache = MakeKvCache(kv, (*m)->CacheGeometry(512));
  ASSERT_TRUE(cache.ok());
  auto sampler = Sampler::Create(SamplerConfig{});
  ASSERT_TRUE(sampler.ok());
  const Tokenizer& tok = *(*src)->tokenizer;
  GenerateOptions opt;
  opt.max_new = 200;
  opt.stop_at_eog = false;
  auto r = Generate(**m, **cache, {tok.bos()}, *sampler, opt);
  ASSERT_TRUE(r.ok()) << r.message();
  const std::vector<int32_t> want = ExpectedIds();
  ASSERT_EQ(want.size(), 200u);
  EXPECT_EQ(r->tokens, want);
  const std::string text = tok.Decode(r->tokens);
  std::string expect = ExpectedText();
  while (!expect.empty() && expect.back() == '\n' && (text.empty() || text.back() != '\n'))
    expect.pop_back();
  EXPECT_EQ(text, expect);
  SetNumThreads(1);
}

TEST(StoriesGreedy, GgufReproducesLlama2cOutput) {
  CheckGreedy(test::kSourceRoot + "/models/stories260K.gguf", "", "fp32", 1);
}

TEST(StoriesGreedy, Llama2cCheckpointReproducesLlama2cOutput) {
  CheckGreedy(test::kSourceRoot + "/models/stories260K.bin",
              test::kSourceRoot + "/models/tok512.bin", "fp32", 2);
}

TEST(StoriesGreedy, Fp16CacheReproducesItToo) {
  CheckGreedy(test::kSourceRoot + "/models/stories260K.gguf", "", "fp16", 2);
}

}  // namespace
}  // namespace hqekv
