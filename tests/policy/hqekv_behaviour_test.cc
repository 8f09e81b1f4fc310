// Which chunks HqeKV keeps, demotes and evicts, on hand-built caches whose
// attention and V ranges are planted (behaviour_harness.h), for K and V
// separately, per KV head with per_head=1, at prefill and after decode-time
// events (the last-m-queries window and its carry-over across an event).
//
// Tier counts: ratios=0.25/0.25/0.25/0.25 with 2 pinned fp16 chunks give,
// over 10 compressed chunks, 2 fp16 / 2 u4 / 2 u2 / 2 n1 / 2 evicted
// (AllocateChunks: 2 pinned, each ratio 0.25 * 8 = 2); over 11, 2 / 3 / 2 /
// 2 / 2 (each 0.25 * 9 = 2.25 -> 2, the one left over goes by largest
// remainder, ties to the more precise tier: u4). Evicted chunks are chosen
// by the K score (mean attention); the kept ones are ranked by the K score
// for K tiers and by attention x Range(V) for V tiers, a chunk in a better
// current tier ranking above one in a worse tier (scores are compared
// within a tier); tiers are filled from fp16 down, each slot going only to
// a chunk whose current tier is at least that good; tiers only go down.
//
// Levels: chunk c's keys hold 2 * level in the channel a query group reads,
// so its attention weight is ~ e^(2 level) (neighbouring levels: x7.4). A V
// row is (e^j, 0, ..., 0): Range(V) = e^j, so the V score of a chunk is
// ~ e^(2 level + j). The planted values keep every pair of compared scores
// at least a factor e apart.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "behaviour_harness.h"
#include "policy/hqekv_cache.h"

namespace hqekv::policy {
namespace {

using testing::AlongChannel;
using testing::Geometry;
using testing::Join;
using testing::Kept;
using testing::Make;
using testing::Planted;
using testing::RunBatch;
using testing::RunDecode;
using testing::Span;

constexpr int kHqekvHeadDim = 32;
constexpr int kChunks = 10;  // the prompt: 10 chunks of 32 tokens

// Tier name per original chunk 0..n_chunks-1 of (layer 0, unit), "evicted"
// for chunks no longer in the store. Live chunks are mapped back to their
// original index through the first kept position of each.
std::vector<std::string> ChunkTiers(const KvCache& c, int unit, int head, bool k, int n_chunks) {
  const auto& h = dynamic_cast<const HqekvCache&>(c);
  const std::vector<Tier>& tiers = k ? h.k_tiers(0, unit) : h.v_tiers(0, unit);
  const std::vector<int32_t> pos = Kept(c, 0, head);
  std::vector<std::string> out(n_chunks, "evicted");
  for (size_t i = 0; i < tiers.size(); ++i) {
    const size_t first = i * 32;
    EXPECT_LT(first, pos.size());
    if (first >= pos.size()) break;
    out[pos[first] / 32] = TierName(tiers[i]);
  }
  return out;
}

using Names = std::vector<std::string>;

// ---- The planted pattern of KV head 0 --------------------------------------
// Channel 0: read by the prompt's last 20 queries (positions 300..319, the
//            importance window of the prefill event).
// Channel 1: read by the decode queries 332..351 (the window of the event
//            after 32 decode steps).
// Channel 2: read by the prompt queries 0..299 (outside every window): hot
//            on chunks 3 and 7, which the window's ranking evicts.
// Channel 3: read by the decode queries 320..331 (outside the window): hot on
//            chunks 1, 5, 9.
// Chunk 10 = the 32 decode tokens 320..351.
const int kL[11] = {9, 2, 5, 0, 7, 3, 8, 1, 6, 4, 0};   // channel 0 levels
const int kM[11] = {4, 1, 5, 0, 6, 0, 7, 0, 3, 2, 8};   // channel 1 levels
const int kN[11] = {0, 0, 0, 9, 0, 0, 0, 8, 0, 0, 0};   // channel 2 levels
const int kQ[11] = {0, 9, 0, 0, 0, 8, 0, 0, 0, 7, 0};   // channel 3 levels
const int kJ[11] = {10, 2, 0, 0, 8, 5, 5, 0, 0, 9, 1};  // log Range(V)

// KV head 1 (per_head=1 only): channel 0 levels reversed, its own decode
// levels, every V range 1 (so its V ranking is its K ranking).
const int kL1[11] = {0, 7, 4, 9, 2, 6, 1, 8, 3, 5, 0};
const int kM1[11] = {0, 5, 2, 7, 0, 4, 0, 6, 1, 3, 8};

Planted Pattern() {
  Planted p;
  p.k = [](int, int32_t pos, int head, float* row) {
    const int c = pos / 32;
    for (int d = 0; d < kHqekvHeadDim; ++d) row[d] = 0.f;
    if (head == 0) {
      row[0] = 2.f * kL[c];
      row[1] = 2.f * kM[c];
      row[2] = 2.f * kN[c];
      row[3] = 2.f * kQ[c];
    } else {
      row[0] = 2.f * kL1[c];
      row[1] = 2.f * kM1[c];
    }
  };
  p.v = [](int, int32_t pos, int head, float* row) {
    for (int d = 0; d < kHqekvHeadDim; ++d) row[d] = 0.f;
    row[0] = head == 0 ? std::exp(static_cast<float>(kJ[pos / 32])) : 1.f;
  };
  p.q = [](int, int32_t pos, int, float* row) {
    int ch = 0;
    if (pos < 300)
      ch = 2;
    else if (pos < 320)
      ch = 0;
    else if (pos < 332)
      ch = 3;
    else
      ch = 1;
    AlongChannel(ch, kHqekvHeadDim, row);
  };
  return p;
}

const char* kSpec = "hqekv:ratios=0.25/0.25/0.25/0.25,fp16_chunks=2";

// Head 0's expected tiers (derivation in the comments of each test).
const Names kPrefillK = {"fp16", "n1", "u2", "evicted", "u4", "n1", "fp16", "evicted", "u4", "u2"};
const Names kPrefillV = {"fp16", "n1", "n1", "evicted", "fp16", "u2", "u4", "evicted", "u2", "u4"};
const Names kDecodeK = {"u4",   "n1",      "u2", "evicted", "u4",  "n1",
                        "fp16", "evicted", "u4", "u2",      "fp16"};
const Names kDecodeV = {"fp16", "n1",      "n1", "evicted", "fp16", "u2",
                        "u4",   "evicted", "u2", "u4",      "u4"};

// Prefill of 320 tokens: one event over 10 chunks, ranked by the last 20
// queries (channel 0).
//   K (by level L): evict the two lowest, chunks 3 (L 0) and 7 (L 1); then
//     0 (9), 6 (8) fp16; 4 (7), 8 (6) u4; 2 (5), 9 (4) u2; 5 (3), 1 (2) n1.
//   V (by 2L + j among the kept: 0:28 1:6 2:10 4:22 5:11 6:21 8:12 9:17):
//     0, 4 fp16; 6, 9 u4; 8, 5 u2; 2, 1 n1.
// After 32 decode steps (chunk 10 complete: one event over 11 chunks), the
// window is the decode queries 332..351 (channel 1, levels M); counts
// 2 fp16 / 3 u4 / 2 u2 / 2 n1, ranked within current tiers:
//   K by M: fp16 {10 (8), 6 (7), 0 (4)}, u4 {4 (6), 8 (3)}, u2 {2 (5), 9 (2)},
//     n1 {1, 5} -> 10, 6 fp16; 0 (fp16->u4), 4, 8 u4; 2, 9 u2; 1, 5 n1.
//   V by 2M + j: fp16 {4:20, 0:18, 10:17}, u4 {6:19, 9:13}, u2 {8:6, 5:5},
//     n1 {2:10, 1:4} -> 4, 0 fp16; 10 (new->u4), 6, 9 u4; 8, 5 u2; 2, 1 n1.
TEST(HqekvBehaviour, PlantedRankingDecidesEveryTierAtPrefillAndDecode) {
  auto c = Make(kSpec, Geometry(1, 2, 1, kHqekvHeadDim));
  ASSERT_NE(c, nullptr);
  const Planted p = Pattern();
  RunBatch(*c, p, 0, kChunks * 32, true);
  EXPECT_EQ(ChunkTiers(*c, 0, 0, true, kChunks), kPrefillK);
  EXPECT_EQ(ChunkTiers(*c, 0, 0, false, kChunks), kPrefillV);
  // The store really holds those formats (Stats reads the store's formats,
  // not the policy's tier lists): 64 cells = 2 chunks x 32 tokens x 1 head.
  const KvLayerStats st = c->Stats().layers[0];
  const std::map<std::string, int64_t> two_each = {
      {"fp16", 64}, {"u4", 64}, {"u2", 64}, {"n1", 64}, {"evicted", 64}};
  EXPECT_EQ(st.k_tiers, two_each);
  EXPECT_EQ(st.v_tiers, two_each);

  RunDecode(*c, p, 320, 31);
  // 31 steps: no event yet, nothing changes.
  EXPECT_EQ(ChunkTiers(*c, 0, 0, true, kChunks), kPrefillK);
  RunDecode(*c, p, 351, 1);
  EXPECT_EQ(ChunkTiers(*c, 0, 0, true, kChunks + 1), kDecodeK);
  EXPECT_EQ(ChunkTiers(*c, 0, 0, false, kChunks + 1), kDecodeV);
  const KvLayerStats st2 = c->Stats().layers[0];
  const std::map<std::string, int64_t> decode_counts = {
      {"fp16", 64}, {"u4", 96}, {"u2", 64}, {"n1", 64}, {"evicted", 64}};
  EXPECT_EQ(st2.k_tiers, decode_counts);
  EXPECT_EQ(st2.v_tiers, decode_counts);
}

// per_head=1: each KV head ranks its own chunks by its own query head's
// attention and its own V ranges, and evicts its own chunks.
//   Head 0: as above.
//   Head 1, prefill (levels L1, V range 1 everywhere, so V = K): evict
//     0 (0), 6 (1); 3 (9), 7 (8) fp16; 1 (7), 5 (6) u4; 9 (5), 2 (4) u2;
//     8 (3), 4 (2) n1.
//   Head 1 after 32 decode steps (levels M1), within current tiers: fp16
//     {10 (8), 3 (7), 7 (6)}, u4 {1 (5), 5 (4)}, u2 {9 (3), 2 (2)}, n1 {8, 4}
//     -> 10, 3 fp16; 7 (fp16->u4), 1, 5 u4; 9, 2 u2; 8, 4 n1.
TEST(HqekvBehaviour, PerHeadRanksEachKvHeadByItsOwnAttentionAndRanges) {
  auto c = Make(std::string(kSpec) + ",per_head=1", Geometry(1, 2, 2, kHqekvHeadDim));
  ASSERT_NE(c, nullptr);
  const Planted p = Pattern();
  RunBatch(*c, p, 0, kChunks * 32, true);
  EXPECT_EQ(ChunkTiers(*c, 0, 0, true, kChunks), kPrefillK);
  EXPECT_EQ(ChunkTiers(*c, 0, 0, false, kChunks), kPrefillV);
  const Names head1 = {"evicted", "u4", "u2", "fp16", "n1", "u4", "evicted", "fp16", "n1", "u2"};
  EXPECT_EQ(ChunkTiers(*c, 1, 1, true, kChunks), head1);
  EXPECT_EQ(ChunkTiers(*c, 1, 1, false, kChunks), head1);
  RunDecode(*c, p, 320, 32);
  EXPECT_EQ(ChunkTiers(*c, 0, 0, true, kChunks + 1), kDecodeK);
  EXPECT_EQ(ChunkTiers(*c, 0, 0, false, kChunks + 1), kDecodeV);
  const Names head1_decode = {"evicted", "u4", "u2", "fp16", "n1",  "u4",
                              "evicted", "u4", "n1", "u2",   "fp16"};
  EXPECT_EQ(ChunkTiers(*c, 1, 1, true, kChunks + 1), head1_decode);
  EXPECT_EQ(ChunkTiers(*c, 1, 1, false, kChunks + 1), head1_decode);
}

// The window carries over an event: a prompt of 340 tokens seals 10 chunks
// (event 1) and leaves 20 in the residual; the next event comes after 12
// decode steps, and its last 20 queries are the prompt's last 8 (332..339)
// plus the 12 decode queries. ratios=0/0/0/1: only the 2 pinned chunks stay
// (fp16), every other chunk is evicted (over 11 chunks: 2 fp16, 9 evicted).
//   Prompt queries 320..331 read channel 0: chunk 4 (level 9), 7 (8).
//   Prompt queries 332..339 (carried) read channel 2: chunk 4 only.
//   Decode queries 340..351 read channel 1: chunk 7 (9), chunk 10 (6).
// Event 1 keeps chunks 4 and 7. Event 2 evicts the lowest of {4, 7, 10}:
// with the carried queries chunk 4 scores ~8/32/20, chunk 10 ~e^-6 of that;
// without them chunk 4 would score ~0 and go instead.
TEST(HqekvBehaviour, WindowCarriesPromptQueriesIntoTheNextEvent) {
  const int kKey4 = 4, kKey7 = 7, kNew = 10;
  Planted p;
  p.k = [&](int, int32_t pos, int, float* row) {
    const int c = pos / 32;
    for (int d = 0; d < kHqekvHeadDim; ++d) row[d] = 0.f;
    row[0] = c == kKey4 ? 18.f : c == kKey7 ? 16.f : 0.f;
    row[1] = c == kKey7 ? 18.f : c == kNew ? 12.f : 0.f;
    row[2] = c == kKey4 ? 18.f : 0.f;
  };
  p.v = [](int, int32_t pos, int, float* row) {
    for (int d = 0; d < kHqekvHeadDim; ++d) row[d] = 0.f;
    row[0] = 1.f + static_cast<float>(pos % 7);
  };
  p.q = [](int, int32_t pos, int, float* row) {
    AlongChannel(pos < 332 ? 0 : pos < 340 ? 2 : 1, kHqekvHeadDim, row);
  };
  auto c = Make("hqekv:ratios=0/0/0/1,fp16_chunks=2", Geometry(1, 2, 1, kHqekvHeadDim));
  ASSERT_NE(c, nullptr);
  RunBatch(*c, p, 0, 340, true);
  EXPECT_EQ(Kept(*c, 0, 0), Join({Span(128, 159), Span(224, 255), Span(320, 339)}));
  RunDecode(*c, p, 340, 11);
  EXPECT_EQ(Kept(*c, 0, 0).size(), 64u + 31u);  // no event before 32 residual tokens
  RunDecode(*c, p, 351, 1);
  EXPECT_EQ(Kept(*c, 0, 0), Join({Span(128, 159), Span(224, 255)}));
  EXPECT_EQ(ChunkTiers(*c, 0, 0, true, 11),
            (Names{"evicted", "evicted", "evicted", "evicted", "fp16", "evicted", "evicted", "fp16",
                   "evicted", "evicted", "evicted"}));
}

// Reset forgets the window: the same prompt after a Reset plans the same tiers.
TEST(HqekvBehaviour, ResetRepeatsThePrefillPlan) {
  auto c = Make(kSpec, Geometry(1, 2, 1, kHqekvHeadDim));
  ASSERT_NE(c, nullptr);
  const Planted p = Pattern();
  RunBatch(*c, p, 0, kChunks * 32, true);
  RunDecode(*c, p, 320, 32);  // the planted levels cover chunks 0..10 (positions < 352)
  c->Reset();
  RunBatch(*c, p, 0, kChunks * 32, true);
  EXPECT_EQ(ChunkTiers(*c, 0, 0, true, kChunks), kPrefillK);
  EXPECT_EQ(ChunkTiers(*c, 0, 0, false, kChunks), kPrefillV);
}

}  // namespace
}  // namespace hqekv::policy
