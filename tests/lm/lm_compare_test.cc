#include "lm/lm_compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "cache/plain_cache.h"
#include "io/model_source.h"
#include "policy/factory.h"

namespace hqekv::lm {
namespace {

// A test double: an fp32 cache that perturbs every appended K row, so its
// attention (and the model's predictions) differ from the reference.
class NoisyCache : public KvCache {
 public:
  NoisyCache(const KvGeometry& g, float sd)
      : inner_(PlainKvCache::Create(g, PlainPrecision::kF32).value()), sd_(sd) {}
  const KvGeometry& geometry() const override { return inner_->geometry(); }
  std::string Describe() const override { return "noisy"; }
  void Reset() override {
    inner_->Reset();
    rng_.seed(5);
  }
  Status Append(int layer, const float* k, const float* v, const int32_t* pos, int n) override {
    std::vector<float> kk(k,
                          k + static_cast<size_t>(n) * geometry().n_kv_heads * geometry().head_dim);
    std::normal_distribution<float> nd(0.f, sd_);
    for (float& x : kk) x += nd(rng_);
    return inner_->Append(layer, kk.data(), v, pos, n);
  }
  Status Attend(int layer, const float* q, const int32_t* qp, int n, float* out) override {
    return inner_->Attend(layer, q, qp, n, out);
  }
  Status EndBatch(int n, bool p) override { return inner_->EndBatch(n, p); }
  KvStats Stats() const override { return inner_->Stats(); }

 private:
  std::unique_ptr<PlainKvCache> inner_;
  float sd_;
  std::mt19937 rng_{5};
};

class LmCompare : public testing::Test {
 protected:
  void SetUp() override {
    auto src = LoadModel(std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf");
    ASSERT_TRUE(src.ok()) << src.message();
    src_ = std::move(src).value();
    model_ = LlamaModel::Create(*src_).value();
    tokens_ = src_->tokenizer->Encode(
        "Once upon a time, there was a little dog named Max. Max liked to run in the park with his "
        "friend Tom. "
        "One day, Tom found a big red ball under a tree.",
        true);
    ASSERT_GT(tokens_.size(), 30u);
  }
  std::unique_ptr<KvCache> Cache(const std::string& spec) {
    return MakeKvCache(spec, model_->CacheGeometry(256)).value();
  }

  std::unique_ptr<ModelSource> src_;
  std::unique_ptr<LlamaModel> model_;
  std::vector<int32_t> tokens_;
};

TEST_F(LmCompare, SameCacheTypeScoresZeroKlAndFullAgreement) {
  auto ref_cache = Cache("fp16");
  auto ref = ComputeReference(*model_, *ref_cache, tokens_, 10);
  ASSERT_TRUE(ref.ok()) << ref.message();
  EXPECT_EQ(ref->positions(), static_cast<int>(tokens_.size()) - 10);
  auto test_cache = Cache("fp16");
  auto s = ScoreAgainstReference(*model_, *test_cache, *ref);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->kl, 0.0);
  EXPECT_EQ(s->top1_agree, 1.0);
  EXPECT_NEAR(s->ppl, ref->Perplexity(), 1e-9 * s->ppl);
  EXPECT_GT(s->ppl, 1.0);
  EXPECT_LT(s->ppl, 30.0);  // the model knows this kind of text
  // fp16 K/V plus an int32 position per token shared by 4 KV heads x head_dim
  // 8 x (K, V): 16.5 bits for what is held, times the slack of the cache's
  // 32-token pages (the reported bytes are the allocated ones), plus page
  // tables and layer headers (a few % on this tiny head).
  const double n = static_cast<double>(s->stats_end.layers[0].kept_tokens) / 4;
  const double paged = 16.5 * std::ceil(n / 32) * 32 / n;
  EXPECT_GE(s->stats_end.true_bits(), paged);
  EXPECT_LE(s->stats_end.true_bits(), paged * 1.05);
  EXPECT_LT(s->stats_after_prefill.bytes.total(), s->stats_end.bytes.total());
}

TEST_F(LmCompare, PerturbedCacheHasPositiveKlAndTopKIsALowerBound) {
  auto ref_cache = Cache("fp16");
  auto exact = ComputeReference(*model_, *ref_cache, tokens_, 8);
  auto topk = ComputeReference(*model_, *ref_cache, tokens_, 8, 16);
  ASSERT_TRUE(exact.ok() && topk.ok());
  EXPECT_EQ(topk->top_k, 16);
  NoisyCache noisy(model_->CacheGeometry(256), 0.5f);
  auto se = ScoreAgainstReference(*model_, noisy, *exact);
  auto st = ScoreAgainstReference(*model_, noisy, *topk);
  ASSERT_TRUE(se.ok() && st.ok());
  EXPECT_GT(se->kl, 1e-4);
  EXPECT_LE(st->kl, se->kl + 1e-9);
  EXPECT_GT(st->kl, 0.5 * se->kl);                // most of the mass is in the top 16 of 512
  EXPECT_NEAR(st->ppl, se->ppl, 1e-9 * se->ppl);  // same run (noise reseeded by Reset)
  // fp32 vs fp16 reference: tiny but nonzero divergence.
  auto f32 = Cache("fp32");
  auto s32 = ScoreAgainstReference(*model_, *f32, *exact);
  ASSERT_TRUE(s32.ok());
  EXPECT_LT(s32->kl, 1e-4);
  EXPECT_LT(s32->kl, se->kl);
}

TEST_F(LmCompare, SlidingPerplexityOneWindowEqualsTeacherForcing) {
  auto c = Cache("fp32");
  auto ref = ComputeReference(*model_, *c, tokens_, 1);
  ASSERT_TRUE(ref.ok());
  auto p = SlidingPerplexity(*model_, *c, tokens_, 256, 0);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->windows, 1);
  EXPECT_EQ(p->scored, static_cast<int>(tokens_.size()) - 1);
  EXPECT_NEAR(p->ppl, ref->Perplexity(), 1e-4 * p->ppl);
  // Short windows with overlap: every token after the first scored once; less context -> higher
  // ppl.
  auto w = SlidingPerplexity(*model_, *c, tokens_, 8, 4);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->scored, static_cast<int>(tokens_.size()) - 1);
  EXPECT_GT(w->windows, 5);
  EXPECT_GT(w->ppl, p->ppl);
}

TEST_F(LmCompare, RejectsBadArguments) {
  auto c = Cache("fp16");
  EXPECT_FALSE(ComputeReference(*model_, *c, tokens_, 0).ok());
  EXPECT_FALSE(ComputeReference(*model_, *c, tokens_, static_cast<int>(tokens_.size())).ok());
  EXPECT_FALSE(SlidingPerplexity(*model_, *c, tokens_, 1, 1).ok());
  EXPECT_FALSE(SlidingPerplexity(*model_, *c, tokens_, 64, 65).ok());
  EXPECT_FALSE(SlidingPerplexity(*model_, *c, tokens_, 1024, 0).ok());  // > cache context
  EXPECT_FALSE(SlidingPerplexity(*model_, *c, {1}, 64, 0).ok());
}

}  // namespace
}  // namespace hqekv::lm
