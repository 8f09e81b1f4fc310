#include "model/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace hqekv {
namespace {

Sampler Make(SamplerConfig c) {
  auto s = Sampler::Create(c);
  EXPECT_TRUE(s.ok()) << s.message();
  return std::move(s).value();
}

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  Sampler s = Make({});
  const float l[5] = {0.1f, 3.0f, -1.0f, 3.0f, 2.0f};
  EXPECT_EQ(s.Sample(l, 5, {}), 1);
}

TEST(Sampler, RepetitionPenaltyDemotesSeenTokens) {
  SamplerConfig c;
  c.repeat_penalty = 2.0f;
  Sampler s = Make(c);
  const float l[3] = {3.0f, 2.0f, -1.0f};
  EXPECT_EQ(s.Sample(l, 3, {}), 0);
  EXPECT_EQ(s.Sample(l, 3, {0}), 1);  // 3/2 = 1.5 < 2
  const float neg[2] = {-1.0f, -1.5f};
  EXPECT_EQ(s.Sample(neg, 2, {0}), 1);  // -1*2 = -2 < -1.5: negative logits are multiplied
}

TEST(Sampler, PresenceAndFrequencyPenaltiesFollowOpenAIsFormula) {
  // logit -= count * frequency + (count > 0) * presence, over the window.
  const float l[3] = {3.0f, 2.5f, 0.0f};
  SamplerConfig c;
  c.frequency_penalty = 0.3f;
  Sampler f = Make(c);
  EXPECT_EQ(f.Sample(l, 3, {0}), 0);     // 3 - 0.3 = 2.7 > 2.5
  EXPECT_EQ(f.Sample(l, 3, {0, 0}), 1);  // 3 - 0.6 = 2.4 < 2.5: the count matters
  c = {};
  c.presence_penalty = 0.6f;
  Sampler p = Make(c);
  EXPECT_EQ(p.Sample(l, 3, {0}), 1);        // 3 - 0.6 = 2.4
  EXPECT_EQ(p.Sample(l, 3, {1, 1, 1}), 0);  // presence does not grow with the count
  c.repeat_last_n = 1;                      // the window: only the last token
  Sampler w = Make(c);
  EXPECT_EQ(w.Sample(l, 3, {0, 1}), 0);
  c = {};
  c.presence_penalty = -2.0f;  // negative: encourages what was seen
  Sampler neg = Make(c);
  const float close[3] = {3.0f, 2.5f, 1.5f};
  EXPECT_EQ(neg.Sample(close, 3, {2}), 2);  // 1.5 + 2 = 3.5 > 3
}

TEST(Sampler, LogitBiasAddsBeforeEverythingAndBans) {
  const float l[4] = {5.0f, 1.0f, 0.0f, 4.9f};
  SamplerConfig c;
  c.logit_bias = {{0, -100.0f}};
  EXPECT_EQ(Make(c).Sample(l, 4, {}), 3);
  c.logit_bias = {{2, 10.0f}};
  EXPECT_EQ(Make(c).Sample(l, 4, {}), 2);
  c.logit_bias = {{0, kLogitBan}, {3, kLogitBan}, {9, 50.0f}};  // id 9 past the vocabulary: no-op
  EXPECT_EQ(Make(c).Sample(l, 4, {}), 1);
  // Every token banned, at a temperature: still a token, never a NaN pick.
  c.logit_bias = {{0, kLogitBan}, {1, kLogitBan}, {2, kLogitBan}, {3, kLogitBan}};
  c.temperature = 0.5f;
  const int32_t t = Make(c).Sample(l, 4, {});
  EXPECT_TRUE(t >= 0 && t < 4);
  // Sampled: a banned token is never drawn.
  c.logit_bias = {{0, kLogitBan}};
  c.temperature = 1.0f;
  Sampler s = Make(c);
  for (int i = 0; i < 200; ++i) EXPECT_NE(s.Sample(l, 4, {}), 0);
  c.logit_bias = {{-1, 1.0f}};
  EXPECT_FALSE(Sampler::Create(c).ok());
  c.logit_bias = {{1, std::nanf("")}};
  EXPECT_FALSE(Sampler::Create(c).ok());
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  std::vector<float> l(50);
  for (int i = 0; i < 50; ++i) l[i] = std::sin(i * 0.7f);
  SamplerConfig c;
  c.temperature = 1.0f;
  c.seed = 42;
  Sampler a = Make(c), b = Make(c);
  c.seed = 43;
  Sampler d = Make(c);
  std::vector<int> ta, tb, td;
  for (int i = 0; i < 100; ++i) {
    ta.push_back(a.Sample(l.data(), 50, {}));
    tb.push_back(b.Sample(l.data(), 50, {}));
    td.push_back(d.Sample(l.data(), 50, {}));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, td);
}

TEST(Sampler, DistributionMatchesSoftmax) {
  const float l[3] = {0.0f, std::log(2.0f), std::log(5.0f)};  // probabilities 1/8, 2/8, 5/8
  SamplerConfig c;
  c.temperature = 1.0f;
  c.seed = 7;
  Sampler s = Make(c);
  std::map<int, int> count;
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++count[s.Sample(l, 3, {})];
  EXPECT_NEAR(count[0] / double(n), 0.125, 0.01);
  EXPECT_NEAR(count[1] / double(n), 0.25, 0.01);
  EXPECT_NEAR(count[2] / double(n), 0.625, 0.01);
}

TEST(Sampler, TemperatureSharpens) {
  const float l[2] = {0.0f, 1.0f};
  SamplerConfig c;
  c.temperature = 0.25f;  // p1 = 1 / (1 + e^-4) = 0.982
  c.seed = 1;
  Sampler s = Make(c);
  int ones = 0;
  for (int i = 0; i < 10000; ++i) ones += s.Sample(l, 2, {});
  EXPECT_NEAR(ones / 10000.0, 0.982, 0.006);
}

TEST(Sampler, TopKTopPMinPRestrictTheSupport) {
  const float l[4] = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  auto support = [&](SamplerConfig c) {
    c.temperature = 1.0f;
    Sampler s = Make(c);
    std::map<int, int> seen;
    for (int i = 0; i < 3000; ++i) ++seen[s.Sample(l, 4, {})];
    return seen.size();
  };
  SamplerConfig k;
  k.top_k = 2;
  EXPECT_EQ(support(k), 2u);
  SamplerConfig p;
  p.top_p = 0.65f;  // 0.4 + 0.3 >= 0.65
  EXPECT_EQ(support(p), 2u);
  SamplerConfig m;
  m.min_p = 0.4f;  // floor 0.16: keeps 0.4, 0.3, 0.2
  EXPECT_EQ(support(m), 3u);
  SamplerConfig all;
  EXPECT_EQ(support(all), 4u);
  SamplerConfig tiny;
  tiny.top_p = 1e-6f;  // always keeps at least the top token
  EXPECT_EQ(support(tiny), 1u);
}

TEST(Sampler, RejectsBadValues) {
  auto bad = [](auto set) {
    SamplerConfig c;
    set(c);
    return !Sampler::Create(c).ok();
  };
  EXPECT_TRUE(bad([](SamplerConfig& c) { c.temperature = -0.1f; }));
  EXPECT_TRUE(bad([](SamplerConfig& c) { c.temperature = NAN; }));
  EXPECT_TRUE(bad([](SamplerConfig& c) { c.top_k = -1; }));
  EXPECT_TRUE(bad([](SamplerConfig& c) { c.top_p = 0.0f; }));
  EXPECT_TRUE(bad([](SamplerConfig& c) { c.top_p = 1.5f; }));
  EXPECT_TRUE(bad([](SamplerConfig& c) { c.min_p = 1.0f; }));
  EXPECT_TRUE(bad([](SamplerConfig& c) { c.repeat_penalty = 0.0f; }));
  EXPECT_FALSE(bad([](SamplerConfig& c) { c.temperature = 0.8f; }));
}

}  // namespace
}  // namespace hqekv
