#include "policy/spec.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(r->Int("bits"), 2);
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
  EXPECT_NE(ErrorOf("kivi:bits=3").find("must be one of 2|4"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:keep=1.5").find("out of range"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:keep=0").find("out of range"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:bits=16").find("out of range"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:window=3.5").find("integer"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:window=abc").find("not a number"), std::string::npos);
  EXPECT_NE(ErrorOf("snapkv:window=nan").find("not a number"), std::string::npos);
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
  EXPECT_NE(ErrorOf("hqekv:bits=2,ratios=0.5/0.5/0/0").find("at most one"), std::string::npos);
  EXPECT_EQ(ErrorOf("h2o:heavy=10,recent=10"), "<ok>");
  EXPECT_NE(ErrorOf("h2o:heavy=10,keep=0.2").find("at most one"), std::string::npos);
}

TEST(Spec, HelpListsEveryPolicyAndDefault) {
  const std::string h = PoliciesHelp();
  for (const auto& p : PolicyTable()) EXPECT_NE(h.find("\n" + p.name + "\n"), std::string::npos);
  EXPECT_NE(h.find("residual"), std::string::npos);
  EXPECT_NE(h.find("default 128"), std::string::npos);
}

}  // namespace
}  // namespace hqekv::policy
