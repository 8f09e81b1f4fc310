#include "policy/spec.h"

#include <gtest/gtest.h>

#include "policy/cache_context.h"
#include "policy/factory.h"

namespace hqekv::policy {
namespace {

std::string ErrorOf(const std::string& spec) {
  auto r = ParseSpec(spec);
  return r.ok() ? std::string("<ok>") : r.message();
}

TEST(Spec, DefaultsAreFilledIn) {
  auto r = ParseSpec("kivi");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->name, "kivi");
  EXPECT_EQ(r->Int("nominal_bits"), 2);
  EXPECT_EQ(r->Int("group"), 32);
  EXPECT_EQ(r->Int("residual"), 128);
  EXPECT_TRUE(r->given.empty());
  EXPECT_EQ(r->Canonical(), "kivi");
}

TEST(Spec, GivenValuesOverrideAndCanonicalKeepsTableOrder) {
  auto r = ParseSpec(" snapkv : kernel=5 , bits=3.2 ");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->Int("kernel"), 5);
  EXPECT_EQ(r->Int("window"), 32);
  EXPECT_DOUBLE_EQ(r->Num("bits"), 3.2);
  EXPECT_FALSE(r->Has("keep"));
  EXPECT_EQ(r->Canonical(), "snapkv:kernel=5,bits=3.2");
}

TEST(Spec, EveryPolicyParsesBare) {
  for (const auto& p : PolicyTable()) {
    auto r = ParseSpec(p.name);
    EXPECT_TRUE(r.ok()) << p.name << ": " << r.message();
  }
}

TEST(Spec, UnknownNameListsKnownPolicies) {
  const std::string e = ErrorOf("kivy:bits=2");
  EXPECT_NE(e.find("unknown KV policy 'kivy'"), std::string::npos) << e;
  EXPECT_NE(e.find("hqekv"), std::string::npos) << e;
}

TEST(Spec, UnknownKeyListsKnownKeys) {
  const std::string e = ErrorOf("h2o:heavy=10,recnt=5");
  EXPECT_NE(e.find("unknown key 'recnt'"), std::string::npos) << e;
  EXPECT_NE(e.find("recent"), std::string::npos) << e;
  EXPECT_NE(ErrorOf("fp16:bits=8").find("takes no parameters"), std::string::npos);
}

TEST(Spec, OutOfRangeAndMalformedValues) {
  EXPECT_NE(ErrorOf("kivi:nominal_bits=3").find("must be one of 2|4"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:keep=1.5").find("out of range"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:keep=0").find("out of range"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:bits=16").find("out of range"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:window=3.5").find("integer"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:window=abc").find("not a number"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:window=nan").find("not a number"), std::string::npos);
  // One checked parser (core/number.h): no hex, no infinities, no overflow to inf.
  EXPECT_NE(ErrorOf("kivi:bits=0x2").find("bits=0x2: not a number"), std::string::npos);
  EXPECT_NE(ErrorOf("hqekv:bits=inf").find("not a number"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:window=1e999").find("not a number"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:window").find("expected key=value"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:=3").find("expected key=value"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:").find("nothing after"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:window=8,").find("trailing"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:window=8,window=9").find("given twice"), std::string::npos);
  EXPECT_NE(ErrorOf("hqekv:per_head=2").find("must be one of 0|1"), std::string::npos);
  EXPECT_NE(ErrorOf("").find("empty"), std::string::npos);
}

TEST(Spec, ExclusiveBudgetKeys) {
  EXPECT_NE(ErrorOf("snapkv:keep=0.5,bits=3").find("at most one of keep and bits"),
            std::string::npos);
  EXPECT_NE(ErrorOf("streaming:window=64,keep=0.5").find("at most one"), std::string::npos);
  EXPECT_NE(ErrorOf("hqekv:nominal_bits=2,ratios=0.5/0.5/0/0").find("at most one"),
            std::string::npos);
  EXPECT_EQ(ErrorOf("h2o:heavy=10,recent=10"), "<ok>");
  EXPECT_NE(ErrorOf("h2o:heavy=10,keep=0.2").find("at most one"), std::string::npos);
}

TEST(Spec, HelpListsEveryPolicyAndDefault) {
  const std::string h = PoliciesHelp();
  for (const auto& p : PolicyTable()) EXPECT_NE(h.find("\n" + p.name + "\n"), std::string::npos);
  EXPECT_NE(h.find("residual"), std::string::npos);
  EXPECT_NE(h.find("default 128"), std::string::npos);
}

// One row per policy names its create function: every listed policy builds a
// cache (with its defaults, a budget key where it needs one) through the
// table, named by its spec, with an empty budget note before any token.
TEST(Table, EveryRowCreatesItsPolicy) {
  const KvGeometry g{2, 4, 2, 32, 1 << 12};
  for (const PolicyInfo& p : PolicyTable()) {
    ASSERT_NE(p.create, nullptr) << p.name;
    const std::string text = p.name == "hqekv" ? "hqekv:nominal_bits=2" : p.name;
    auto spec = ParseSpec(text);
    ASSERT_TRUE(spec.ok()) << spec.message();
    auto c = CreateCache(*spec, g, CacheContext{});
    ASSERT_TRUE(c.ok()) << text << ": " << c.message();
    EXPECT_EQ((*c)->Describe(), text);
    EXPECT_EQ((*c)->BudgetNote(), "");
  }
}

// The budget keys (ParamInfo::budget) say which policies `eval` runs at every
// --bits budget and which specs already fix their memory.
TEST(Table, BudgetKeys) {
  for (const char* name : {"streaming", "h2o", "snapkv", "pyramid", "hqekv"}) {
    EXPECT_TRUE(TakesBudget(*FindPolicy(name))) << name;
  }
  for (const char* name : {"fp16", "fp32", "fp8", "int8", "kivi"}) {
    EXPECT_FALSE(TakesBudget(*FindPolicy(name))) << name;
  }
  auto has = [](const std::string& text) { return HasBudgetKey(ParseSpec(text).value()); };
  EXPECT_FALSE(has("snapkv:window=8"));     // an observation window, not a budget
  EXPECT_TRUE(has("streaming:window=64"));  // a fixed size
  EXPECT_TRUE(has("h2o:heavy=4,recent=4"));
  EXPECT_FALSE(has("h2o:recent_share=0.3"));
  EXPECT_TRUE(has("hqekv:ratios=0.25/0.25/0.25/0.25"));
  EXPECT_TRUE(has("pyramid:keep=0.5"));
  EXPECT_FALSE(has("kivi:nominal_bits=2"));  // code bits, not a budget key
  EXPECT_FALSE(has("kivi:bits=3.5"));        // picks one of KIVI's two formats
  EXPECT_TRUE(has("hqekv:bits=3.5"));        // true bits
  EXPECT_TRUE(has("hqekv:nominal_bits=2"));  // the paper's nominal average
}

}  // namespace
}  // namespace hqekv::policy
