#include "cache/kv_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "core/half.h"
#include "quant/format.h"
#include "quant/format_traits.h"
#include "cache/state_io.h"
#include "positions.h"

namespace hqekv::cache {
namespace {

using quant::Format;
using quant::Grouping;
using test_util::Range;

std::unique_ptr<KvStore> MakeStore(int L, int H, int D, int G = 8, size_t page = 0) {
  KvStoreConfig c;
  c.n_layers = L;
  c.n_kv_heads = H;
  c.head_dim = D;
  c.chunk = G;
  c.page_bytes = page;
  auto r = KvStore::Create(c);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
  return std::move(r).value();
}

// Deterministic token values: K and V of (layer, head, pos) differ, so a row
// read back identifies which token (and which of K/V) it came from.
float Val(int layer, int head, int pos, int d, bool is_v) {
  return static_cast<float>((pos * 7 + d * 3 + head * 11 + layer * 5) % 29) * 0.125f - 1.5f +
         (is_v ? 0.0625f : 0.0f);
}

void AppendTokens(KvStore& s, int layer, const std::vector<int32_t>& pos) {
  const int H = s.n_kv_heads(), D = s.head_dim();
  std::vector<float> k(pos.size() * H * D), v(k.size());
  for (size_t i = 0; i < pos.size(); ++i) {
    for (int h = 0; h < H; ++h) {
      for (int d = 0; d < D; ++d) {
        k[(i * H + h) * D + d] = Val(layer, h, pos[i], d, false);
        v[(i * H + h) * D + d] = Val(layer, h, pos[i], d, true);
      }
    }
  }
  ASSERT_TRUE(s.Append(layer, k.data(), v.data(), pos.data(), static_cast<int>(pos.size())).ok());
}

void ExpectAccountingExact(const KvStore& s) {
  const KvStats st = s.Stats();
  KvBytes sum;
  for (int l = 0; l < s.n_layers(); ++l) {
    EXPECT_EQ(st.layers[l].bytes.total(), s.LayerHeldBytes(l)) << "layer " << l;
    sum += st.layers[l].bytes;
  }
  EXPECT_EQ(sum.total(), st.bytes.total());
}

TEST(KvStore, CreateRejectsBadConfig) {
  KvStoreConfig c;
  c.n_layers = 1;
  c.n_kv_heads = 1;
  c.head_dim = 0;
  EXPECT_FALSE(KvStore::Create(c).ok());
  c.head_dim = 8;
  c.chunk = 65;
  auto r = KvStore::Create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("chunk"), std::string::npos);
  c.chunk = 32;
  c.page_bytes = 100;
  EXPECT_FALSE(KvStore::Create(c).ok());
}

TEST(KvStore, AppendRejectsNonIncreasingPositions) {
  auto s = MakeStore(1, 1, 4);
  AppendTokens(*s, 0, {3, 4});
  std::vector<float> k(4), v(4);
  int32_t p = 4;
  EXPECT_FALSE(s->Append(0, k.data(), v.data(), &p, 1).ok());
  EXPECT_FALSE(s->Append(1, k.data(), v.data(), &p, 1).ok());  // bad layer
  EXPECT_EQ(s->ResidualSize(0, 0), 2);
}

TEST(KvStore, SealKeepsPositionsAndValues) {
  auto s = MakeStore(2, 3, 16, 8);
  AppendTokens(*s, 1, Range(0, 21));
  ASSERT_TRUE(s->Seal(1, kAllHeads, 20, quant::F16(), quant::F32()).ok());
  for (int h = 0; h < 3; ++h) {
    EXPECT_EQ(s->NumChunks(1, h), 3);  // 8 + 8 + 4
    EXPECT_EQ(s->Chunk(1, h, 2).T, 4);
    EXPECT_EQ(s->ResidualSize(1, h), 1);
    std::vector<int32_t> pos;
    s->KeptPositions(1, h, &pos);
    EXPECT_EQ(pos, Range(0, 21));
    std::vector<float> k(21 * 16), v(21 * 16);
    s->DequantizeKept(1, h, k.data(), v.data());
    for (int t = 0; t < 21; ++t) {
      for (int d = 0; d < 16; ++d) {
        // fp16 storage everywhere (the residual was fp16 before sealing).
        EXPECT_EQ(k[t * 16 + d], RoundF16(Val(1, h, t, d, false)));
        EXPECT_EQ(v[t * 16 + d], RoundF16(Val(1, h, t, d, true)));
      }
    }
  }
  EXPECT_EQ(s->NumChunks(0, 0), 0);
  EXPECT_FALSE(s->Seal(1, 0, 2, quant::F16(), quant::F16()).ok());  // only 1 in the residual
  ExpectAccountingExact(*s);
}

TEST(KvStore, SealRejectsFormatThatCannotHoldTheChunk) {
  auto s = MakeStore(1, 1, 12, 8);
  AppendTokens(*s, 0, Range(0, 8));
  // Hadamard needs a power-of-two D.
  Format f = quant::Uniform(4, Grouping::kPerToken, 4);
  f.hadamard = true;
  auto st = s->Seal(0, 0, 8, f, quant::F16());
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(s->ResidualSize(0, 0), 8);
  EXPECT_EQ(s->NumChunks(0, 0), 0);
}

TEST(KvStore, AccountingCountsPayloadMetadataAndResidual) {
  const int D = 32, G = 8;
  auto s = MakeStore(1, 2, D, G);
  AppendTokens(*s, 0, Range(0, 19));
  const Format k4 = quant::Uniform(4, Grouping::kPerChannel);
  const Format v2 = quant::Uniform(2, Grouping::kPerToken, 16);
  ASSERT_TRUE(s->Seal(0, kAllHeads, 16, k4, v2).ok());
  const KvStats st = s->Stats();
  const int64_t payload = 2 * 2 * (quant::CodeBytes(k4, G, D) + quant::CodeBytes(v2, G, D));
  const int64_t meta = 2 * 2 * (quant::MetaBytes(k4, G, D) + quant::MetaBytes(v2, G, D));
  EXPECT_EQ(st.bytes.payload, payload);
  EXPECT_EQ(st.bytes.metadata, meta);
  EXPECT_GE(st.bytes.residual, 2 * 3 * D * 2 * 2);  // 3 tokens x K,V x fp16 x 2 heads
  EXPECT_EQ(st.layers[0].kept_tokens, 2 * 19);
  EXPECT_EQ(st.kept_elements, 2 * 19 * D * 2);
  EXPECT_EQ(st.original_elements, st.kept_elements);
  EXPECT_EQ(st.layers[0].k_tiers.at("u4:chan"), 2 * 16);
  EXPECT_EQ(st.layers[0].v_tiers.at("u2:tok:g=16"), 2 * 16);
  EXPECT_EQ(st.layers[0].k_tiers.at("residual"), 2 * 3);
  EXPECT_GT(st.true_bits(), 0.0);
  EXPECT_DOUBLE_EQ(st.true_bits(), 8.0 * st.bytes.total() / st.kept_elements);
  ExpectAccountingExact(*s);
}

// residual_reserve = 0: the residual arrays hold exactly their tokens after
// a seal or an eviction (no room for G spare tokens per head), and the
// accounting stays exact; the default reserve keeps G tokens of room.
TEST(KvStore, ZeroResidualReserveHoldsExactlyTheResidualTokens) {
  const int D = 8, G = 32, H = 2;
  KvStoreConfig c;
  c.n_layers = 1;
  c.n_kv_heads = H;
  c.head_dim = D;
  c.chunk = G;
  c.residual_reserve = -2;
  EXPECT_FALSE(KvStore::Create(c).ok());
  c.residual_reserve = 0;
  auto exact = KvStore::Create(c);
  ASSERT_TRUE(exact.ok());
  c.residual_reserve = -1;
  auto dflt = KvStore::Create(c);
  ASSERT_TRUE(dflt.ok());
  for (KvStore* s : {exact->get(), dflt->get()}) {
    AppendTokens(*s, 0, Range(0, 40));
    ASSERT_TRUE(s->Seal(0, kAllHeads, 32, quant::F16(), quant::F16()).ok());
    const int32_t victims[] = {33, 35};
    ASSERT_TRUE(s->EvictTokens(0, kAllHeads, victims, 2).ok());
    ExpectAccountingExact(*s);
  }
  // 6 residual tokens per head: K and V fp16 [6][D].
  EXPECT_EQ((*exact)->Stats().bytes.residual, H * 2 * 6 * D * 2);
  EXPECT_GE((*dflt)->Stats().bytes.residual, H * 2 * (6 + G) * D * 2);
  // Decoding one token at a time then sealing everything leaves no residual bytes.
  for (int p = 40; p < 50; ++p) AppendTokens(**exact, 0, {p});
  ASSERT_TRUE((*exact)->Seal(0, kAllHeads, 16, quant::F16(), quant::F16()).ok());
  EXPECT_EQ((*exact)->Stats().bytes.residual, 0);
  ExpectAccountingExact(**exact);
}

TEST(KvStore, EvictTokensDropsKAndVTogether) {
  const int D = 8;
  auto s = MakeStore(1, 2, D, 8);
  AppendTokens(*s, 0, Range(100, 120));
  ASSERT_TRUE(s->Seal(0, kAllHeads, 16, quant::F32(), quant::F16()).ok());
  // Head 1 only: two chunk tokens and one residual token.
  const std::vector<int32_t> gone = {117, 101, 110};
  ASSERT_TRUE(s->EvictTokens(0, 1, gone.data(), 3).ok());
  std::vector<int32_t> pos0, pos1;
  s->KeptPositions(0, 0, &pos0);
  s->KeptPositions(0, 1, &pos1);
  EXPECT_EQ(pos0, Range(100, 120));
  std::vector<int32_t> want;
  for (int p = 100; p < 120; ++p) {
    if (p != 101 && p != 110 && p != 117) want.push_back(p);
  }
  EXPECT_EQ(pos1, want);
  EXPECT_EQ(s->KeptTokens(0, 1), 17);
  std::vector<float> k(17 * D), v(17 * D);
  s->DequantizeKept(0, 1, k.data(), v.data());
  for (size_t j = 0; j < want.size(); ++j) {
    for (int d = 0; d < D; ++d) {
      EXPECT_EQ(k[j * D + d], RoundF16(Val(0, 1, want[j], d, false)));
      EXPECT_EQ(v[j * D + d], RoundF16(Val(0, 1, want[j], d, true)));
    }
  }
  // Evicting a token twice, or an unknown one, fails and changes nothing.
  const std::vector<int32_t> bad = {102, 101};
  auto st = s->EvictTokens(0, 1, bad.data(), 2);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("101"), std::string::npos);
  EXPECT_EQ(s->KeptTokens(0, 1), 17);
  const KvStats stats = s->Stats();
  EXPECT_EQ(stats.layers[0].k_tiers.at("evicted"), 3);
  EXPECT_EQ(stats.layers[0].v_tiers.at("evicted"), 3);
  EXPECT_LT(stats.kept_elements, stats.original_elements);
  ExpectAccountingExact(*s);
}

TEST(KvStore, EvictChunkFreesStorageAndKeepsIndices) {
  const int D = 16;
  auto s = MakeStore(1, 1, D, 8);
  AppendTokens(*s, 0, Range(0, 32));
  ASSERT_TRUE(s->Seal(0, 0, 32, quant::F16(), quant::F16()).ok());
  const int64_t blocks = s->Pool(0).live_blocks();
  EXPECT_EQ(blocks, 8);
  ASSERT_TRUE(s->EvictChunk(0, 0, 1).ok());
  EXPECT_EQ(s->Pool(0).live_blocks(), 6);
  EXPECT_EQ(s->NumChunks(0, 0), 4);  // tombstone until Compact
  EXPECT_FALSE(s->Chunk(0, 0, 1).live());
  EXPECT_EQ(s->Chunk(0, 0, 2).pos0, 16);
  EXPECT_TRUE(s->EvictChunk(0, 0, 1).ok());  // no-op
  EXPECT_FALSE(s->SetChunkFormat(0, 0, 1, quant::F16(), quant::F16()).ok());
  EXPECT_EQ(s->KeptTokens(0, 0), 24);
  ASSERT_TRUE(s->Compact(0, 0).ok());
  EXPECT_EQ(s->NumChunks(0, 0), 3);
  std::vector<int32_t> pos;
  s->KeptPositions(0, 0, &pos);
  std::vector<int32_t> want = Range(0, 8);
  for (int p = 16; p < 32; ++p) want.push_back(p);
  EXPECT_EQ(pos, want);
  ExpectAccountingExact(*s);
}

TEST(KvStore, DowngradeRequantizesFromCurrentRepresentation) {
  const int D = 32, G = 8;
  auto s = MakeStore(1, 1, D, G);
  AppendTokens(*s, 0, Range(0, 8));
  ASSERT_TRUE(s->Seal(0, 0, 8, quant::F16(), quant::F16()).ok());
  std::vector<float> k16(G * D), v16(G * D);
  ASSERT_TRUE(s->DequantizeChunk(0, 0, 0, k16.data(), v16.data()).ok());
  const Format k4 = quant::Uniform(4, Grouping::kPerChannel);
  const Format v4 = quant::Uniform(4, Grouping::kPerToken);
  const Format k1 = quant::Normal(1, Grouping::kPerChannel);
  ASSERT_TRUE(s->SetChunkFormat(0, 0, 0, k4, v4).ok());
  std::vector<float> k4x(G * D), v4x(G * D);
  ASSERT_TRUE(s->DequantizeChunk(0, 0, 0, k4x.data(), v4x.data()).ok());
  // Expected: quantize the fp16 values directly.
  std::vector<uint8_t> codes(quant::CodeBytes(k4, G, D)), meta(quant::MetaBytes(k4, G, D));
  std::vector<float> want(G * D);
  quant::QuantizeChunk(k4, k16.data(), G, D, codes.data(), meta.data());
  quant::DequantizeChunk(k4, codes.data(), meta.data(), G, D, want.data());
  EXPECT_EQ(k4x, want);
  // u4 -> n1 for K only: from the u4 reconstruction; V untouched.
  ASSERT_TRUE(s->SetChunkFormat(0, 0, 0, k1, v4).ok());
  std::vector<float> k1x(G * D), v4y(G * D);
  ASSERT_TRUE(s->DequantizeChunk(0, 0, 0, k1x.data(), v4y.data()).ok());
  EXPECT_EQ(v4y, v4x);
  codes.assign(quant::CodeBytes(k1, G, D), 0);
  meta.assign(quant::MetaBytes(k1, G, D), 0);
  quant::QuantizeChunk(k1, k4x.data(), G, D, codes.data(), meta.data());
  quant::DequantizeChunk(k1, codes.data(), meta.data(), G, D, want.data());
  EXPECT_EQ(k1x, want);
  EXPECT_TRUE(SameFormat(s->Chunk(0, 0, 0).k_format, k1));
  EXPECT_TRUE(SameFormat(s->Chunk(0, 0, 0).v_format, v4));
  EXPECT_EQ(s->Pool(0).live_blocks(), 4);  // codes and metadata planes of K and V
  const KvStats st = s->Stats();
  EXPECT_EQ(st.bytes.payload,
            static_cast<int64_t>(quant::CodeBytes(k1, G, D) + quant::CodeBytes(v4, G, D)));
  ExpectAccountingExact(*s);
}

TEST(KvStore, CompactRepacksTokenEvictedFp16Chunks) {
  const int D = 16, G = 8;
  auto s = MakeStore(1, 1, D, G);
  AppendTokens(*s, 0, Range(0, 64));
  ASSERT_TRUE(s->Seal(0, 0, 64, quant::F16(), quant::F16()).ok());
  std::vector<int32_t> odd;
  for (int p = 1; p < 64; p += 2) odd.push_back(p);
  ASSERT_TRUE(s->EvictTokens(0, 0, odd.data(), static_cast<int>(odd.size())).ok());
  const int64_t payload_before = s->Stats().bytes.payload;
  ASSERT_TRUE(s->Compact(0, 0).ok());
  EXPECT_EQ(s->NumChunks(0, 0), 4);
  EXPECT_EQ(s->Stats().bytes.payload, payload_before / 2);
  std::vector<int32_t> pos;
  s->KeptPositions(0, 0, &pos);
  ASSERT_EQ(pos.size(), 32u);
  std::vector<float> k(32 * D), v(32 * D);
  s->DequantizeKept(0, 0, k.data(), v.data());
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(pos[j], 2 * j);
    EXPECT_TRUE(s->Chunk(0, 0, j / G).positions.explicit_list());  // non-consecutive now
    for (int d = 0; d < D; ++d) {
      EXPECT_EQ(k[j * D + d], RoundF16(Val(0, 0, 2 * j, d, false)));
      EXPECT_EQ(v[j * D + d], RoundF16(Val(0, 0, 2 * j, d, true)));
    }
  }
  // Evicting by position still works on repacked chunks.
  const int32_t p = 42;
  ASSERT_TRUE(s->EvictTokens(0, 0, &p, 1).ok());
  EXPECT_EQ(s->KeptTokens(0, 0), 31);
  ExpectAccountingExact(*s);
}

// StreamingLLM-like decode: 4 sink tokens, a window of 60, one token in and
// one out per step, everything sealed in fp16 chunks and compacted every
// step. Memory must stay bounded and the kept set exact.
TEST(KvStore, SlidingWindowWithCompactionStaysBounded) {
  const int D = 16, G = 8, sink = 4, window = 60;
  auto s = MakeStore(1, 2, D, G, 1024);
  AppendTokens(*s, 0, Range(0, sink + window));
  ASSERT_TRUE(s->Seal(0, kAllHeads, sink + window, quant::F16(), quant::F16()).ok());
  int64_t max_held = 0, held_at_100 = 0;
  for (int p = sink + window; p < sink + window + 400; ++p) {
    AppendTokens(*s, 0, {p});
    ASSERT_TRUE(s->Seal(0, kAllHeads, 1, quant::F16(), quant::F16()).ok());
    const int32_t old = p - window;
    ASSERT_TRUE(s->EvictTokens(0, kAllHeads, &old, 1).ok());
    ASSERT_TRUE(s->Compact(0, kAllHeads).ok());
    std::vector<int32_t> pos;
    s->KeptPositions(0, 1, &pos);
    std::vector<int32_t> want = Range(0, sink);
    for (int q = p - window + 1; q <= p; ++q) want.push_back(q);
    ASSERT_EQ(pos, want) << "step " << p;
    int shorts = 0;
    for (int c = 0; c < s->NumChunks(0, 0); ++c) shorts += s->Chunk(0, 0, c).T != G;
    ASSERT_LE(shorts, 5 + 1) << "step " << p;  // max(4, run/8) + the next chunk being filled
    max_held = std::max(max_held, s->LayerHeldBytes(0));
    if (p == sink + window + 100) held_at_100 = s->LayerHeldBytes(0);
    ExpectAccountingExact(*s);
  }
  EXPECT_LE(max_held, held_at_100 * 3 / 2);  // no growth with the number of steps
  EXPECT_LE(s->Pool(0).live_blocks(), 2 * 2 * (64 / G + 6 + 1));
}

TEST(KvStore, CompactLeavesQuantizedChunksWithHoles) {
  const int D = 16, G = 8;
  auto s = MakeStore(1, 1, D, G);
  AppendTokens(*s, 0, Range(0, 16));
  ASSERT_TRUE(s->Seal(0, 0, 16, quant::Uniform(2, Grouping::kPerChannel), quant::F16()).ok());
  const int32_t p = 3;
  ASSERT_TRUE(s->EvictTokens(0, 0, &p, 1).ok());
  ASSERT_TRUE(s->Compact(0, 0).ok());
  EXPECT_EQ(s->NumChunks(0, 0), 2);
  EXPECT_EQ(s->Chunk(0, 0, 0).kept, 0xFFu & ~(1u << 3));
}

// Long random sequence of every operation against a shadow model of which
// positions are kept; checks positions, K/V pairing, accounting and leaks.
TEST(KvStore, RandomOperationsKeepInvariantsAndLeakNothing) {
  const int L = 2, H = 2, D = 16, G = 8;
  auto s = MakeStore(L, H, D, G, 1024);
  std::mt19937 rng(1234);
  const Format formats[] = {quant::F16(),
                            quant::Fp8E4M3(),
                            quant::Int8PerToken(),
                            quant::Uniform(4, Grouping::kPerChannel),
                            quant::Uniform(2, Grouping::kPerToken, 8),
                            quant::Uniform(1, Grouping::kPerChannel),
                            quant::Normal(1, Grouping::kPerToken, 16),
                            quant::F32()};
  std::vector<std::vector<std::vector<int32_t>>> shadow(L, std::vector<std::vector<int32_t>>(H));
  std::vector<int32_t> next(L, 0);
  // Positions of (layer, head) whose K / V has ever been in a lossy format:
  // the others must read back bit-exactly (values are fp16-exact).
  std::vector<std::vector<std::set<int32_t>>> lossy_k(L, std::vector<std::set<int32_t>>(H)),
      lossy_v = lossy_k;
  auto lossless = [](const Format& f) {
    return SameFormat(f, quant::F16()) || SameFormat(f, quant::F32());
  };
  for (int step = 0; step < 600; ++step) {
    const int l = static_cast<int>(rng() % L);
    const int op = static_cast<int>(rng() % 6);
    const int h = static_cast<int>(rng() % H);
    if (op == 0) {  // append 1..12 tokens, sometimes with a gap in positions
      const int n = 1 + static_cast<int>(rng() % 12);
      std::vector<int32_t> pos;
      for (int i = 0; i < n; ++i) {
        next[l] += 1 + (rng() % 5 == 0 ? 3 : 0);
        pos.push_back(next[l]);
      }
      AppendTokens(*s, l, pos);
      for (int hh = 0; hh < H; ++hh)
        shadow[l][hh].insert(shadow[l][hh].end(), pos.begin(), pos.end());
    } else if (op == 1) {  // seal
      const int n =
          s->ResidualSize(l, h) == 0 ? 0 : static_cast<int>(rng() % (s->ResidualSize(l, h) + 1));
      ASSERT_TRUE(s->Seal(l, h, n, formats[rng() % 8], formats[rng() % 8]).ok());
    } else if (op == 2 && s->NumChunks(l, h) > 0) {  // change a format
      const int c = static_cast<int>(rng() % s->NumChunks(l, h));
      auto st = s->SetChunkFormat(l, h, c, formats[rng() % 8], formats[rng() % 8]);
      EXPECT_EQ(st.ok(), s->Chunk(l, h, c).live());
    } else if (op == 3 && s->NumChunks(l, h) > 0) {  // evict a chunk
      const int c = static_cast<int>(rng() % s->NumChunks(l, h));
      const ChunkView cv = s->Chunk(l, h, c);
      for (int t = 0; t < cv.T; ++t) {
        if (cv.Kept(t)) {
          auto& v = shadow[l][h];
          v.erase(std::find(v.begin(), v.end(), cv.Position(t)));
        }
      }
      ASSERT_TRUE(s->EvictChunk(l, h, c).ok());
    } else if (op == 4 && !shadow[l][h].empty()) {  // evict random tokens
      auto& v = shadow[l][h];
      std::vector<int32_t> gone;
      for (int i = 0; i < 3 && !v.empty(); ++i) {
        const size_t j = rng() % v.size();
        gone.push_back(v[j]);
        v.erase(v.begin() + j);
      }
      ASSERT_TRUE(s->EvictTokens(l, h, gone.data(), static_cast<int>(gone.size())).ok());
    } else if (op == 5) {
      ASSERT_TRUE(s->Compact(l, h).ok());
    }
    std::vector<int32_t> pos;
    s->KeptPositions(l, h, &pos);
    ASSERT_EQ(pos, shadow[l][h]) << "step " << step;
    ASSERT_EQ(s->KeptTokens(l, h), static_cast<int64_t>(pos.size()));
    ExpectAccountingExact(*s);
    for (int hh = 0; hh < H; ++hh) {
      for (int c = 0; c < s->NumChunks(l, hh); ++c) {
        const ChunkView cv = s->Chunk(l, hh, c);
        for (int t = 0; t < cv.T; ++t) {
          if (!cv.Kept(t)) continue;
          if (!lossless(cv.k_format)) lossy_k[l][hh].insert(cv.Position(t));
          if (!lossless(cv.v_format)) lossy_v[l][hh].insert(cv.Position(t));
        }
      }
    }
  }
  // K and V rows still belong to the same token: for tokens only ever held
  // in lossless tiers (residual, f16, f32) they match the original values
  // exactly (a row of a neighbouring position would not); lossy ones stay
  // near them.
  int exact_rows = 0;
  for (int l = 0; l < L; ++l) {
    for (int h = 0; h < H; ++h) {
      const size_t n = shadow[l][h].size();
      std::vector<float> k(n * D), v(n * D);
      s->DequantizeKept(l, h, k.data(), v.data());
      for (size_t j = 0; j < n; ++j) {
        const int32_t p = shadow[l][h][j];
        const bool k_exact = lossy_k[l][h].count(p) == 0, v_exact = lossy_v[l][h].count(p) == 0;
        exact_rows += k_exact + v_exact;
        double ek = 0, ev = 0;
        for (int d = 0; d < D; ++d) {
          if (k_exact) {
            ASSERT_EQ(k[j * D + d], Val(l, h, p, d, false)) << "K of position " << p << " d " << d;
          }
          if (v_exact) {
            ASSERT_EQ(v[j * D + d], Val(l, h, p, d, true)) << "V of position " << p << " d " << d;
          }
          ek += std::abs(k[j * D + d] - Val(l, h, p, d, false));
          ev += std::abs(v[j * D + d] - Val(l, h, p, d, true));
        }
        EXPECT_LT(ek / D, 1.5) << "K row of position " << p;
        EXPECT_LT(ev / D, 1.5) << "V row of position " << p;
      }
    }
  }
  EXPECT_GT(exact_rows, 300);  // the exact check is not vacuous (493 K/V rows)
  // Evict everything: every block comes back, pages go back to the system
  // except the small per-layer cache.
  for (int l = 0; l < L; ++l) {
    for (int h = 0; h < H; ++h) {
      for (int c = 0; c < s->NumChunks(l, h); ++c) ASSERT_TRUE(s->EvictChunk(l, h, c).ok());
      ASSERT_TRUE(s->Compact(l, h).ok());
      EXPECT_EQ(s->NumChunks(l, h), 0);
    }
    EXPECT_EQ(s->Pool(l).live_blocks(), 0);
    EXPECT_EQ(s->Pool(l).pages_in_use(), 0);
    EXPECT_LE(s->Pool(l).held_bytes(), 2 * 1024);
  }
  ExpectAccountingExact(*s);
}

TEST(KvStore, SixtyFourTokenChunks) {
  const int D = 8, G = 64;
  auto s = MakeStore(1, 1, D, G);
  AppendTokens(*s, 0, Range(0, 130));
  ASSERT_TRUE(s->Seal(0, 0, 128, quant::F16(), quant::F16()).ok());
  EXPECT_EQ(s->Chunk(0, 0, 0).kept, ~uint64_t{0});
  std::vector<int32_t> gone = {0, 63, 64, 127, 129};
  ASSERT_TRUE(s->EvictTokens(0, 0, gone.data(), 5).ok());
  EXPECT_EQ(s->Chunk(0, 0, 0).KeptCount(), 62);
  ASSERT_TRUE(s->Compact(0, 0).ok());
  std::vector<int32_t> pos, want;
  s->KeptPositions(0, 0, &pos);
  for (int p = 0; p < 130; ++p) {
    if (std::find(gone.begin(), gone.end(), p) == gone.end()) want.push_back(p);
  }
  EXPECT_EQ(pos, want);
  EXPECT_EQ(s->NumChunks(0, 0), 2);  // 64 + 60 after repacking
  EXPECT_EQ(s->Chunk(0, 0, 0).kept, ~uint64_t{0});
  ExpectAccountingExact(*s);
}

TEST(KvStore, EvictTokensOnAllHeadsIsAllOrNothing) {
  auto s = MakeStore(1, 2, 8, 8);
  AppendTokens(*s, 0, Range(0, 12));
  ASSERT_TRUE(s->Seal(0, kAllHeads, 8, quant::F16(), quant::F16()).ok());
  const int32_t p10 = 10;
  ASSERT_TRUE(s->EvictTokens(0, 1, &p10, 1).ok());
  const std::vector<int32_t> both = {2, 10};  // 10 is gone from head 1
  EXPECT_FALSE(s->EvictTokens(0, kAllHeads, both.data(), 2).ok());
  EXPECT_EQ(s->KeptTokens(0, 0), 12);
  EXPECT_EQ(s->KeptTokens(0, 1), 11);
  const std::vector<int32_t> ok = {2, 11};
  ASSERT_TRUE(s->EvictTokens(0, kAllHeads, ok.data(), 2).ok());
  EXPECT_EQ(s->KeptTokens(0, 0), 10);
  EXPECT_EQ(s->KeptTokens(0, 1), 9);
}

TEST(KvStore, ResetFreesEverything) {
  auto s = MakeStore(2, 2, 16, 8);
  AppendTokens(*s, 0, Range(0, 40));
  ASSERT_TRUE(s->Seal(0, kAllHeads, 32, quant::F16(), quant::F16()).ok());
  const int64_t empty_l1 = s->LayerHeldBytes(1);
  EXPECT_GT(s->LayerHeldBytes(0), empty_l1);
  s->Reset();
  EXPECT_EQ(s->LayerHeldBytes(0), empty_l1);
  EXPECT_EQ(s->KeptTokens(0, 0), 0);
  EXPECT_EQ(s->AppendedTokens(0), 0);
  AppendTokens(*s, 0, Range(0, 4));  // positions may restart after Reset
  EXPECT_EQ(s->KeptTokens(0, 1), 4);
}

TEST(KvStore, TrueBitsOfAQuantizedStoreIncludeEveryByte) {
  // One layer, 8 heads, D = 128, 1024 tokens all in u2 (K per-channel, V
  // per-token g=32): codes are 2 bits, metadata 2 fp16 per 32 elements = 1
  // bit, so true bits are a little over 3 (chunk records), plus
  // the residual's reserved room for G tokens (fp16) per head.
  const int D = 128, G = 32, H = 8;
  auto s = MakeStore(1, H, D, G);
  AppendTokens(*s, 0, Range(0, 1024));
  ASSERT_TRUE(s->Seal(0, kAllHeads, 1024, quant::Uniform(2, Grouping::kPerChannel),
                      quant::Uniform(2, Grouping::kPerToken))
                  .ok());
  const KvStats st = s->Stats();
  EXPECT_EQ(st.bytes.payload, int64_t{1024} * H * D * 2 * 2 / 8);
  EXPECT_EQ(st.bytes.metadata, int64_t{1024} * H * D * 2 / 32 * 4);
  EXPECT_EQ(st.bytes.residual, int64_t{G} * H * D * 2 * 2);
  EXPECT_GT(st.true_bits(), 3.5);
  const double without_residual =
      8.0 * static_cast<double>(st.bytes.total() - st.bytes.residual) / st.kept_elements;
  EXPECT_GT(without_residual, 3.0);
  EXPECT_LT(without_residual, 3.1);  // measured 3.069
  // Codes (1024 B) and metadata (512 B) planes are powers of two: pages fill exactly.
  EXPECT_EQ(s->PoolSlackBytes(0), 0);
  ExpectAccountingExact(*s);
}

}  // namespace
}  // namespace hqekv::cache

namespace hqekv::cache {
namespace {

// HqeKV's pattern: chunks sealed fp16, then re-quantized to 4 and later 2
// bits, a few evicted, Compact after every event. The shared arena's slack
// stays small (repacked past a threshold), the accounting stays exact, and
// every kept value survives the moves bit for bit.
TEST(KvStore, FormatChurnKeepsSlackSmallAndAccountingExact) {
  const int H = 2, D = 64, G = 32;
  auto s = MakeStore(1, H, D, G);
  std::mt19937 rng(99);
  const Format u4k = quant::Uniform(4, Grouping::kPerChannel),
               u4v = quant::Uniform(4, Grouping::kPerToken, 32);
  const Format u2k = quant::Uniform(2, Grouping::kPerChannel),
               u2v = quant::Uniform(2, Grouping::kPerToken, 32);
  const Format n1k = quant::Normal(1, Grouping::kPerChannel),
               n1v = quant::Normal(1, Grouping::kPerToken, 32);
  int32_t next = 0;
  for (int event = 0; event < 80; ++event) {
    AppendTokens(*s, 0, Range(next, next + G));
    next += G;
    ASSERT_TRUE(s->Seal(0, kAllHeads, G, quant::F16(), quant::F16()).ok());
    const int nc = s->NumChunks(0, 0);
    for (int c = 0; c < nc; ++c) {
      if (!s->Chunk(0, 0, c).live()) continue;
      const int r = static_cast<int>(rng() % 10);
      const std::string k = quant::FormatName(s->Chunk(0, 0, c).k_format);
      if (r < 3 && k == "f16") {
        ASSERT_TRUE(s->SetChunkFormat(0, kAllHeads, c, u4k, u4v).ok());
      } else if (r < 5 && k.rfind("u4", 0) == 0) {
        ASSERT_TRUE(s->SetChunkFormat(0, kAllHeads, c, u2k, u2v).ok());
      } else if (r < 6 && k.rfind("u2", 0) == 0) {
        ASSERT_TRUE(s->SetChunkFormat(0, kAllHeads, c, n1k, n1v).ok());
      } else if (r == 9 && rng() % 8 == 0) {
        ASSERT_TRUE(s->EvictChunk(0, kAllHeads, c).ok());
      }
    }
    // Reconstruction before the event's Compact (which may move blocks).
    std::vector<float> k0(s->KeptTokens(0, 1) * D), v0(k0.size());
    s->DequantizeKept(0, 1, k0.data(), v0.data());
    ASSERT_TRUE(s->Compact(0, kAllHeads).ok());
    std::vector<float> k1(k0.size()), v1(v0.size());
    s->DequantizeKept(0, 1, k1.data(), v1.data());
    ASSERT_EQ(k0, k1) << "event " << event;
    ASSERT_EQ(v0, v1) << "event " << event;
    ExpectAccountingExact(*s);
    const int64_t slack = s->PoolSlackBytes(0);
    EXPECT_LE(slack,
              std::max<int64_t>(2 * s->Pool(0).page_bytes(), s->Pool(0).requested_bytes() / 32))
        << "event " << event;
  }
}

// RepackLayer (a budgeted policy's call after downgrades that freed blocks
// but no page): the slack drops to the last page's free room, the data and
// the accounting stay exact.
TEST(KvStore, RepackLayerLeavesOnlyTheLastPagesRoom) {
  const int H = 2, D = 64, G = 32;
  auto s = MakeStore(1, H, D, G);
  const Format u4k = quant::Uniform(4, Grouping::kPerChannel),
               u4v = quant::Uniform(4, Grouping::kPerToken, 64);
  const Format u2k = quant::Uniform(2, Grouping::kPerChannel),
               u2v = quant::Uniform(2, Grouping::kPerToken, 64);
  AppendTokens(*s, 0, Range(0, 40 * G));
  ASSERT_TRUE(s->Seal(0, kAllHeads, 40 * G, quant::F16(), quant::F16()).ok());
  for (int c = 0; c < 40; ++c) ASSERT_TRUE(s->SetChunkFormat(0, kAllHeads, c, u4k, u4v).ok());
  ASSERT_TRUE(s->Compact(0, kAllHeads).ok());
  // Every other chunk to 2 bits: holes on every page, none empties.
  for (int c = 0; c < 40; c += 2) ASSERT_TRUE(s->SetChunkFormat(0, kAllHeads, c, u2k, u2v).ok());
  const int64_t page = static_cast<int64_t>(s->Pool(0).page_bytes());
  const int64_t before = s->PoolSlackBytes(0);
  ASSERT_GT(before, page);
  std::vector<float> k0(s->KeptTokens(0, 1) * D), v0(k0.size());
  s->DequantizeKept(0, 1, k0.data(), v0.data());
  s->RepackLayer(0);
  std::vector<float> k1(k0.size()), v1(v0.size());
  s->DequantizeKept(0, 1, k1.data(), v1.data());
  EXPECT_EQ(k0, k1);
  EXPECT_EQ(v0, v1);
  EXPECT_LT(s->PoolSlackBytes(0), page);
  const int64_t req = s->Pool(0).requested_bytes();
  EXPECT_EQ(s->Pool(0).held_bytes(), (req + page - 1) / page * page);
  ExpectAccountingExact(*s);
}

// Chunks of one stream whose `plane` blocks (K or V codes, `bytes` each) lie
// right after the previous chunk's.
int AdjacentBlocks(const KvStore& s, int head, bool k, size_t bytes) {
  int adjacent = 0;
  for (int c = 1; c < s.NumChunks(0, head); ++c) {
    const ChunkView a = s.Chunk(0, head, c - 1), b = s.Chunk(0, head, c);
    adjacent += (k ? b.k_codes == a.k_codes + bytes : b.v_codes == a.v_codes + bytes) ? 1 : 0;
  }
  return adjacent;
}

// A multi-chunk seal (a prompt) places each plane of a stream in consecutive
// units: the K codes of chunk c + 1 follow those of chunk c on the same page,
// and so do the V codes, the order decode attention reads them in. Sealed
// chunk by chunk, K and V alternate and no two K blocks are neighbours. The
// placement costs no byte: both stores hold the same pages.
TEST(KvStore, MultiChunkSealPlacesEachPlaneOfAStreamContiguously) {
  const int H = 3, D = 128, G = 32, n = 24;  // int8: 4 KiB code blocks, 8 KiB pages
  const Format f = quant::Int8PerToken();
  const size_t code = quant::CodeBytes(f, G, D);
  ASSERT_EQ(code, 4096u);
  auto bulk = MakeStore(1, H, D, G), step = MakeStore(1, H, D, G);
  AppendTokens(*bulk, 0, Range(0, n * G));
  AppendTokens(*step, 0, Range(0, n * G));
  ASSERT_TRUE(bulk->Seal(0, kAllHeads, n * G, f, f).ok());
  for (int c = 0; c < n; ++c) ASSERT_TRUE(step->Seal(0, kAllHeads, G, f, f).ok());
  ASSERT_EQ(bulk->Pool(0).page_bytes(), 2 * code);
  for (int h = 0; h < H; ++h) {
    // Two code blocks a page: at least every other pair is adjacent (the
    // metadata units may take half of one page of the V codes).
    EXPECT_GE(AdjacentBlocks(*bulk, h, true, code), n / 2 - 1) << h;
    EXPECT_GE(AdjacentBlocks(*bulk, h, false, code), n / 2 - 1) << h;
    EXPECT_EQ(AdjacentBlocks(*step, h, true, code), 0) << h;
    // Same reconstruction either way.
    std::vector<float> k0(n * G * D), v0(k0.size()), k1(k0.size()), v1(k0.size());
    bulk->DequantizeKept(0, h, k0.data(), v0.data());
    step->DequantizeKept(0, h, k1.data(), v1.data());
    EXPECT_EQ(k0, k1);
    EXPECT_EQ(v0, v1);
  }
  EXPECT_EQ(bulk->Pool(0).held_bytes(), step->Pool(0).held_bytes());
  EXPECT_EQ(bulk->Pool(0).requested_bytes(), step->Pool(0).requested_bytes());
  EXPECT_EQ(bulk->Stats().bytes.total(), step->Stats().bytes.total());
  ExpectAccountingExact(*bulk);
  ExpectAccountingExact(*step);
}

// RepackLayer moves blocks largest first and, within a size, stream by
// stream and plane by plane: chunk-by-chunk seals (decode) come out with each
// plane of a stream adjacent, in no more pages than before.
TEST(KvStore, RepackLayerPlacesEachPlaneOfAStreamContiguously) {
  const int H = 2, D = 128, G = 32, n = 16;
  const Format f = quant::Int8PerToken();
  const size_t code = quant::CodeBytes(f, G, D);
  auto s = MakeStore(1, H, D, G);
  AppendTokens(*s, 0, Range(0, n * G));
  for (int c = 0; c < n; ++c) ASSERT_TRUE(s->Seal(0, kAllHeads, G, f, f).ok());
  const int64_t held = s->Pool(0).held_bytes();
  std::vector<float> k0(n * G * D), v0(k0.size()), k1(k0.size()), v1(k0.size());
  s->DequantizeKept(0, 1, k0.data(), v0.data());
  s->RepackLayer(0);
  s->DequantizeKept(0, 1, k1.data(), v1.data());
  EXPECT_EQ(k0, k1);
  EXPECT_EQ(v0, v1);
  for (int h = 0; h < H; ++h) {
    EXPECT_EQ(AdjacentBlocks(*s, h, true, code), n / 2) << h;
    EXPECT_EQ(AdjacentBlocks(*s, h, false, code), n / 2) << h;
  }
  EXPECT_LE(s->Pool(0).held_bytes(), held);
  ExpectAccountingExact(*s);
}

}  // namespace
}  // namespace hqekv::cache

namespace hqekv::cache {
namespace {

// One token row of D values through the format's scalar oracle (rotation
// through quant::QuantizeChunk / DequantizeChunk, which apply it around the
// kernels).
std::vector<float> OracleRow(const Format& f, const float* x, int D) {
  std::vector<uint8_t> codes(quant::CodeBytes(f, 1, D)), meta(quant::MetaBytes(f, 1, D) + 1);
  std::vector<float> y(D);
  if (f.hadamard) {
    quant::QuantizeChunk(f, x, 1, D, codes.data(), meta.data());
    quant::DequantizeChunk(f, codes.data(), meta.data(), 1, D, y.data());
    return y;
  }
  const quant::FormatTraits& t = quant::Traits(f.kind);
  t.ref_quantize(f, x, 1, D, codes.data(), meta.data());
  t.ref_dequantize(f, codes.data(), meta.data(), 1, D, y.data());
  return y;
}

std::unique_ptr<KvStore> ResidualStore(const Format& rf, int H, int D) {
  KvStoreConfig c;
  c.n_layers = 1;
  c.n_kv_heads = H;
  c.head_dim = D;
  c.chunk = 32;
  c.residual_reserve = 0;
  c.residual_format = rf;
  auto r = KvStore::Create(c);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.message());
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(KvStoreQuantizedResidual, RowsAreTheFormatsOracleAndEveryByteIsCounted) {
  const int H = 2, D = 64;
  Format q4had = quant::GgmlBlock(quant::Kind::kQ4_0);
  q4had.hadamard = true;
  for (const Format& rf : {quant::GgmlBlock(quant::Kind::kQ8_0),
                           quant::GgmlBlock(quant::Kind::kQ4_1), q4had, quant::Int8PerToken()}) {
    SCOPED_TRACE(quant::FormatName(rf));
    auto s = ResidualStore(rf, H, D);
    ASSERT_NE(s, nullptr);
    const size_t row = ResidualRowBytes(rf, D);
    EXPECT_LT(row, static_cast<size_t>(2 * D));  // smaller than an fp16 row
    AppendTokens(*s, 0, Range(0, 40));
    // 40 tokens per head, a K and a V row each, nothing else in the residual.
    EXPECT_EQ(s->Stats().bytes.residual, static_cast<int64_t>(H * 2 * 40 * row));
    ExpectAccountingExact(*s);
    // Evicting residual tokens keeps the other rows (and their bytes exact).
    const int32_t victims[] = {3, 17};
    ASSERT_TRUE(s->EvictTokens(0, kAllHeads, victims, 2).ok());
    EXPECT_EQ(s->Stats().bytes.residual, static_cast<int64_t>(H * 2 * 38 * row));
    ExpectAccountingExact(*s);
    std::vector<int32_t> kept;
    s->KeptPositions(0, 1, &kept);
    ASSERT_EQ(kept.size(), 38u);
    std::vector<float> k(38 * D), v(38 * D), x(D);
    s->DequantizeKept(0, 1, k.data(), v.data());
    for (int i = 0; i < 38; ++i) {
      for (bool is_v : {false, true}) {
        for (int d = 0; d < D; ++d) x[d] = Val(0, 1, kept[i], d, is_v);
        const std::vector<float> want = OracleRow(rf, x.data(), D);
        const float* got = (is_v ? v.data() : k.data()) + static_cast<size_t>(i) * D;
        for (int d = 0; d < D; ++d) {
          ASSERT_NEAR(got[d], want[d], 1e-5f * (1 + std::abs(want[d])))
              << "pos " << kept[i] << " d " << d << (is_v ? " V" : " K");
        }
      }
    }
    // A seal takes the rows' reconstruction: an fp16 chunk holds it rounded.
    std::vector<float> before_k(38 * D), before_v(38 * D);
    s->DequantizeKept(0, 0, before_k.data(), before_v.data());
    ASSERT_TRUE(s->Seal(0, kAllHeads, 32, quant::F16(), quant::F16()).ok());
    EXPECT_EQ(s->Stats().bytes.residual, static_cast<int64_t>(H * 2 * 6 * row));
    std::vector<float> ck(32 * D), cv(32 * D);
    ASSERT_TRUE(s->DequantizeChunk(0, 0, 0, ck.data(), cv.data()).ok());
    for (int j = 0; j < 32 * D; ++j) {
      ASSERT_EQ(ck[j], F16ToF32(F32ToF16(before_k[j]))) << j;
      ASSERT_EQ(cv[j], F16ToF32(F32ToF16(before_v[j]))) << j;
    }
    ExpectAccountingExact(*s);
    // The saved state loads into the same configuration, holding the same
    // bytes and rows; a store of fp16 rows refuses it.
    std::string blob;
    StateWriter w(&blob);
    s->SaveState(w);
    StateReader r(blob);
    auto loaded = KvStore::LoadState(s->config(), r);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    EXPECT_EQ((*loaded)->LayerHeldBytes(0), s->LayerHeldBytes(0));
    std::vector<float> lk(38 * D), lv(38 * D);
    (*loaded)->DequantizeKept(0, 0, lk.data(), lv.data());
    std::vector<float> sk(38 * D), sv(38 * D);
    s->DequantizeKept(0, 0, sk.data(), sv.data());
    EXPECT_EQ(lk, sk);
    EXPECT_EQ(lv, sv);
    KvStoreConfig f16 = s->config();
    f16.residual_format = quant::F16();
    StateReader r2(blob);
    EXPECT_FALSE(KvStore::LoadState(f16, r2).ok());
  }
}

TEST(KvStoreQuantizedResidual, CreateRefusesFormatsWithoutWholeTokenRows) {
  KvStoreConfig c;
  c.n_layers = 1;
  c.n_kv_heads = 1;
  c.head_dim = 64;
  // Per-channel codes share scales across tokens; fp8 has one scale per
  // chunk; q4_0 needs head_dim % 32 == 0; an fp16 row has no rotation.
  Format f16had = quant::F16();
  f16had.hadamard = true;
  for (const Format& bad :
       {quant::Uniform(4, Grouping::kPerChannel, 32), quant::Fp8E4M3(), f16had}) {
    c.residual_format = bad;
    auto r = KvStore::Create(c);
    ASSERT_FALSE(r.ok()) << quant::FormatName(bad);
    EXPECT_NE(r.message().find("residual format"), std::string::npos) << r.message();
  }
  c.head_dim = 16;
  c.residual_format = quant::GgmlBlock(quant::Kind::kQ4_0);
  EXPECT_FALSE(KvStore::Create(c).ok());
  c.residual_format = quant::Int8PerToken();
  EXPECT_TRUE(KvStore::Create(c).ok());
}

}  // namespace
}  // namespace hqekv::cache
