// The quantization study: option checks, the statistics, and the two findings
// it reproduces on Gaussian vectors.
#include "eval/study/quant_study.h"

#include <gtest/gtest.h>

namespace hqekv::eval {
namespace {

QuantStudyOptions Small() {
  QuantStudyOptions o;
  o.vectors = 1024;
  o.formats = {"int8", "u4:chan:had"};
  return o;
}

TEST(QuantStudy, PearsonOfKnownSeries) {
  EXPECT_NEAR(Pearson({1, 2, 3, 4}, {2, 4, 6, 8}), 1.0, 1e-12);
  EXPECT_NEAR(Pearson({1, 2, 3, 4}, {8, 6, 4, 2}), -1.0, 1e-12);
  EXPECT_NEAR(Pearson({1, 2, 3}, {1, 3, 2}), 0.5, 1e-12);
  EXPECT_EQ(Pearson({1, 1, 1}, {1, 2, 3}), 0.0);  // constant series: defined as 0
}

TEST(QuantStudy, RejectsBadOptionsWithClearMessages) {
  struct Case {
    void (*edit)(QuantStudyOptions&);
    const char* needle;
  };
  const Case cases[] = {
      {[](QuantStudyOptions& o) { o.vectors = 0; }, "--vectors must be > 0"},
      {[](QuantStudyOptions& o) { o.dim = -1; }, "--dim must be > 0"},
      {[](QuantStudyOptions& o) { o.chunk = 0; }, "--chunk must be > 0"},
      {[](QuantStudyOptions& o) { o.group = -4; }, "--group must be > 0"},
      {[](QuantStudyOptions& o) { o.vectors = 1000; }, "does not divide --vectors"},
      {[](QuantStudyOptions& o) { o.group = 48; }, "does not divide --dim"},
      {[](QuantStudyOptions& o) {
         o.bits = {4, 3};
       },
       "bit width 3 out of range"},
      {[](QuantStudyOptions& o) { o.bits = {}; }, "at least one bit width"},
      {[](QuantStudyOptions& o) { o.formats = {"q4"}; }, "unknown format 'q4'"},
      {[](QuantStudyOptions& o) { o.formats = {"n8"}; }, "1, 2 or 4 bits"},
      {[](QuantStudyOptions& o) {
         o.dim = 96;
         o.formats = {"u4:had"};
       },
       "power-of-two"},
  };
  for (const Case& c : cases) {
    QuantStudyOptions o = Small();
    c.edit(o);
    auto r = RunQuantStudy(o);
    ASSERT_FALSE(r.ok()) << c.needle;
    EXPECT_NE(r.message().find(c.needle), std::string::npos) << r.message();
  }
  auto wrong = RunQuantStudyOn(std::vector<float>(10), Small(), "test");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("expected 1024 x 128"), std::string::npos);
}

TEST(QuantStudy, ReproducesTheFindingsOnGaussianVectors) {
  auto r = RunQuantStudy(Small());
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->correlation.size(), 4u);  // 4/2/1 bits + eviction
  for (const auto& c : r->correlation) {
    EXPECT_GT(c.pearson, 0.4) << c.conversion;  // range predicts loss
    EXPECT_LT(c.pearson, 1.0) << c.conversion;
  }
  EXPECT_EQ(r->correlation.back().conversion, "eviction");
  EXPECT_NEAR(r->correlation.back().mean_loss, 128.0, 3.0);  // E|x|^2 = D for N(0, 1)
  // Losses shrink with bits: about 4x per extra bit at 2 -> 4 bits.
  EXPECT_GT(r->correlation[1].mean_loss, 10 * r->correlation[0].mean_loss);
  ASSERT_EQ(r->layouts.size(), 6u);
  for (const auto& l : r->layouts) {
    if (l.bits == 4) {
      EXPECT_EQ(l.better, "uniform") << l.layout;
    }
    if (l.bits == 1) {
      EXPECT_EQ(l.better, "normalized") << l.layout;
    }
    EXPECT_GT(l.uniform_loss, 0.0);
    EXPECT_GT(l.normal_loss, 0.0);
  }
  ASSERT_EQ(r->formats.size(), 2u);
  EXPECT_LT(r->formats[0].mean_loss, r->layouts[0].uniform_loss);  // int8 beats 4-bit
}

TEST(QuantStudy, SeededAndJsonHoldsBothTables) {
  auto a = RunQuantStudy(Small());
  auto b = RunQuantStudy(Small());
  QuantStudyOptions other = Small();
  other.seed = 7;
  auto c = RunQuantStudy(other);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const nlohmann::json ja = QuantStudyJson(*a);
  EXPECT_EQ(ja, QuantStudyJson(*b));
  EXPECT_NE(ja, QuantStudyJson(*c));
  ASSERT_EQ(ja["range_loss_correlation"].size(), 4u);
  ASSERT_EQ(ja["uniform_vs_normalized"].size(), 6u);
  EXPECT_EQ(ja["uniform_vs_normalized"][0]["layout"], "K per-channel");
  EXPECT_EQ(ja["uniform_vs_normalized"][0]["uniform_format"], "u4:chan");
  EXPECT_EQ(ja["dim"], 128);
  const std::string text = QuantStudyTables(*a);
  EXPECT_NE(text.find("(a) Pearson"), std::string::npos);
  EXPECT_NE(text.find("(b) Mean loss"), std::string::npos);
  EXPECT_NE(text.find("normalized"), std::string::npos);
}

}  // namespace
}  // namespace hqekv::eval
