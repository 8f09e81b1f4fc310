// JsonTo (eval/run/json_field.h) and the readers that use it: a number that does
// not fit its field is an error, never a cast (fuzz_results found a JSON float
// 2.0e19 cast to int: undefined behaviour).
#include "eval/run/json_field.h"

#include <gtest/gtest.h>

#include "eval/run/cell.h"

namespace hqekv::eval {
namespace {

using nlohmann::json;

TEST(JsonTo, IntegersMustFitTheirType) {
  int i = 7;
  EXPECT_TRUE(JsonTo(json(512), &i));
  EXPECT_EQ(i, 512);
  EXPECT_TRUE(JsonTo(json(512.0), &i));  // integral float
  EXPECT_EQ(i, 512);
  EXPECT_FALSE(JsonTo(json(2.0008847663011971e19), &i));
  EXPECT_FALSE(JsonTo(json(uint64_t{18000000000000000000u}), &i));
  EXPECT_FALSE(JsonTo(json(int64_t{1} << 40), &i));
  EXPECT_FALSE(JsonTo(json(1.5), &i));
  EXPECT_FALSE(JsonTo(json(-1e300), &i));
  EXPECT_FALSE(JsonTo(json("12"), &i));
  EXPECT_EQ(i, 512);  // untouched by the failures
  int64_t l = 0;
  EXPECT_TRUE(JsonTo(json(-(int64_t{1} << 62)), &l));
  EXPECT_FALSE(JsonTo(json(9.3e18), &l));  // above 2^63 - 1
  EXPECT_FALSE(JsonTo(json(uint64_t{1} << 63), &l));
}

TEST(JsonTo, FloatsTakeAnyNumberAndStringsTheirType) {
  double d = 0;
  EXPECT_TRUE(JsonTo(json(3), &d));
  EXPECT_EQ(d, 3.0);
  EXPECT_FALSE(JsonTo(json("3"), &d));
  std::string s;
  EXPECT_TRUE(JsonTo(json("x"), &s));
  EXPECT_EQ(s, "x");
  EXPECT_FALSE(JsonTo(json(3), &s));
  std::vector<std::string> v;
  EXPECT_TRUE(JsonTo(json::parse(R"(["a","b"])"), &v));
  EXPECT_EQ(v.size(), 2u);
  EXPECT_FALSE(JsonTo(json::parse(R"(["a",1])"), &v));
}

TEST(CellFromJson, OutOfRangeNumbersAreErrorsNamingTheField) {
  auto c = CellFromJson(json::parse(R"({"context": 20008847663011971053, "n": 3})"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("'context'"), std::string::npos) << c.message();
  c = CellFromJson(json::parse(R"({"context": 2048.0, "n": 3, "kl": 0.5})"));
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->context, 2048);
  EXPECT_EQ(c->n, 3);
  EXPECT_FALSE(CellFromJson(json::parse(R"({"steps": 1e300})")).ok());
  EXPECT_FALSE(CellFromJson(json::parse(R"({"model": 5})")).ok());
}

}  // namespace
}  // namespace hqekv::eval
