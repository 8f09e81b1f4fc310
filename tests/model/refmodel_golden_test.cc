// The engine runs hqekv's own trained reference model (models/refmodel-4l.gguf, trained and
// exported by tools/train/) exactly as PyTorch does: the logits for a fixed 16-token prompt match
// the float32 PyTorch logits stored in tests/data/refmodel-4l.golden.{json,f32}
// (tools/train/golden.py) within 1e-3, through the batched prefill path and through one-token
// decode steps, with an fp32 cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/plain_cache.h"
#include "core/parallel.h"
#include "model/llama.h"
#include "io/model_source.h"
#include "../source_root.h"

namespace hqekv {
namespace {

constexpr float kTolerance = 1e-3f;  // F32 weights: only summation order differs from PyTorch

struct Golden {
  std::string model_path, prompt;
  std::vector<int32_t> tokens;  // BOS first
  std::vector<int> rows;        // positions whose logits are stored
  int vocab = 0;
  std::vector<float> logits;  // [rows.size()][vocab]
};

Golden LoadGolden() {
  Golden g;
  std::ifstream jf(test::kSourceRoot + "/tests/data/refmodel-4l.golden.json");
  EXPECT_TRUE(jf.good()) << "missing tests/data/refmodel-4l.golden.json";
  if (!jf.good()) return g;
  const nlohmann::json j = nlohmann::json::parse(jf);
  g.model_path = test::kSourceRoot + "/" + j.at("model").get<std::string>();
  g.prompt = j.at("prompt").get<std::string>();
  g.tokens = j.at("tokens").get<std::vector<int32_t>>();
  g.rows = j.at("rows").get<std::vector<int>>();
  g.vocab = j.at("vocab").get<int>();
  g.logits.resize(g.rows.size() * static_cast<size_t>(g.vocab));
  std::ifstream bf(test::kSourceRoot + "/tests/data/" + j.at("logits_file").get<std::string>(),
                   std::ios::binary);
  bf.read(reinterpret_cast<char*>(g.logits.data()),
          static_cast<std::streamsize>(g.logits.size() * sizeof(float)));
  EXPECT_EQ(bf.gcount(), static_cast<std::streamsize>(g.logits.size() * sizeof(float)))
      << "short golden .f32 file";
  return g;
}

// Largest |engine - golden| over the stored rows; `all` holds engine logits [n_tokens][vocab].
float MaxDiff(const Golden& g, const std::vector<float>& all) {
  float worst = 0;
  for (size_t r = 0; r < g.rows.size(); ++r)
    for (int v = 0; v < g.vocab; ++v)
      worst = std::max(worst, std::fabs(all[static_cast<size_t>(g.rows[r]) * g.vocab + v] -
                                        g.logits[r * g.vocab + v]));
  return worst;
}

class RefModelGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    g_ = LoadGolden();
    ASSERT_EQ(g_.tokens.size(), 16u);
    auto src = LoadModel(g_.model_path);
    ASSERT_TRUE(src.ok()) << src.message();
    src_ = std::move(*src);
    auto m = LlamaModel::Create(*src_);
    ASSERT_TRUE(m.ok()) << m.message();
    model_ = std::move(*m);
    ASSERT_EQ(model_->vocab_size(), g_.vocab);
  }
  std::unique_ptr<KvCache> Fp32Cache() {
    auto c = PlainKvCache::Create(model_->CacheGeometry(64), PlainPrecision::kF32);
    EXPECT_TRUE(c.ok()) << c.message();
    return c.ok() ? std::move(*c) : nullptr;
  }
  Golden g_;
  std::unique_ptr<ModelSource> src_;
  std::unique_ptr<LlamaModel> model_;
};

TEST_F(RefModelGolden, FileHasTheTrainedShape) {
  const ModelConfig& c = src_->config;
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.n_layers, 4);
  EXPECT_EQ(c.d_model, 256);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.d_ff, 512);
  EXPECT_EQ(c.vocab_size, 2048);
  EXPECT_EQ(c.max_ctx, 2048);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_TRUE(c.tied_output);
}

TEST_F(RefModelGolden, PrefillLogitsMatchPyTorch) {
  for (int threads : {1, 2}) {
    SetNumThreads(threads);
    auto cache = Fp32Cache();
    ASSERT_NE(cache, nullptr);
    const int n = static_cast<int>(g_.tokens.size());
    std::vector<int32_t> pos(n);
    for (int i = 0; i < n; ++i) pos[i] = i;
    std::vector<float> all(static_cast<size_t>(n) * g_.vocab);
    ASSERT_TRUE(
        model_->Forward(g_.tokens.data(), pos.data(), n, *cache, Logits::kAll, all.data(), true)
            .ok());
    const float diff = MaxDiff(g_, all);
    EXPECT_LE(diff, kTolerance) << "threads " << threads;
    RecordProperty("prefill_max_abs_diff_threads" + std::to_string(threads), std::to_string(diff));
  }
  SetNumThreads(1);
}

TEST_F(RefModelGolden, DecodeLogitsMatchPyTorch) {
  auto cache = Fp32Cache();
  ASSERT_NE(cache, nullptr);
  const int n = static_cast<int>(g_.tokens.size());
  std::vector<float> all(static_cast<size_t>(n) * g_.vocab);
  for (int i = 0; i < n; ++i) {  // BOS as a one-token prompt, then one decode step per token
    ASSERT_TRUE(model_
                    ->Forward(&g_.tokens[i], &i, 1, *cache, Logits::kLast,
                              &all[static_cast<size_t>(i) * g_.vocab], i == 0)
                    .ok());
  }
  const float diff = MaxDiff(g_, all);
  EXPECT_LE(diff, kTolerance);
  RecordProperty("decode_max_abs_diff", std::to_string(diff));
}

TEST_F(RefModelGolden, PerturbedLogitsAreCaught) {
  // The comparison itself must be able to fail: a 2e-3 error in one logit exceeds the tolerance.
  std::vector<float> all(g_.tokens.size() * static_cast<size_t>(g_.vocab), 0.0f);
  for (size_t r = 0; r < g_.rows.size(); ++r)
    std::copy_n(&g_.logits[r * g_.vocab], g_.vocab,
                &all[static_cast<size_t>(g_.rows[r]) * g_.vocab]);
  EXPECT_EQ(MaxDiff(g_, all), 0.0f);
  all[static_cast<size_t>(g_.rows.back()) * g_.vocab + 7] += 2e-3f;
  EXPECT_GT(MaxDiff(g_, all), kTolerance);
}

TEST_F(RefModelGolden, TokenizerReproducesTheTrainingTokenizer) {
  // SentencePiece (Python) ids, BOS first, of strings with whitespace runs, newlines, digits and
  // non-ASCII text (byte fallback); the first case is the golden prompt.
  std::ifstream jf(test::kSourceRoot + "/tests/data/refmodel-4l.golden.json");
  const nlohmann::json j = nlohmann::json::parse(jf);
  const auto& cases = j.at("tokenizer_cases");
  ASSERT_GE(cases.size(), 4u);
  for (const auto& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    EXPECT_EQ(src_->tokenizer->Encode(text, /*add_bos=*/true),
              c.at("ids").get<std::vector<int32_t>>())
        << text;
  }
  const std::vector<int32_t> first = cases[0].at("ids").get<std::vector<int32_t>>();
  ASSERT_GE(first.size(), g_.tokens.size());
  EXPECT_EQ(
      std::vector<int32_t>(first.begin(), first.begin() + static_cast<long>(g_.tokens.size())),
      g_.tokens);
}

}  // namespace
}  // namespace hqekv
