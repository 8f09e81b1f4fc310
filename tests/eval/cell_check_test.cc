// Cached cells are validated before reuse (issue 19 class 4): missing fields,
// values out of range or not finite make the cell be recomputed, never reported.
#include "eval/run/cell_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "core/file.h"
#include "eval/run/cell_store.h"

namespace hqekv::eval {
namespace {

CellResult GoodCell() {
  CellResult c;
  c.hash = CellHash("cell-check");
  c.kind = "quality";
  c.policy = "fp16";
  c.n = 4;
  c.accuracy = 0.75;
  c.chance = 0.1;
  c.kl = 0.02;
  c.agreement = 0.9;
  c.true_bits = 16.4;
  c.bits_per_original = 16.4;
  c.kept_fraction = 1;
  c.ppl = 7.5;
  c.depth = 0.5;
  return c;
}

std::string Why(const nlohmann::json& j) {
  auto c = CellFromJson(j);
  if (!c.ok()) return c.message();
  const Status s = ValidateCell(j, *c);
  return s.ok() ? "" : s.message();
}

TEST(CellCheck, AGoodCellPasses) { EXPECT_EQ(Why(ToJson(GoodCell())), ""); }

TEST(CellCheck, OutOfRangeValuesAreNamed) {
  nlohmann::json j = ToJson(GoodCell());
  j["accuracy"] = 7.5;
  EXPECT_NE(Why(j).find("accuracy 7.5 outside [0, 1]"), std::string::npos) << Why(j);
  j = ToJson(GoodCell());
  j["true_bits"] = -3;
  EXPECT_NE(Why(j).find("true_bits -3 outside"), std::string::npos) << Why(j);
  j = ToJson(GoodCell());
  j["ppl"] = 0.5;
  EXPECT_NE(Why(j).find("ppl 0.5 below 1"), std::string::npos) << Why(j);
  j = ToJson(GoodCell());
  j["steps"] = -1;
  EXPECT_NE(Why(j).find("steps -1 is negative"), std::string::npos) << Why(j);
  j = ToJson(GoodCell());
  j["kind"] = "other";
  EXPECT_NE(Why(j).find("neither quality nor speed"), std::string::npos) << Why(j);
}

TEST(CellCheck, MissingFieldsAndNonFiniteValuesAreRefused) {
  nlohmann::json j = ToJson(GoodCell());
  j.erase("kl");
  EXPECT_NE(Why(j).find("missing field 'kl'"), std::string::npos) << Why(j);
  CellResult c = GoodCell();
  c.kl = NAN;
  EXPECT_NE(ValidateCell(ToJson(GoodCell()), c).message().find("kl is not finite"),
            std::string::npos);
  c = GoodCell();
  c.decode_tok_s = INFINITY;
  EXPECT_NE(ValidateCell(ToJson(GoodCell()), c).message().find("decode_tok_s is not finite"),
            std::string::npos);
}

TEST(CellCheck, TheStoreRecomputesATamperedCell) {
  const std::string dir = ::testing::TempDir() + "/hqekv_cell_check." + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  CellStore store(dir);
  const CellResult c = GoodCell();
  ASSERT_TRUE(store.Save(c).ok());
  ASSERT_TRUE(store.Load(c.hash).has_value());
  nlohmann::json j = ToJson(c);
  j["accuracy"] = 7.5;
  ASSERT_TRUE(WriteFileAtomic(dir + "/cells/" + c.hash + ".json", j.dump()).ok());
  EXPECT_FALSE(store.Load(c.hash).has_value());
  j = ToJson(c);
  j.erase("true_bits");
  ASSERT_TRUE(WriteFileAtomic(dir + "/cells/" + c.hash + ".json", j.dump()).ok());
  EXPECT_FALSE(store.Load(c.hash).has_value());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hqekv::eval
