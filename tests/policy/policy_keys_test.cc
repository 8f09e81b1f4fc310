// One behavioural test per policy key that planted bugs slipped past (only a
// KL band or a byte budget noticed them): each test fails when its key is
// ignored or its rule is changed.
//   kivi K per channel  a small channel of K survives a large one (per-token
//                       codes would share one range and crush it);
//   kivi residual=      the newest R tokens stay fp16 (exact);
//   h2o scores summed   decode attention adds to a token's history instead
//                       of replacing it;
//   h2o recent=         the newest `recent` tokens are kept whatever their
//                       scores.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "behaviour_harness.h"

namespace hqekv::policy {
namespace {

// The harness, by a name of its own (files of one unity batch must not
// bring conflicting names into this namespace).
namespace keys_harness = hqekv::policy::testing;

// Appends n tokens to a 1-layer, 1-head cache (rows from `k`, `v`) as one
// prefill batch, then returns the attention output of query `q` at the next
// position (a decode step).
std::vector<float> KeysAttendAfter(KvCache& c, int n, const keys_harness::RowFn& k,
                                   const keys_harness::RowFn& v, const std::vector<float>& q) {
  const int D = c.geometry().head_dim;
  std::vector<float> K(static_cast<size_t>(n) * D), V(K.size()), Q(K.size(), 0.f), O(K.size());
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) {
    pos[i] = i;
    k(0, i, 0, &K[static_cast<size_t>(i) * D]);
    v(0, i, 0, &V[static_cast<size_t>(i) * D]);
  }
  EXPECT_TRUE(c.Append(0, K.data(), V.data(), pos.data(), n).ok());
  EXPECT_TRUE(c.Attend(0, Q.data(), pos.data(), n, O.data()).ok());
  EXPECT_TRUE(c.EndBatch(n, true).ok());
  std::vector<float> out(D);
  const int32_t qp = n;
  std::vector<float> k0(D, 0.f), v0(D, 0.f);
  EXPECT_TRUE(c.Append(0, k0.data(), v0.data(), &qp, 1).ok());
  EXPECT_TRUE(c.Attend(0, q.data(), &qp, 1, out.data()).ok());
  return out;
}

constexpr int kKeysHeadDim = 8;

// V: channel 0 is 1 for the tokens `marked` selects, else 0. An output's
// channel 0 is then the attention weight on those tokens.
keys_harness::RowFn KeysMarker(std::function<bool(int32_t)> marked) {
  return [marked](int, int32_t pos, int, float* r) {
    for (int d = 0; d < kKeysHeadDim; ++d) r[d] = 0.f;
    r[0] = marked(pos) ? 1.f : 0.f;
  };
}

// K: channel 0 alternates +-50 (it sets every token's own range), channel 1
// holds 0, 0.5, 1, 1.5 by position (4 levels: exact for 2-bit codes over a
// channel). A query along channel 1 puts ~all weight on the 1.5 tokens when
// channel 1 is kept; per-token 2-bit codes (range ~100) round it away.
TEST(KiviKeys, KIsQuantizedPerChannelSoASmallChannelSurvivesALargeOne) {
  auto c = keys_harness::Make("kivi:nominal_bits=2,residual=32",
                              keys_harness::Geometry(1, 1, 1, kKeysHeadDim));
  ASSERT_NE(c, nullptr);
  auto k = [](int, int32_t pos, int, float* r) {
    for (int d = 0; d < kKeysHeadDim; ++d) r[d] = 0.f;
    r[0] = pos % 2 ? 50.f : -50.f;
    r[1] = 0.5f * static_cast<float>(pos % 4);
  };
  std::vector<float> q(kKeysHeadDim, 0.f);
  keys_harness::AlongChannel(1, kKeysHeadDim, q.data());
  for (float& x : q) x *= 8.f;  // score gap 0.5 * 8 = 4 between levels
  // 64 tokens: two sealed 32-token chunks, nothing left in the fp16 residual.
  const std::vector<float> out =
      KeysAttendAfter(*c, 64, k, KeysMarker([](int32_t p) { return p < 64 && p % 4 == 3; }), q);
  EXPECT_GT(out[0], 0.9f) << "channel 1 of K did not survive its quantization";
}

// K channel 1 = position - 64 for the newest 32 tokens (0 before): a query
// along it picks token 95 alone when those 32 are exact (fp16 residual), but
// ties ~6 tokens when they are 2-bit codes over [0, 31].
float WeightOnTheNewest(const std::string& spec) {
  auto c = keys_harness::Make(spec, keys_harness::Geometry(1, 1, 1, kKeysHeadDim));
  EXPECT_NE(c, nullptr);
  if (!c) return -1;
  auto k = [](int, int32_t pos, int, float* r) {
    for (int d = 0; d < kKeysHeadDim; ++d) r[d] = 0.f;
    r[1] = pos >= 64 ? static_cast<float>(pos - 64) : 0.f;
  };
  std::vector<float> q(kKeysHeadDim, 0.f);
  keys_harness::AlongChannel(1, kKeysHeadDim, q.data());
  for (float& x : q) x *= 4.f;
  return KeysAttendAfter(*c, 96, k, KeysMarker([](int32_t p) { return p == 95; }), q)[0];
}

TEST(KiviKeys, TheNewestResidualTokensStayExact) {
  // residual=64: 96 tokens seal 64, the newest 32 wait in fp16.
  EXPECT_GT(WeightOnTheNewest("kivi:nominal_bits=2,residual=64"), 0.9f);
  // residual=32 seals all 96: the same query can no longer single out 95.
  EXPECT_LT(WeightOnTheNewest("kivi:nominal_bits=2,residual=32"), 0.5f);
}

// heavy=1, recent=1. Prefill 0, 1: both queries read channel 1, where token 0
// has key 8, so token 0 scores ~2 and token 1 ~0. The decode query at 2 reads
// channel 0, where token 1 has key 8: that step gives token 1 ~1 and token 0
// ~0. Summed, token 0 (~2) beats token 1 (~1) and stays; scores replaced by
// the last step would keep token 1.
TEST(H2oKeys, DecodeAttentionIsAddedToEachTokensScore) {
  keys_harness::Planted p;
  p.k = [](int, int32_t pos, int, float* r) {
    for (int d = 0; d < 16; ++d) r[d] = 0.f;
    if (pos == 0) r[1] = 8.f;
    if (pos == 1) r[0] = 8.f;
  };
  p.v = [](int, int32_t pos, int, float* r) {
    for (int d = 0; d < 16; ++d) r[d] = static_cast<float>(pos + d);
  };
  p.q = [](int, int32_t pos, int, float* r) { keys_harness::AlongChannel(pos < 2 ? 1 : 0, 16, r); };
  auto c = keys_harness::Make("h2o:heavy=1,recent=1", keys_harness::Geometry(1, 1, 1, 16));
  ASSERT_NE(c, nullptr);
  keys_harness::RunBatch(*c, p, 0, 2, true);
  keys_harness::RunDecode(*c, p, 2, 1);
  EXPECT_EQ(keys_harness::Kept(*c, 0, 0), (std::vector<int32_t>{0, 2}));
}

// heavy=1, recent=2 over 5 prompt tokens that all attend token 0: token 0 is
// the heavy hitter, and the newest two (3, 4) stay although they score ~0
// (ignoring recent= would keep the best three: 0, 1, 2).
TEST(H2oKeys, TheRecentWindowIsKeptWhateverItsScores) {
  keys_harness::Planted p;
  p.k = [](int, int32_t pos, int, float* r) {
    for (int d = 0; d < 16; ++d) r[d] = 0.f;
    if (pos == 0) r[0] = 8.f;
  };
  p.v = p.k;
  p.q = [](int, int32_t, int, float* r) { keys_harness::AlongChannel(0, 16, r); };
  auto c = keys_harness::Make("h2o:heavy=1,recent=2", keys_harness::Geometry(1, 1, 1, 16));
  ASSERT_NE(c, nullptr);
  keys_harness::RunBatch(*c, p, 0, 5, true);
  EXPECT_EQ(keys_harness::Kept(*c, 0, 0), (std::vector<int32_t>{0, 3, 4}));
  auto wide = keys_harness::Make("h2o:heavy=2,recent=1", keys_harness::Geometry(1, 1, 1, 16));
  ASSERT_NE(wide, nullptr);
  keys_harness::RunBatch(*wide, p, 0, 5, true);
  EXPECT_EQ(keys_harness::Kept(*wide, 0, 0), (std::vector<int32_t>{0, 1, 4}));
}

}  // namespace
}  // namespace hqekv::policy
