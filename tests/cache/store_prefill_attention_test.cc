// The tiled prefill path of StoreAttention (cache/store_prefill_attention.h)
// against its per-query path (StoreAttentionOptions::tiled_prefill = false,
// the oracle) over the tiers the policies use (KIVI 2/4-bit, int8, fp8,
// HqeKV's Hadamard normal/uniform mix), evicted chunks and tokens, GQA
// groups 1/4, D 64/128, positions with gaps; and with a sink attached, the
// recorded queries stay bit-identical to the per-query path.
#include "cache/store_prefill_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <random>
#include <vector>

#include "cache/store_attention.h"
#include "hadamard_format.h"
#include "core/parallel.h"
#include "quant/format.h"

namespace hqekv::cache {
namespace {

using quant::Format;
using quant::Grouping;

using test_util::Had;

struct Tiers {
  const char* name;
  std::vector<std::pair<Format, Format>> kv;  // (K, V) per sealed chunk, cycled
};

std::vector<Tiers> AllTiers() {
  return {
      {"kivi-2",
       {{quant::Uniform(2, Grouping::kPerChannel), quant::Uniform(2, Grouping::kPerToken)}}},
      {"kivi-4",
       {{quant::Uniform(4, Grouping::kPerChannel), quant::Uniform(4, Grouping::kPerToken)}}},
      {"int8", {{quant::Int8PerToken(), quant::Int8PerToken()}}},
      {"fp8", {{quant::Fp8E4M3(), quant::Fp8E4M3()}}},
      {"hqekv",
       {{Had(quant::Normal(2, Grouping::kPerChannel)), Had(quant::Normal(2, Grouping::kPerToken))},
        {quant::Uniform(4, Grouping::kPerChannel), quant::Uniform(4, Grouping::kPerToken)},
        {quant::F16(), quant::F16()},
        {Had(quant::Uniform(2, Grouping::kPerChannel)), quant::Uniform3(Grouping::kPerToken)}}},
  };
}

struct Case {
  std::unique_ptr<KvStore> store;
  std::vector<float> q;
  std::vector<int32_t> q_pos;
  int n_q_heads = 0;
};

// 300 tokens at positions 1, 4, 5, 8, ... (gaps) on layer 1 of 2, 256 of them
// sealed into 32-token chunks in the given tiers; head 0 loses chunk 2, the
// last head some tokens of chunks and of the residual. n queries: one before
// every token, one inside a gap, the rest spread to past the last token.
Case Build(const Tiers& t, int H, int group, int D, int n, unsigned seed) {
  Case c;
  KvStoreConfig cfg;
  cfg.n_layers = 2;
  cfg.n_kv_heads = H;
  cfg.head_dim = D;
  cfg.chunk = 32;
  c.store = std::move(KvStore::Create(cfg)).value();
  c.n_q_heads = H * group;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int tokens = 300, layer = 1;
  std::vector<int32_t> pos;
  for (int i = 0, p = 1; i < tokens; ++i, p += (i % 2 == 0) ? 3 : 1) pos.push_back(p);
  std::vector<float> k(static_cast<size_t>(tokens) * H * D), v(k.size());
  for (float& x : k) x = nd(rng);
  for (float& x : v) x = nd(rng);
  const size_t row = static_cast<size_t>(H) * D;
  EXPECT_TRUE(c.store->Append(layer, k.data(), v.data(), pos.data(), 100).ok());
  EXPECT_TRUE(c.store
                  ->Append(layer, k.data() + 100 * row, v.data() + 100 * row, pos.data() + 100,
                           tokens - 100)
                  .ok());
  EXPECT_TRUE(c.store->Seal(layer, kAllHeads, 256, quant::F16(), quant::F16()).ok());
  for (int ci = 0; ci < c.store->NumChunks(layer, 0); ++ci) {
    const auto& f = t.kv[ci % t.kv.size()];
    EXPECT_TRUE(c.store->SetChunkFormat(layer, kAllHeads, ci, f.first, f.second).ok());
  }
  EXPECT_TRUE(c.store->EvictChunk(layer, 0, 2).ok());
  const std::vector<int32_t> gone = {pos[3], pos[40], pos[41], pos[200], pos[290]};
  EXPECT_TRUE(c.store->EvictTokens(layer, H - 1, gone.data(), 5).ok());
  c.q_pos = {0, pos[7] + 1};
  for (int i = 2; i < n; ++i) c.q_pos.push_back(pos[0] + (pos.back() + 5) * i / (n - 1));
  std::sort(c.q_pos.begin(), c.q_pos.end());
  c.q.resize(static_cast<size_t>(n) * c.n_q_heads * D);
  for (float& x : c.q) x = 2.0f * nd(rng);
  return c;
}

std::vector<float> Attend(const Case& c, int n, bool tiled, const AttentionSink* sink = nullptr,
                          int first_sink_query = 0) {
  StoreAttentionOptions o;
  o.tiled_prefill = tiled;
  o.first_sink_query = first_sink_query;
  std::vector<float> out(static_cast<size_t>(n) * c.n_q_heads * c.store->head_dim(), -7.0f);
  const Status s =
      StoreAttention(*c.store, 1, c.n_q_heads, c.q.data(), c.q_pos.data(), n, out.data(), sink, o);
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

// max |v̂| and max |q · k̂| / sqrt(D) over the kept tokens of layer 1: the scale
// of attn::AttendRows' tolerance.
std::pair<float, float> Scales(const Case& c, int n) {
  const KvStore& s = *c.store;
  const int H = s.n_kv_heads(), D = s.head_dim(), group = c.n_q_heads / H;
  float max_v = 0.f, max_s = 0.f;
  for (int g = 0; g < H; ++g) {
    const int64_t m = s.KeptTokens(1, g);
    std::vector<float> k(m * D), v(m * D);
    s.DequantizeKept(1, g, k.data(), v.data());
    for (float x : v) max_v = std::max(max_v, std::fabs(x));
    for (int i = 0; i < n; ++i) {
      for (int hh = 0; hh < group; ++hh) {
        const float* qh = &c.q[(static_cast<size_t>(i) * c.n_q_heads + g * group + hh) * D];
        for (int64_t j = 0; j < m; ++j) {
          float d = 0.f;
          for (int e = 0; e < D; ++e) d += qh[e] * k[j * D + e];
          max_s = std::max(max_s, std::fabs(d) / std::sqrt(static_cast<float>(D)));
        }
      }
    }
  }
  return {max_v, max_s};
}

TEST(StorePrefillAttention, TiledMatchesPerQueryOverTiersGroupsAndHeadDims) {
  unsigned seed = 11;
  for (const Tiers& t : AllTiers()) {
    for (int group : {1, 4}) {
      for (int D : {64, 128}) {
        SCOPED_TRACE(::testing::Message() << t.name << " group " << group << " D " << D);
        const int H = 2, n = group == 1 ? 37 : 19;
        const Case c = Build(t, H, group, D, n, ++seed);
        ASSERT_EQ(StorePrefillQueries(*c.store, c.n_q_heads, n, nullptr, {}), n);
        const auto want = Attend(c, n, false);
        const auto got = Attend(c, n, true);
        const auto [max_v, max_s] = Scales(c, n);
        const float tol = 4e-6f * max_v * (1.0f + max_s) * 4.0f;
        float worst = 0.f;
        for (size_t e = 0; e < want.size(); ++e) {
          ASSERT_NEAR(got[e], want[e], tol) << "element " << e;
          worst = std::max(worst, std::fabs(got[e] - want[e]));
        }
        // The query before every token sees nothing: out = 0 on both paths.
        for (int e = 0; e < c.n_q_heads * D; ++e) ASSERT_EQ(got[e], 0.0f);
        EXPECT_GT(worst, 0.0f);  // a different kernel really ran
      }
    }
  }
}

TEST(StorePrefillAttention, SmallBatchesAndTheSwitchStayPerQuery) {
  const Case c = Build(AllTiers()[0], 2, 4, 64, 19, 3);
  StoreAttentionOptions off;
  off.tiled_prefill = false;
  EXPECT_EQ(StorePrefillQueries(*c.store, c.n_q_heads, 3, nullptr, {}), 0);  // 12 rows
  EXPECT_EQ(StorePrefillQueries(*c.store, c.n_q_heads, 4, nullptr, {}), 4);  // 16 rows
  EXPECT_EQ(StorePrefillQueries(*c.store, c.n_q_heads, 19, nullptr, off), 0);
  EXPECT_EQ(StorePrefillQueries(*c.store, c.n_q_heads, 1, nullptr, {}), 0);  // decode
}

TEST(StorePrefillAttention, RecordedQueriesAreBitIdenticalToPerQuery) {
  for (int first : {0, 12, 16, 19}) {
    SCOPED_TRACE(::testing::Message() << "first_sink_query " << first);
    const Case c = Build(AllTiers()[4], 2, 4, 64, 19, 5);
    const int n = 19, D = 64, HQ = c.n_q_heads;
    std::map<std::pair<int, int>, std::vector<float>> rows[2];
    std::mutex mu;
    std::vector<float> want;
    for (int tiled = 0; tiled < 2; ++tiled) {
      const AttentionSink sink = [&](const AttentionRow& r) {
        std::lock_guard<std::mutex> lock(mu);
        rows[tiled][{r.query, r.q_head}].assign(r.weights, r.weights + r.n_kept);
      };
      const auto out = Attend(c, n, tiled == 1, &sink, first);
      if (tiled == 0) {
        want = out;
        continue;
      }
      const int t = StorePrefillQueries(*c.store, HQ, n, &sink, [&] {
        StoreAttentionOptions o;
        o.first_sink_query = first;
        return o;
      }());
      EXPECT_EQ(t, first >= 4 ? first : 0);
      for (size_t e = static_cast<size_t>(first) * HQ * D; e < out.size(); ++e) {
        ASSERT_EQ(out[e], want[e]) << "element " << e;
      }
      for (size_t e = 0; e < static_cast<size_t>(first) * HQ * D; ++e) {
        ASSERT_NEAR(out[e], want[e], 1e-3f) << "element " << e;
      }
    }
    ASSERT_EQ(rows[0].size(), static_cast<size_t>(n - first) * HQ);
    EXPECT_EQ(rows[0], rows[1]);  // same queries, same q heads, same weights
  }
}

// StorePrefillAttention with column sums against AttentionSum over the
// per-query path's rows (the policies' OnRow sums): every tier mix, groups
// 1 / 4, all queries or the last ones recorded; outputs as without sums; the
// sums per head add up to the number of recorded rows that see a token; 1
// and 2 threads bit-identical.
TEST(StorePrefillAttention, ColumnSumsMatchSummedPerQueryRows) {
  unsigned seed = 40;
  for (const Tiers& t : AllTiers()) {
    for (int group : {1, 4}) {
      for (int first : {0, 11}) {
        SCOPED_TRACE(::testing::Message() << t.name << " group " << group << " first " << first);
        const int H = 2, D = 64, n = 23;
        const Case c = Build(t, H, group, D, n, ++seed);
        const int HQ = c.n_q_heads;
        AttentionSum rows(H);
        const auto want_out = Attend(c, n, false, &rows.sink(), first);
        std::map<int, std::vector<float>> got;
        std::map<int, std::vector<int32_t>> got_pos;
        const AttentionColumnSink sink = [&](const AttentionColumns& col) {
          EXPECT_EQ(col.queries, n - first);
          got[col.kv_head].assign(col.sums, col.sums + col.n_kept);
          got_pos[col.kv_head].assign(col.positions, col.positions + col.n_kept);
        };
        std::vector<float> out(want_out.size(), -7.0f), plain(out.size(), -7.0f);
        std::vector<float> sums_one;
        for (int threads : {1, 2}) {
          const int before = NumThreads();
          SetNumThreads(threads);
          StorePrefillAttention(*c.store, 1, HQ, c.q.data(), c.q_pos.data(), n, out.data(), &sink,
                                first);
          SetNumThreads(before);
          std::vector<float> all;
          for (int g = 0; g < H; ++g) all.insert(all.end(), got[g].begin(), got[g].end());
          if (threads == 1) {
            sums_one = all;
          } else {
            EXPECT_EQ(all, sums_one);
          }
        }
        StorePrefillAttention(*c.store, 1, HQ, c.q.data(), c.q_pos.data(), n, plain.data());
        EXPECT_EQ(out, plain);  // the sums do not change the outputs
        const auto [max_v, max_s] = Scales(c, n);
        for (int g = 0; g < H; ++g) {
          ASSERT_EQ(got_pos[g], rows.positions(g));
          ASSERT_EQ(got[g].size(), rows.sums(g).size());
          double total = 0.0;
          for (size_t j = 0; j < got[g].size(); ++j) {
            const float w = rows.sums(g)[j];
            ASSERT_NEAR(got[g][j], w, 1e-5 * (1.0 + max_s) * (w + 1e-3))
                << "head " << g << " j " << j;
            total += got[g][j];
          }
          // Every recorded (query, query head) row that sees a kept token adds 1.
          std::vector<int32_t> kept;
          c.store->KeptPositions(1, g, &kept);
          int seeing = 0;
          for (int i = first; i < n; ++i)
            seeing += (!kept.empty() && kept[0] <= c.q_pos[i]) ? group : 0;
          EXPECT_NEAR(total, seeing, 1e-4 * seeing);
        }
      }
    }
  }
}

TEST(StorePrefillAttention, IndependentOfThreadCount) {
  const Case c = Build(AllTiers()[4], 4, 4, 128, 40, 9);
  const int before = NumThreads();
  SetNumThreads(1);
  const auto one = Attend(c, 40, true);
  SetNumThreads(2);
  const auto two = Attend(c, 40, true);
  SetNumThreads(before);
  EXPECT_EQ(one, two);
}

}  // namespace
}  // namespace hqekv::cache
