// The int16 run entries (quant/multi_query.h, DotChunksInt16Query /
// AxpyChunksInt16Weights) against one per-chunk call per chunk
// (DotChunkMultiInt16Query / AxpyChunkMultiInt16Weights): the same bits, the
// hook before every chunk tried, and a declined chunk (a non-finite
// multiplier) ending the run with nothing written for it or after it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "quant/internal.h"
#include "quant/multi_query.h"
#include "quant_test_util.h"

namespace hqekv::quant {
namespace {

constexpr int kT = 32;
constexpr size_t kChunks = 5;
constexpr uint16_t kF16Inf = 0x7C00;

// kChunks encoded chunks of f (T x D), distinct data each.
std::vector<testing::Encoded> Chunks(const Format& f, int T, int D, uint32_t seed) {
  std::vector<testing::Encoded> es;
  for (size_t c = 0; c < kChunks; ++c) {
    es.push_back(
        testing::Encode(f, testing::Gaussian(T, D, seed + static_cast<uint32_t>(c)), T, D, false));
  }
  return es;
}
std::vector<ChunkBytes> Bytes(const std::vector<testing::Encoded>& es) {
  std::vector<ChunkBytes> b;
  for (const testing::Encoded& e : es) b.push_back({e.codes.data(), e.meta.data()});
  return b;
}
// The hook's calls, in order.
struct Calls {
  std::vector<size_t> i;
  static void Hook(void* self, size_t i) { static_cast<Calls*>(self)->i.push_back(i); }
  ChunkHook hook() { return {&Calls::Hook, this}; }
};
std::vector<size_t> Iota(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}
// Whether this CPU must run the int16 kernels (AVX3_DL, release build).
bool MustRun() { return testing::kKernelMustRun && (hwy::SupportedTargets() & HWY_AVX3_DL); }

// A run of kChunks that returned `done` against one call per chunk (each:
// all of them worked; want: their output). False when there is no kernel
// on this CPU (the run declined too).
bool RanAsEachCall(bool each, size_t done, const Calls& calls, const std::vector<float>& got,
                   const std::vector<float>& want) {
  if (!each) {
    EXPECT_FALSE(MustRun());
    EXPECT_EQ(done, 0u);
    return false;
  }
  EXPECT_EQ(done, kChunks);
  EXPECT_EQ(calls.i, Iota(kChunks));
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
  return true;
}

TEST(MultiQueryRuns, DotRunIsThePerChunkCallsBitForBit) {
  int ran = 0;
  for (const Format& f : {Uniform(2, Grouping::kPerChannel), Uniform(4, Grouping::kPerChannel),
                          Uniform3(Grouping::kPerChannel), Normal(1, Grouping::kPerChannel)}) {
    for (int D : {64, 96, 128}) {
      for (int m : {1, 4, 5}) {
        SCOPED_TRACE(FormatName(f) + " D=" + std::to_string(D) + " m=" + std::to_string(m));
        std::vector<testing::Encoded> es = Chunks(f, kT, D, static_cast<uint32_t>(D + m));
        const size_t qs = D + 3, ss = kChunks * kT + 7;
        const std::vector<float> q = testing::Gaussian(m, static_cast<int>(qs), 5 + m, 0.3f);
        std::vector<float> want(m * ss, -7.0f), got(m * ss, -7.0f);
        bool each = true;
        for (size_t c = 0; c < kChunks; ++c) {
          each = DotChunkMultiInt16Query(f, es[c].codes.data(), es[c].meta.data(), kT, D, q.data(),
                                         qs, m, want.data() + c * kT, ss) &&
                 each;
        }
        Calls calls;
        const std::vector<ChunkBytes> b = Bytes(es);
        std::vector<float> row_max(m, -1e30f);
        const size_t done = DotChunksInt16Query(f, b.data(), kChunks, kT, D, q.data(), qs, m,
                                                got.data(), ss, calls.hook(), row_max.data());
        if (!RanAsEachCall(each, done, calls, got, want)) continue;
        ++ran;
        if (HasFailure()) return;
        for (int h = 0; h < m; ++h) {  // the rows' maxima folded in: exact
          float mx = -1e30f;
          for (size_t t = 0; t < kChunks * kT; ++t) mx = std::max(mx, want[h * ss + t]);
          EXPECT_EQ(row_max[h], mx) << h;
        }

        // Chunk 2's first multiplier infinite: chunks 0, 1 as before, then
        // stop; nothing written for chunks 2.. (the per-chunk call declines
        // chunk 2 as well).
        StoreF16(kF16Inf, es[2].meta.data());
        EXPECT_FALSE(DotChunkMultiInt16Query(f, es[2].codes.data(), es[2].meta.data(), kT, D,
                                             q.data(), qs, m, want.data(), ss));
        std::vector<float> part(m * ss, -7.0f);
        Calls c2;
        ASSERT_EQ(DotChunksInt16Query(f, b.data(), kChunks, kT, D, q.data(), qs, m, part.data(), ss,
                                      c2.hook()),
                  2u);
        EXPECT_EQ(c2.i, Iota(3));
        for (int h = 0; h < m; ++h) {
          for (size_t t = 0; t < ss; ++t) {
            const float w = t < 2 * kT ? want[h * ss + t] : -7.0f;
            ASSERT_EQ(std::memcmp(&part[h * ss + t], &w, sizeof(float)), 0) << h << " " << t;
          }
        }
      }
    }
  }
  if (MustRun()) EXPECT_GT(ran, 0);
}

TEST(MultiQueryRuns, AxpyRunIsThePerChunkCallsBitForBit) {
  int ran = 0;
  for (const Format& f :
       {Uniform(2, Grouping::kPerToken, 32), Uniform(4, Grouping::kPerToken, 32),
        Normal(1, Grouping::kPerToken, 64), Uniform(8, Grouping::kPerToken, 128)}) {
    for (int D : {64, 128}) {
      if (D % f.group != 0) continue;
      for (int m : {1, 4, 5}) {
        SCOPED_TRACE(FormatName(f) + " D=" + std::to_string(D) + " m=" + std::to_string(m));
        std::vector<testing::Encoded> es = Chunks(f, kT, D, static_cast<uint32_t>(3 * D + m));
        const size_t ws = kChunks * kT + 5, as = D + 3;
        std::vector<float> w = testing::Gaussian(m, static_cast<int>(ws), 9 + m);
        for (float& x : w) x = std::abs(x) * 0.1f;
        const std::vector<float> acc0 = testing::Gaussian(m, static_cast<int>(as), 11 + m);
        std::vector<float> want = acc0, got = acc0;
        bool each = true;
        for (size_t c = 0; c < kChunks; ++c) {
          each = AxpyChunkMultiInt16Weights(f, es[c].codes.data(), es[c].meta.data(), kT, D,
                                            w.data() + c * kT, ws, m, want.data(), as) &&
                 each;
        }
        Calls calls;
        const std::vector<ChunkBytes> b = Bytes(es);
        const size_t done = AxpyChunksInt16Weights(f, b.data(), kChunks, kT, D, w.data(), ws, m,
                                                   got.data(), as, calls.hook());
        if (!RanAsEachCall(each, done, calls, got, want)) continue;
        ++ran;
        if (HasFailure()) return;

        // Chunk 3's first multiplier infinite: chunks 0..2 added, then stop.
        std::vector<float> want3 = acc0;
        for (size_t c = 0; c < 3; ++c) {
          ASSERT_TRUE(AxpyChunkMultiInt16Weights(f, es[c].codes.data(), es[c].meta.data(), kT, D,
                                                 w.data() + c * kT, ws, m, want3.data(), as));
        }
        StoreF16(kF16Inf, es[3].meta.data());
        std::vector<float> part = acc0;
        Calls c3;
        ASSERT_EQ(AxpyChunksInt16Weights(f, b.data(), kChunks, kT, D, w.data(), ws, m, part.data(),
                                         as, c3.hook()),
                  3u);
        EXPECT_EQ(c3.i, Iota(4));
        ASSERT_EQ(0, std::memcmp(part.data(), want3.data(), part.size() * sizeof(float)));
      }
    }
  }
  if (MustRun()) EXPECT_GT(ran, 0);
}

TEST(MultiQueryRuns, EmptyRunsAndOtherFormatsDecline) {
  const int D = 64;
  const Format chan = Uniform(2, Grouping::kPerChannel), tok = Uniform(2, Grouping::kPerToken, 32);
  const testing::Encoded e = testing::Encode(chan, testing::Gaussian(kT, D, 1), kT, D, false);
  const ChunkBytes b{e.codes.data(), e.meta.data()};
  const std::vector<float> q(D, 0.5f);
  std::vector<float> out(4 * D, -7.0f);
  Calls calls;
  EXPECT_EQ(DotChunksInt16Query(chan, &b, 0, kT, D, q.data(), D, 1, out.data(), kT, calls.hook()),
            0u);
  EXPECT_EQ(DotChunksInt16Query(tok, &b, 1, kT, D, q.data(), D, 1, out.data(), kT, calls.hook()),
            0u);
  EXPECT_EQ(
      AxpyChunksInt16Weights(chan, &b, 1, kT, D, q.data(), kT, 1, out.data(), D, calls.hook()), 0u);
  EXPECT_TRUE(calls.i.empty());
  for (float x : out) EXPECT_EQ(x, -7.0f);
}

}  // namespace
}  // namespace hqekv::quant
