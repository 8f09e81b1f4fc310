// HqeKV's importance normalisation keeps a per-chunk count floor: a token's
// accumulated attention is divided by max(queries that saw it, m), never by
// the few recorded queries that can see the newest tokens (which ranked the
// newest chunk first). Driven through the policy's public interface only
// (MakeKvCache: Append / Attend / EndBatch), so it holds whatever the cache's
// internals become.
//
// Set-up, one layer, one head, head_dim 32, one prefill of 136 tokens (four
// 32-token chunks and 8 residual tokens), every query the same, attention
// logits per chunk L = 5, 5, 1, 1.06 (keys along one dimension), the m = 20
// recorded queries at positions 116..135. Chunk 3 [96, 128) is seen whole by
// every recorded query up to token 116 only: 11 of its tokens are seen by
// 19..9 of them. Per query that sees them its tokens get 6% more attention
// than chunk 2's, but summed over the window they get about 10% less:
//   with the floor (divide by 20): chunk 3 ranks below chunk 2;
//   without it (divide by 9..19): chunk 3 ranks above chunk 2.
// ratios=0.75/0/0/0.25 evicts exactly one of the four chunks, the lowest;
// chunks 0 and 1 rank far above both. V marks the chunks: chunk 2 rows are
// e0, chunk 3 rows e1, others 0, so a query afterwards shows which survived.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "policy/factory.h"

namespace hqekv {
namespace {

constexpr int kD = 32;
constexpr int kTokens = 136;

float ChunkLogit(int pos) {
  if (pos < 64) return 5.0f;
  if (pos < 96) return 1.0f;
  if (pos < 128) return 1.06f;
  return 0.0f;  // residual
}

TEST(HqekvNormalisation, TheNewestChunkIsNotDividedByItsFewQueries) {
  const KvGeometry g{1, 1, 1, kD, 256};
  auto cache = MakeKvCache("hqekv:ratios=0.75/0/0/0.25,fp16_chunks=0,m=20,sink=0", g);
  ASSERT_TRUE(cache.ok()) << cache.message();
  KvCache& c = **cache;
  std::vector<float> k(size_t(kTokens) * kD, 0.0f), v(size_t(kTokens) * kD, 0.0f),
      q(size_t(kTokens) * kD, 0.0f), out(size_t(kTokens) * kD);
  std::vector<int32_t> pos(kTokens);
  // q . k / sqrt(D) = k[2] with q = sqrt(D) e2.
  for (int i = 0; i < kTokens; ++i) {
    pos[i] = i;
    k[size_t(i) * kD + 2] = ChunkLogit(i);
    q[size_t(i) * kD + 2] = std::sqrt(static_cast<float>(kD));
    if (i >= 64 && i < 96) v[size_t(i) * kD + 0] = 1.0f;   // chunk 2
    if (i >= 96 && i < 128) v[size_t(i) * kD + 1] = 1.0f;  // chunk 3
  }
  ASSERT_TRUE(c.Append(0, k.data(), v.data(), pos.data(), kTokens).ok());
  ASSERT_TRUE(c.Attend(0, q.data(), pos.data(), kTokens, out.data()).ok());
  ASSERT_TRUE(c.EndBatch(kTokens, true).ok());
  // One more token (logit 0, V 0) and its query: which chunk's V is left?
  std::vector<float> k1(kD, 0.0f), v1(kD, 0.0f), q1(kD, 0.0f), o1(kD);
  q1[2] = std::sqrt(static_cast<float>(kD));
  const int32_t p1 = kTokens;
  ASSERT_TRUE(c.Append(0, k1.data(), v1.data(), &p1, 1).ok());
  ASSERT_TRUE(c.Attend(0, q1.data(), &p1, 1, o1.data()).ok());
  ASSERT_TRUE(c.EndBatch(1, false).ok());
  // Exactly one of the two marked chunks is gone: chunk 3 (the floor ranks
  // it last), so its dimension reads 0 and chunk 2's does not.
  EXPECT_GT(o1[0], 1e-4f) << "chunk 2 was evicted: the newest chunk outranked it";
  EXPECT_LT(std::fabs(o1[1]), 1e-6f) << "chunk 3 was kept over chunk 2";
}

// The control: with the newest chunk clearly the most attended (logit 3),
// the floor does not push it out; chunk 2 goes instead. This keeps the test
// above from passing for a cache that always evicts the newest chunk.
TEST(HqekvNormalisation, AClearlyImportantNewestChunkIsKept) {
  const KvGeometry g{1, 1, 1, kD, 256};
  auto cache = MakeKvCache("hqekv:ratios=0.75/0/0/0.25,fp16_chunks=0,m=20,sink=0", g);
  ASSERT_TRUE(cache.ok()) << cache.message();
  KvCache& c = **cache;
  std::vector<float> k(size_t(kTokens) * kD, 0.0f), v(size_t(kTokens) * kD, 0.0f),
      q(size_t(kTokens) * kD, 0.0f), out(size_t(kTokens) * kD);
  std::vector<int32_t> pos(kTokens);
  for (int i = 0; i < kTokens; ++i) {
    pos[i] = i;
    k[size_t(i) * kD + 2] = i >= 96 && i < 128 ? 3.0f : ChunkLogit(i);
    q[size_t(i) * kD + 2] = std::sqrt(static_cast<float>(kD));
    if (i >= 64 && i < 96) v[size_t(i) * kD + 0] = 1.0f;
    if (i >= 96 && i < 128) v[size_t(i) * kD + 1] = 1.0f;
  }
  ASSERT_TRUE(c.Append(0, k.data(), v.data(), pos.data(), kTokens).ok());
  ASSERT_TRUE(c.Attend(0, q.data(), pos.data(), kTokens, out.data()).ok());
  ASSERT_TRUE(c.EndBatch(kTokens, true).ok());
  std::vector<float> k1(kD, 0.0f), v1(kD, 0.0f), q1(kD, 0.0f), o1(kD);
  q1[2] = std::sqrt(static_cast<float>(kD));
  const int32_t p1 = kTokens;
  ASSERT_TRUE(c.Append(0, k1.data(), v1.data(), &p1, 1).ok());
  ASSERT_TRUE(c.Attend(0, q1.data(), &p1, 1, o1.data()).ok());
  EXPECT_LT(std::fabs(o1[0]), 1e-6f) << "chunk 2 was kept over a more attended chunk 3";
  EXPECT_GT(o1[1], 1e-4f);
}

}  // namespace
}  // namespace hqekv
