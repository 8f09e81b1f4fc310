#include "eval/run/scoring.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lm/logprob.h"

namespace hqekv::eval {
namespace {

TEST(Scoring, Normalize) {
  EXPECT_EQ(NormalizeAnswer("  The Pass-Key: 71432!\n"), "the pass key 71432");
  EXPECT_EQ(NormalizeAnswer(""), "");
  EXPECT_EQ(NormalizeAnswer("..."), "");
}

TEST(Scoring, ExactMatchWholeWords) {
  EXPECT_TRUE(ExactMatch(" 71432. Remember", {"71432"}));
  EXPECT_TRUE(ExactMatch("71432", {"71432"}));
  EXPECT_TRUE(ExactMatch("Marmalade!", {"marmalade"}));
  EXPECT_FALSE(ExactMatch("714325", {"71432"}));
  EXPECT_FALSE(ExactMatch("7143", {"71432"}));
  EXPECT_FALSE(ExactMatch("the key is 71432", {"71432"}));  // must come first
  EXPECT_TRUE(ExactMatch("12 345", {"99999", "12 345"}));
  EXPECT_FALSE(ExactMatch("anything", {""}));
  EXPECT_FALSE(ExactMatch("", {"1"}));
}

TEST(Scoring, TeacherForcedStats) {
  TeacherForcedStats s;
  std::vector<float> ref = {0, 5, 0}, same = {0, 5, 0}, other = {5, 0, 0};
  s.Add(same.data(), ref.data(), 3, 1);   // correct, agrees
  s.Add(other.data(), ref.data(), 3, 1);  // wrong, disagrees
  EXPECT_EQ(s.steps, 2);
  EXPECT_DOUBLE_EQ(s.accuracy(), 0.5);
  EXPECT_DOUBLE_EQ(s.agreement(), 0.5);
  EXPECT_NEAR(s.mean_kl(), lm::KlFromLogits(ref.data(), other.data(), 3) / 2, 1e-12);
  EXPECT_NEAR(s.ppl(), std::exp((lm::Nll(same.data(), 3, 1) + lm::Nll(other.data(), 3, 1)) / 2),
              1e-9);
  TeacherForcedStats t;
  t.Add(same.data(), nullptr, 3, 0);
  EXPECT_EQ(t.ref_steps, 0);
  EXPECT_EQ(t.mean_kl(), 0);
  s += t;
  EXPECT_EQ(s.steps, 3);
}

}  // namespace
}  // namespace hqekv::eval
