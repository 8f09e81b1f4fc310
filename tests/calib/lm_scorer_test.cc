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
  EXPECT_NEAR(same->true_bits, 16.5, 0.5);  // fp16 + positions (16.5) + page tables, headers
  auto f32 = (*s)->ScoreSpec("fp32");
  ASSERT_TRUE(f32.ok());
  EXPECT_GT(f32->kl, 0.0);  // fp16 rounding of K/V is visible...
  EXPECT_LT(f32->kl, 1e-3);  // ...but tiny
  EXPECT_GT(f32->true_bits, 31.0);
  // A trial goes through spec_of.
  (*s)->spec_of = [](const CacheChoice&) -> Result<std::string> { return std::string("fp16"); };
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
  o.reference = "nonsense";
  EXPECT_FALSE(LmScorer::Create(*model_, text_, o).ok());
}

TEST(ReadTextFile, ClearErrorsForMissingDirectoryAndEmpty) {
  auto missing = ReadTextFile("/nonexistent/text.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("/nonexistent/text.txt"), std::string::npos);
  EXPECT_FALSE(ReadTextFile(testing::TempDir()).ok());
  const std::string empty = testing::TempDir() + "/calib_empty.txt";
  { std::ofstream(empty).flush(); }
  auto e = ReadTextFile(empty);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("empty"), std::string::npos);
  auto ok = ReadTextFile(std::string(HQEKV_SOURCE_DIR) + "/data/text/wiki.valid.raw");
  ASSERT_TRUE(ok.ok());
  EXPECT_GT(ok->size(), 100000u);
}

TEST(HqeKvSpecFor, GlobalAndPerLayerSpecs) {
  CacheChoice g;
  g.global = {0.5, 0.3, 0.1, 0.1};
  auto s = HqeKvSpecFor(g, "m=20", "/unused", "id", "name");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, "hqekv:ratios=0.500000/0.300000/0.100000/0.100000,m=20");
  CacheChoice l = g;
  l.per_layer = {{0.5, 0.3, 0.1, 0.1}, {0.6, 0.2, 0.1, 0.1}};
  const std::string path = testing::TempDir() + "/hqekv_spec_for_test.json";
  auto p = HqeKvSpecFor(l, "", path, "id", "name");
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(*p, "hqekv:profile=" + path);
  auto back = LoadProfile(path);
  ASSERT_TRUE(back.ok()) << back.message();
  ASSERT_EQ(back->per_layer.size(), 2u);
  EXPECT_DOUBLE_EQ(back->per_layer[1].r4, 0.6);
  EXPECT_EQ(back->model_identity, "id");
  // The policy reads the profile we write (per_layer rows included).
  KvGeometry geo{2, 2, 1, 8, 128};
  auto cache = MakeKvCache(*p, geo);
  ASSERT_TRUE(cache.ok()) << cache.message();
  KvGeometry g3{3, 2, 1, 8, 128};
  EXPECT_FALSE(MakeKvCache(*p, g3).ok());  // one row per layer
  auto global = MakeKvCache(*s, geo);
  ASSERT_TRUE(global.ok()) << global.message();
}

}  // namespace
}  // namespace hqekv::calib
