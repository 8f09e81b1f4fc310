#include "eval/study/quant_study_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cache/plain_cache.h"
#include "toy_model.h"

namespace hqekv::eval {
namespace {

TEST(RecordingKvCache, RecordsRowsPerHeadInOrderAndForwards) {
  const KvGeometry g{2, 2, 2, 4, 64};
  RecordingKvCache rec(std::move(PlainKvCache::Create(g, PlainPrecision::kF32)).value());
  // 3 tokens x 2 heads x 4 dims, value = 100 * token + 10 * head + dim.
  std::vector<float> k(24), v(24);
  for (int t = 0; t < 3; ++t)
    for (int h = 0; h < 2; ++h)
      for (int d = 0; d < 4; ++d) {
        k[(t * 2 + h) * 4 + d] = 100.f * t + 10.f * h + d;
        v[(t * 2 + h) * 4 + d] = -(100.f * t + 10.f * h + d);
      }
  const int32_t pos[3] = {0, 1, 2};
  ASSERT_TRUE(rec.Append(1, k.data(), v.data(), pos, 3).ok());
  ASSERT_EQ(rec.keys(1, 1).size(), 12u);
  EXPECT_TRUE(rec.keys(0, 0).empty());
  EXPECT_EQ(rec.keys(1, 1)[4], 110.f);                          // token 1, head 1, dim 0
  EXPECT_EQ(rec.values(1, 0)[9], -201.f);                       // token 2, head 0, dim 1
  EXPECT_EQ(rec.Stats().original_elements, 0 + 3 * 2 * 4 * 2);  // the inner cache got the rows
  // Bad input is rejected by the inner cache and not recorded.
  EXPECT_FALSE(rec.Append(5, k.data(), v.data(), pos, 1).ok());
  rec.CutToChunks(2);
  EXPECT_EQ(rec.keys(1, 1).size(), 8u);  // 3 tokens -> 2
}

TEST(ModelQuantStudy, PerLayerAndOverallTables) {
  testing::ToyModel model(256);
  std::string text;
  for (int i = 0; i < 40; ++i) text += "Once upon a time there was a little cat. ";
  ModelQuantStudyOptions o;
  o.max_windows = 2;
  auto s = RunModelQuantStudy(model, text, "inline", o);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->windows, 2);
  EXPECT_EQ(s->tokens, 512);
  ASSERT_EQ(s->k_layers.size(), 2u);
  // Each layer: 2 windows x 256 tokens (whole chunks) x 1 KV head.
  EXPECT_EQ(s->k_layers[0].options.vectors, 512);
  EXPECT_EQ(s->k_all.options.vectors, 1024);
  for (const auto* r : {&s->k_all, &s->v_all}) {
    ASSERT_EQ(r->correlation.size(), 4u);  // 4/2/1 bits + eviction
    for (const auto& c : r->correlation) {
      EXPECT_GE(c.pearson, -1.0);
      EXPECT_LE(c.pearson, 1.0);
      EXPECT_GT(c.mean_loss, 0.0);
    }
    EXPECT_EQ(r->layouts.size(), 6u);  // 3 bit widths x 2 layouts
  }
  const std::string t = ModelQuantStudyTables(*s);
  EXPECT_NE(t.find("Table 1"), std::string::npos);
  EXPECT_NE(t.find("Table 2"), std::string::npos);
  EXPECT_NE(t.find("  all    K"), std::string::npos);
  EXPECT_EQ(ModelQuantStudyJson(*s)["layers"].size(), 2u);
  EXPECT_FALSE(RunModelQuantStudy(model, "tiny", "t", o).ok());
}

}  // namespace
}  // namespace hqekv::eval
