// PlainKvCache against a naive fp64 causal attention.
#include "cache/plain_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace hqekv {
namespace {

// Naive attention of one query head over rows [0, t) of K/V ([t][Hkv][D]).
std::vector<double> NaiveAttend(const std::vector<float>& K, const std::vector<float>& V,
                                const std::vector<int32_t>& pos, int Hkv, int D, int kvh,
                                const float* q, int32_t qpos) {
  std::vector<double> s;
  for (size_t j = 0; j < pos.size(); ++j) {
    if (pos[j] > qpos) continue;
    double d = 0;
    for (int c = 0; c < D; ++c) d += double(q[c]) * K[(j * Hkv + kvh) * D + c];
    s.push_back(d / std::sqrt(double(D)));
  }
  double mx = -1e300, sum = 0;
  for (double x : s) mx = std::max(mx, x);
  for (double& x : s) sum += (x = std::exp(x - mx));
  std::vector<double> out(D, 0.0);
  size_t k = 0;
  for (size_t j = 0; j < pos.size(); ++j) {
    if (pos[j] > qpos) continue;
    for (int c = 0; c < D; ++c) out[c] += s[k] / sum * V[(j * Hkv + kvh) * D + c];
    ++k;
  }
  return out;
}

std::vector<float> Random(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

void CheckAgainstNaive(PlainPrecision prec, double tol) {
  const KvGeometry g{2, 6, 2, 16, 64};  // GQA: 3 query heads per KV head
  auto c = PlainKvCache::Create(g, prec);
  ASSERT_TRUE(c.ok()) << c.message();
  std::mt19937 rng(7);
  std::vector<float> K, V;
  std::vector<int32_t> pos;
  // Two appends (prefill of 9 tokens with a gap in positions, then 3 more).
  const std::vector<std::vector<int32_t>> batches = {{0, 1, 2, 3, 5, 6, 7, 8, 9}, {10, 11, 14}};
  for (const auto& bp : batches) {
    const int n = static_cast<int>(bp.size());
    auto k = Random(size_t(n) * 2 * 16, rng), v = Random(size_t(n) * 2 * 16, rng);
    for (int layer = 0; layer < 2; ++layer) {
      ASSERT_TRUE((*c)->Append(layer, k.data(), v.data(), bp.data(), n).ok());
    }
    K.insert(K.end(), k.begin(), k.end());
    V.insert(V.end(), v.begin(), v.end());
    pos.insert(pos.end(), bp.begin(), bp.end());
    // Queries at every position of this batch plus one at a gap (4), which
    // must not see position 5.
    std::vector<int32_t> qp = bp;
    qp.push_back(4);
    const int nq = static_cast<int>(qp.size());
    auto q = Random(size_t(nq) * 6 * 16, rng, 2.0f);
    std::vector<float> out(q.size());
    ASSERT_TRUE((*c)->Attend(1, q.data(), qp.data(), nq, out.data()).ok());
    // The fp16 cache attends over fp16-rounded K/V: compare with that input.
    std::vector<float> Kr = K, Vr = V;
    if (prec == PlainPrecision::kF16) {
      for (auto& x : Kr) x = RoundF16(x);
      for (auto& x : Vr) x = RoundF16(x);
    }
    for (int i = 0; i < nq; ++i) {
      for (int h = 0; h < 6; ++h) {
        auto ref = NaiveAttend(Kr, Vr, pos, 2, 16, h / 3, &q[(i * 6 + h) * 16], qp[i]);
        for (int d = 0; d < 16; ++d) {
          EXPECT_NEAR(out[(i * 6 + h) * 16 + d], ref[d], tol) << "q " << i << " head " << h;
        }
      }
    }
  }
}

TEST(PlainKvCache, Fp32MatchesNaiveAttention) { CheckAgainstNaive(PlainPrecision::kF32, 2e-5); }
TEST(PlainKvCache, Fp16MatchesNaiveAttentionOnRoundedValues) {
  CheckAgainstNaive(PlainPrecision::kF16, 2e-5);
}

TEST(PlainKvCache, Fp16DiffersFromFp32ByRoundingOnly) {
  const KvGeometry g{1, 1, 1, 8, 16};
  auto a = PlainKvCache::Create(g, PlainPrecision::kF16);
  auto b = PlainKvCache::Create(g, PlainPrecision::kF32);
  std::mt19937 rng(3);
  auto k = Random(8 * 4, rng), v = Random(8 * 4, rng), q = Random(8, rng);
  const int32_t pos[4] = {0, 1, 2, 3}, qp = 3;
  ASSERT_TRUE((*a)->Append(0, k.data(), v.data(), pos, 4).ok());
  ASSERT_TRUE((*b)->Append(0, k.data(), v.data(), pos, 4).ok());
  float oa[8], ob[8];
  ASSERT_TRUE((*a)->Attend(0, q.data(), &qp, 1, oa).ok());
  ASSERT_TRUE((*b)->Attend(0, q.data(), &qp, 1, ob).ok());
  double diff = 0;
  for (int d = 0; d < 8; ++d) diff = std::max(diff, double(std::abs(oa[d] - ob[d])));
  EXPECT_GT(diff, 0.0);   // fp16 storage rounds
  EXPECT_LT(diff, 5e-3);  // ... by about 2^-11 relative
}

// Reported bytes are the bytes allocated: every layer's containers allocate
// through a counting allocator (LayerHeldBytes), and Stats() must match that
// count exactly, after a prefill, after every decode step (pages open every
// 32 tokens) and after Reset.
void ExpectHeldEqualsReported(const PlainKvCache& c, const std::string& when) {
  const KvStats s = c.Stats();
  KvBytes sum;
  for (int l = 0; l < c.geometry().n_layers; ++l) {
    ASSERT_EQ(s.layers[l].bytes.total(), c.LayerHeldBytes(l)) << when << ", layer " << l;
    sum += s.layers[l].bytes;
  }
  ASSERT_EQ(sum.total(), s.bytes.total()) << when;
}

TEST(PlainKvCache, ByteAccountingIsExact) {
  const KvGeometry g{3, 8, 2, 64, 100};
  for (auto prec : {PlainPrecision::kF16, PlainPrecision::kF32}) {
    auto c = PlainKvCache::Create(g, prec);
    std::vector<float> k(5 * 2 * 64, 0.5f);
    std::vector<int32_t> pos = {0, 1, 2, 3, 4};
    for (int l = 0; l < 3; ++l)
      ASSERT_TRUE((*c)->Append(l, k.data(), k.data(), pos.data(), 5).ok());
    ASSERT_TRUE((*c)->EndBatch(5, true).ok());
    const KvStats s = (*c)->Stats();
    const int64_t elem = prec == PlainPrecision::kF16 ? 2 : 4;
    // One page of 32 tokens x 2 KV heads per layer, for K and for V.
    EXPECT_EQ(s.bytes.payload, 3 * 2 * 32 * 64 * 2 * elem);
    EXPECT_GE(s.bytes.bookkeeping, 3 * 5 * 4);  // positions, page tables, layer headers
    EXPECT_EQ(s.bytes.metadata, 0);
    EXPECT_EQ(s.bytes.residual, 0);
    ExpectHeldEqualsReported(**c, "prefill");
    EXPECT_EQ(s.kept_elements, 3 * 5 * 2 * 64 * 2);
    EXPECT_EQ(s.original_elements, s.kept_elements);
    ASSERT_EQ(s.layers.size(), 3u);
    EXPECT_EQ(s.layers[0].kept_tokens, 10);
    EXPECT_EQ(s.layers[0].k_tiers.at(prec == PlainPrecision::kF16 ? "fp16" : "fp32"), 10);
    (*c)->Reset();
    ExpectHeldEqualsReported(**c, "reset");
    EXPECT_EQ((*c)->Stats().bytes.payload, 0);
  }
}

TEST(PlainKvCache, HeldBytesEqualReportedBytesThroughPrefillAndDecode) {
  const KvGeometry g{2, 6, 3, 24, 400};
  std::mt19937 rng(11);
  for (auto prec : {PlainPrecision::kF16, PlainPrecision::kF32}) {
    auto c = PlainKvCache::Create(g, prec);
    ASSERT_TRUE(c.ok());
    const int64_t elem = prec == PlainPrecision::kF16 ? 2 : 4;
    int32_t next = 0;
    // Prefill of 45 tokens, then 1..5 tokens per step (with gaps in positions)
    // across several page boundaries.
    for (int step = 0; step < 60; ++step) {
      const int n = step == 0 ? 45 : 1 + static_cast<int>(rng() % 5);
      std::vector<int32_t> pos(n);
      for (auto& p : pos) p = (next += 1 + static_cast<int>(rng() % 2));
      auto k = Random(size_t(n) * 3 * 24, rng), v = Random(size_t(n) * 3 * 24, rng);
      for (int l = 0; l < 2; ++l)
        ASSERT_TRUE((*c)->Append(l, k.data(), v.data(), pos.data(), n).ok());
      ExpectHeldEqualsReported(**c, "step " + std::to_string(step));
      const KvStats s = (*c)->Stats();
      const int64_t tok = (*c)->tokens(0);
      // Slack is under one page (32 tokens) per layer, for K and for V.
      EXPECT_GE(s.bytes.payload, 2 * tok * 3 * 24 * 2 * elem);
      EXPECT_LT(s.bytes.payload, 2 * (tok + 32) * 3 * 24 * 2 * elem);
    }
  }
}

TEST(PlainKvCache, RejectsBadInput) {
  EXPECT_FALSE(PlainKvCache::Create({1, 3, 2, 8, 8}, PlainPrecision::kF16).ok());
  EXPECT_FALSE(PlainKvCache::Create({0, 2, 2, 8, 8}, PlainPrecision::kF16).ok());
  auto c = PlainKvCache::Create({1, 2, 2, 4, 8}, PlainPrecision::kF16);
  ASSERT_TRUE(c.ok());
  std::vector<float> k(2 * 4 * 2, 1.f);
  const int32_t p2[2] = {3, 3}, p1[1] = {8}, p0[1] = {2};
  EXPECT_FALSE((*c)->Append(0, k.data(), k.data(), p2, 2).ok());  // not strictly increasing
  EXPECT_FALSE((*c)->Append(0, k.data(), k.data(), p1, 1).ok());  // >= max_ctx
  EXPECT_FALSE((*c)->Append(1, k.data(), k.data(), p0, 1).ok());  // layer out of range
  ASSERT_TRUE((*c)->Append(0, k.data(), k.data(), p0, 1).ok());
  EXPECT_FALSE((*c)->Append(0, k.data(), k.data(), p0, 1).ok());  // not after position 2
}

TEST(PlainKvCache, QueryBeforeEveryTokenGivesZero) {
  auto c = PlainKvCache::Create({1, 1, 1, 4, 8}, PlainPrecision::kF32);
  std::vector<float> k(4, 1.f);
  const int32_t p = 5, qp = 2;
  ASSERT_TRUE((*c)->Append(0, k.data(), k.data(), &p, 1).ok());
  float out[4] = {9, 9, 9, 9};
  ASSERT_TRUE((*c)->Attend(0, k.data(), &qp, 1, out).ok());
  for (float x : out) EXPECT_EQ(x, 0.f);
}

}  // namespace
}  // namespace hqekv
