// core/number.h: the one checked parser of numbers typed by a person.
#include "core/number.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace hqekv {
namespace {

template <class T>
std::string Err(const Result<T>& r) {
  return r.ok() ? "" : r.message();
}

TEST(ParseInt, AcceptsDecimalOnly) {
  EXPECT_EQ(*ParseInt("42", "-n"), 42);
  EXPECT_EQ(*ParseInt("+42", "-n"), 42);
  EXPECT_EQ(*ParseInt("-7", "-n"), -7);
  EXPECT_EQ(*ParseInt("010", "-n"), 10);  // decimal, never octal
  EXPECT_EQ(*ParseInt("-9223372036854775808", "x"), INT64_MIN);
  for (const char* bad :
       {"0x2", "4x", " 4", "4 ", "", "-", "+", "1e3", "1.0", "0b1", "1_000", "--1", "nan", "٣"}) {
    EXPECT_FALSE(ParseInt(bad, "-t").ok()) << bad;
  }
  EXPECT_EQ(Err(ParseInt("4x", "-t")), "-t: '4x' is not a decimal integer");
  EXPECT_EQ(Err(ParseInt("", "--ctx")), "--ctx: empty value, expected an integer");
}

TEST(ParseInt, RangeAndOverflowNameTheFlag) {
  EXPECT_EQ(Err(ParseInt("99999999999999999999", "--ctx", 0, 100)),
            "--ctx: '99999999999999999999' is out of range [0, 100]");
  EXPECT_EQ(Err(ParseInt("9223372036854775808", "x")),
            "x: '9223372036854775808' is out of range [-9223372036854775808, "
            "9223372036854775807]");
  EXPECT_EQ(Err(ParseInt("-1", "--trials", 1, 10)), "--trials: '-1' is out of range [1, 10]");
  EXPECT_EQ(*ParseInt("10", "x", 1, 10), 10);
  EXPECT_EQ(*ParseInt("1", "x", 1, 10), 1);
}

TEST(ParseUint, RefusesNegativeAndOverflow) {
  EXPECT_EQ(*ParseUint("18446744073709551615", "--seed"), UINT64_MAX);
  EXPECT_EQ(*ParseUint("-0", "--seed"), 0u);
  EXPECT_EQ(Err(ParseUint("-1", "--seed")),
            "--seed: '-1' is out of range [0, 18446744073709551615]");
  EXPECT_EQ(Err(ParseUint("99999999999999999999", "--seed")),
            "--seed: '99999999999999999999' is out of range [0, 18446744073709551615]");
  EXPECT_EQ(Err(ParseUint("0x10", "--seed")), "--seed: '0x10' is not a decimal integer");
  EXPECT_EQ(Err(ParseUint("11", "k", 10)), "k: '11' is out of range [0, 10]");
}

TEST(ParseReal, AcceptsDecimalForms) {
  EXPECT_DOUBLE_EQ(*ParseReal("3.2", "b"), 3.2);
  EXPECT_DOUBLE_EQ(*ParseReal(".5", "b"), 0.5);
  EXPECT_DOUBLE_EQ(*ParseReal("5.", "b"), 5.0);
  EXPECT_DOUBLE_EQ(*ParseReal("-2e-3", "b"), -2e-3);
  EXPECT_DOUBLE_EQ(*ParseReal("+1E2", "b"), 100.0);
  EXPECT_EQ(*ParseReal("1e-999", "b"), 0.0);  // underflow reads as 0
  for (const char* bad :
       {"0x2", "0x1p3", "1e", "e3", ".", "", " 1", "1 ", "1,5", "1..2", "--1", "1e+", "3.2bits"}) {
    EXPECT_FALSE(ParseReal(bad, "b").ok()) << bad;
  }
  EXPECT_EQ(Err(ParseReal("0x2", "kivi:bits")), "kivi:bits: '0x2' is not a decimal number");
}

TEST(ParseReal, NonFiniteOnlyWhereAllowed) {
  for (const char* s : {"nan", "NaN", "inf", "-inf", "Infinity"}) {
    EXPECT_EQ(Err(ParseReal(s, "--temp")),
              std::string("--temp: '") + s + "' is not a finite number");
  }
  EXPECT_TRUE(std::isnan(*ParseReal("nan", "x", {.allow_nonfinite = true})));
  EXPECT_EQ(*ParseReal("-inf", "x", {.allow_nonfinite = true}), -INFINITY);
  EXPECT_EQ(Err(ParseReal("1e999", "--temp")), "--temp: '1e999' is out of range [-inf, inf]");
}

TEST(ParseReal, RangesOpenAndClosed) {
  const RealRange top_p{.min = 0, .max = 1, .min_open = true};
  EXPECT_EQ(*ParseReal("1", "--top-p", top_p), 1.0);
  EXPECT_EQ(Err(ParseReal("0", "--top-p", top_p)), "--top-p: '0' is out of range (0, 1]");
  EXPECT_EQ(Err(ParseReal("1.5", "--top-p", top_p)), "--top-p: '1.5' is out of range (0, 1]");
  EXPECT_EQ(Err(ParseReal("-0.1", "--temp", {.min = 0, .max = 10})),
            "--temp: '-0.1' is out of range [0, 10]");
}

TEST(ParseNumbers, LongInputsAreCutInMessages) {
  const std::string junk(1000, '7');
  const std::string msg = Err(ParseInt(junk + "x", "-n"));
  EXPECT_LT(msg.size(), 120u);
  EXPECT_NE(msg.find("...' is not a decimal integer"), std::string::npos);
}

}  // namespace
}  // namespace hqekv
