#include "calib/lm_scorer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "policy/factory.h"

namespace hqekv::calib {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class LmScorerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = LoadModel(std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf");
    ASSERT_TRUE(m.ok()) << m.message();
    model_ = std::move(m).value().release();
    text_ = ReadFile(std::string(HQEKV_SOURCE_DIR) + "/data/text/wiki.valid.raw").substr(0, 20000);
  }
  static void TearDownTestSuite() { delete model_; }
  static ModelSource* model_;
  static std::string text_;
};
ModelSource* LmScorerTest::model_ = nullptr;
std::string LmScorerTest::text_;

TEST_F(LmScorerTest, ReferenceCacheScoresZeroAndPlainCachesAreCheap) {
  LmScorerOptions o;
  o.tokens = 256;
  o.window = 128;
  o.prefill = 96;
  auto s = LmScorer::Create(*model_, text_, o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ((*s)->tokens_used(), 256);
  EXPECT_EQ((*s)->scored_positions(), 2 * 32);
  auto same = (*s)->ScoreSpec("fp16");
  ASSERT_TRUE(same.ok()) << same.message();
  EXPECT_EQ(same->kl, 0.0);  // deterministic: the reference itself
  // fp16 + positions (16.5) + the last page's slack (127 tokens measured, as
  // ppl does, in 32-token pages) + page tables and headers.
  EXPECT_GE(same->true_bits, 16.5);
  EXPECT_LE(same->true_bits, 17.25);
  auto f32 = (*s)->ScoreSpec("fp32");
  ASSERT_TRUE(f32.ok());
  EXPECT_GT(f32->kl, 0.0);   // fp16 rounding of K/V is visible...
  EXPECT_LT(f32->kl, 1e-3);  // ...but tiny
  EXPECT_GT(f32->true_bits, 31.0);
  // A trial goes through cache_of.
  (*s)->cache_of = [](const CacheChoice&) { return TrialCache{"fp16", {}}; };
  auto t = (*s)->Score({});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->kl, 0.0);
}

TEST_F(LmScorerTest, BadInputsAreClearErrors) {
  LmScorerOptions o;
  o.window = 4096;  // the model has 512 positions
  auto big = LmScorer::Create(*model_, text_, o);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.message().find("context"), std::string::npos);
  o.window = 128;
  o.prefill = 128;
  EXPECT_FALSE(LmScorer::Create(*model_, text_, o).ok());
  o.prefill = 0;
  auto tiny = LmScorer::Create(*model_, "a few words", o);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.message().find("fewer than one window"), std::string::npos);
  auto empty = LmScorer::Create(*model_, "", o);  // an empty calibration text
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("fewer than one window"), std::string::npos);
  o.reference = "nonsense";
  EXPECT_FALSE(LmScorer::Create(*model_, text_, o).ok());
}

TEST(HqeKvTrialCache, GlobalSpecAndInMemoryPerLayerRatios) {
  CacheChoice g;
  g.global = {0.5, 0.3, 0.1, 0.1};
  const TrialCache s = HqeKvTrialCache(g, "m=20");
  EXPECT_EQ(s.spec, "hqekv:ratios=0.500000/0.300000/0.100000/0.100000,m=20");
  EXPECT_TRUE(s.layer_ratios.empty());
  CacheChoice l = g;
  l.per_layer = {{0.5, 0.3, 0.1, 0.1}, {0.6, 0.2, 0.1, 0.1}};
  const TrialCache p = HqeKvTrialCache(l, "");
  EXPECT_EQ(p.spec, "hqekv");
  ASSERT_EQ(p.layer_ratios.size(), 2u);
  EXPECT_DOUBLE_EQ(p.layer_ratios[1].r4, 0.6);
  EXPECT_EQ(HqeKvTrialCache(l, "m=20").spec, "hqekv:m=20");
  // The factory takes the rows in memory (one per layer).
  KvGeometry geo{2, 2, 1, 8, 128};
  policy::CacheContext ctx;
  ctx.layer_ratios = p.layer_ratios;
  auto cache = policy::CreateCache(*policy::ParseSpec(p.spec), geo, ctx);
  ASSERT_TRUE(cache.ok()) << cache.message();
  KvGeometry g3{3, 2, 1, 8, 128};
  EXPECT_FALSE(policy::CreateCache(*policy::ParseSpec(p.spec), g3, ctx).ok());
  auto global = MakeKvCache(s.spec, geo);
  ASSERT_TRUE(global.ok()) << global.message();
}

}  // namespace
}  // namespace hqekv::calib
