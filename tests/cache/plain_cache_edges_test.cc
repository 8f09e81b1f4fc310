// PlainKvCache attention at the edges of float range: 100-token rows (4
// pages, several KV heads) whose scaled scores sit near ±88 (exp overflows
// or goes subnormal without the max subtraction) and ±1e4, a query that sees
// a single token, and a query that sees none, for the fp16 and fp32 caches,
// against a double reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cache/plain_cache.h"
#include "core/half.h"

namespace hqekv {
namespace {

constexpr int kHkv = 2, kHq = 4, kD = 16, kTokens = 100;

// Cache contents: K rows [1, k1, noise...] and V rows, fp16-exact so both
// precisions hold the same values; query head h of KV head h / 2 is
// [4 * base_h, 4, 0...], so its scaled score (1/sqrt(16) = 1/4) is exactly
// base_h + k1 in float.
struct Fixture {
  std::vector<float> k, v;  // [kTokens][kHkv][kD]
  std::vector<int32_t> pos;
};

Fixture Fill(uint32_t seed) {
  std::mt19937 rng(seed);
  Fixture f;
  f.k.resize(static_cast<size_t>(kTokens) * kHkv * kD);
  f.v.resize(f.k.size());
  for (int t = 0; t < kTokens; ++t) {
    f.pos.push_back(3 * t + 1);
    for (int h = 0; h < kHkv; ++h) {
      for (int d = 0; d < kD; ++d) {
        const size_t i = (static_cast<size_t>(t) * kHkv + h) * kD + d;
        const float k1 =
            static_cast<float>(static_cast<int>(rng() % 257) - 128) / 32.0f;  // [-4, 4]
        f.k[i] = d == 0 ? 1.0f : d == 1 ? k1 : RoundF16(std::normal_distribution<float>(0, 2)(rng));
        f.v[i] = RoundF16(std::normal_distribution<float>(0, 1)(rng));
      }
    }
  }
  return f;
}

// Attention of query head h (scores base + k1) at position qpos, in double.
std::vector<double> Reference(const Fixture& f, int h, float base, int32_t qpos) {
  const int kvh = h / (kHq / kHkv);
  std::vector<double> s;
  for (int t = 0; t < kTokens && f.pos[t] <= qpos; ++t) {
    s.push_back(double(base) + f.k[(static_cast<size_t>(t) * kHkv + kvh) * kD + 1]);
  }
  std::vector<double> out(kD, 0.0);
  if (s.empty()) return out;
  const double mx = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (double& x : s) sum += (x = std::exp(x - mx));
  for (size_t t = 0; t < s.size(); ++t) {
    for (int d = 0; d < kD; ++d) out[d] += s[t] / sum * f.v[(t * kHkv + kvh) * kD + d];
  }
  return out;
}

void CheckBases(PlainPrecision prec, const std::vector<float>& bases) {
  auto c = PlainKvCache::Create({1, kHq, kHkv, kD, 512}, prec);
  ASSERT_TRUE(c.ok());
  const Fixture f = Fill(41);
  // A prefill of 70 tokens, then one at a time (pages fill across calls).
  ASSERT_TRUE((*c)->Append(0, f.k.data(), f.v.data(), f.pos.data(), 70).ok());
  for (int t = 70; t < kTokens; ++t) {
    const size_t at = static_cast<size_t>(t) * kHkv * kD;
    ASSERT_TRUE((*c)->Append(0, f.k.data() + at, f.v.data() + at, &f.pos[t], 1).ok());
  }
  // Queries that see all 100 tokens, 65 tokens, a single token, none.
  const std::vector<int32_t> qpos = {f.pos.back() + 5, f.pos[64], f.pos[0], 0};
  const int n = static_cast<int>(qpos.size());
  std::vector<float> q(static_cast<size_t>(n) * kHq * kD, 0.0f);
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < kHq; ++h) {
      q[(static_cast<size_t>(i) * kHq + h) * kD] = 4.0f * bases[h];
      q[(static_cast<size_t>(i) * kHq + h) * kD + 1] = 4.0f;
    }
  }
  std::vector<float> out(q.size(), -7.0f);
  ASSERT_TRUE((*c)->Attend(0, q.data(), qpos.data(), n, out.data()).ok());
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < kHq; ++h) {
      const std::vector<double> want = Reference(f, h, bases[h], qpos[i]);
      for (int d = 0; d < kD; ++d) {
        const float got = out[(static_cast<size_t>(i) * kHq + h) * kD + d];
        ASSERT_TRUE(std::isfinite(got)) << "query " << i << " head " << h << " base " << bases[h];
        if (i >= 2) {  // one token: its V row exactly; none: exactly 0
          EXPECT_EQ(got, static_cast<float>(want[d]))
              << "query " << i << " head " << h << " d " << d;
        } else {
          EXPECT_NEAR(got, want[d], 2e-5)
              << "query " << i << " head " << h << " base " << bases[h] << " d " << d;
        }
      }
    }
  }
}

TEST(PlainKvCacheEdges, ScoresNear88MatchTheDoubleReference) {
  for (auto prec : {PlainPrecision::kF16, PlainPrecision::kF32}) {
    SCOPED_TRACE(prec == PlainPrecision::kF16 ? "fp16" : "fp32");
    CheckBases(prec, {88.0f, 88.5f, -88.0f, -92.0f});
  }
}

TEST(PlainKvCacheEdges, ScoresNear1e4MatchTheDoubleReference) {
  for (auto prec : {PlainPrecision::kF16, PlainPrecision::kF32}) {
    SCOPED_TRACE(prec == PlainPrecision::kF16 ? "fp16" : "fp32");
    CheckBases(prec, {1e4f, -1e4f, 1e4f - 88.0f, 0.0f});
  }
}

}  // namespace
}  // namespace hqekv
