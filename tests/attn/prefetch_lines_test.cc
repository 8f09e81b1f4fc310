// Line prefetches handed to the int8 / q8_0 decode-attention row kernels
// (attn/prefetch.h, the `ahead` argument of attn/multi_query_rows_q16.h):
// the outputs are the same bits with and without a range, and a kernel that
// ran requested the whole 4 KiB block of a 32 x 128 chunk (what
// cache/store_attention.cc relies on to drop its burst of line prefetches).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "attn/multi_query_rows_q16.h"
#include "attn/prefetch.h"
#include "../quant/quant_test_util.h"

namespace hqekv::attn {
using namespace ::hqekv::quant;
namespace {

constexpr int kT = 32, kD = 128, kRows = 4;

std::vector<float> Rows(int n, uint32_t seed, bool positive) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = positive ? std::abs(nd(rng)) / kT : nd(rng);
  return v;
}

TEST(PrefetchLines, SetReplacesAndFlushForgets) {
  std::vector<uint8_t> a(4096), b(640);
  attn::PrefetchLines p;
  p.Set(a.data(), a.size());
  EXPECT_EQ(p.next, a.data());
  EXPECT_EQ(p.end, a.data() + a.size());
  p.next = attn::RequestLines(p.next, p.end, 3);
  EXPECT_EQ(p.next, a.data() + 3 * 64);
  p.Set(b.data(), b.size());  // the rest of a is requested, b replaces it
  EXPECT_EQ(p.next, b.data());
  p.next = attn::RequestLines(p.next, p.end, 100);  // never past the end
  EXPECT_EQ(p.next, p.end);
  p.Flush();
  EXPECT_EQ(p.next, nullptr);
  EXPECT_EQ(p.end, nullptr);
}

// Runs `call(ahead)` with no range and with a 4 KiB range into `out`;
// expects the same output bytes and, when the kernel ran, the range taken
// whole.
template <class Call>
void ExpectSameAndConsumed(std::vector<float>& out, const Call& call) {
  std::vector<uint8_t> later(4096);
  const std::vector<float> start = out;
  const bool ran = call(nullptr);
  const std::vector<float> plain = out;
  out = start;
  attn::PrefetchLines ahead;
  ahead.Set(later.data(), later.size());
  ASSERT_EQ(call(&ahead), ran);
  EXPECT_EQ(std::memcmp(out.data(), plain.data(), out.size() * sizeof(float)), 0);
  if (testing::kKernelMustRun) {
    EXPECT_TRUE(ran) << "no AVX-512 VNNI kernel ran";
  }
  if (ran) {
    EXPECT_EQ(ahead.next, ahead.end);
  } else {
    EXPECT_EQ(ahead.next, later.data());  // a kernel that declined requested nothing
  }
}

// The K kernel (prepared query rows) and the V kernel of one format, each with
// and without a range.
template <class Query, class Prepare, class Dot, class Axpy>
void CheckKernels(const Format& f, uint32_t seed, const Prepare& prepare, const Dot& dot,
                  const Axpy& axpy) {
  const testing::Encoded e = testing::Encode(f, testing::Gaussian(kT, kD, seed), kT, kD, false);
  const std::vector<float> q = Rows(kRows * kD, seed + 1, false);
  const std::vector<float> w = Rows(kRows * kT, seed + 2, true);
  Query prepared;
  std::vector<float> scores(kRows * kT, 0.0f), acc(kRows * kD, 0.5f);
  if (prepare(q.data(), kD, kRows, kD, &prepared)) {
    ExpectSameAndConsumed(scores, [&](attn::PrefetchLines* ahead) {
      return dot(f, e.codes.data(), e.meta.data(), kT, prepared, scores.data(), kT, ahead);
    });
  }
  ExpectSameAndConsumed(acc, [&](attn::PrefetchLines* ahead) {
    return axpy(f, e.codes.data(), e.meta.data(), kT, kD, w.data(), kT, kRows, acc.data(), kD,
                ahead);
  });
}

TEST(PrefetchLines, Int8KernelsSameBitsAndTakeTheBlock) {
  CheckKernels<Int16Query>(Int8PerToken(), 7, PrepareInt16Query, DotRowsInt16Prepared,
                           AxpyRowsInt16Weights);
}

TEST(PrefetchLines, Q8_0KernelsSameBitsAndTakeTheBlock) {
  CheckKernels<Q8_0Query>(GgmlBlock(Kind::kQ8_0), 17, PrepareQ8_0Query, DotRowsQ8_0Prepared,
                          AxpyRowsQ8_0Int16Weights);
}

}  // namespace
}  // namespace hqekv::attn
