// SaveState / LoadState of the policies on a head size the bundled model
// does not have (D = 64: llama.cpp block types, HqeKV's lean layout with the
// Hadamard rotation and u3): random K/V/Q, prefill, save, load into a fresh
// cache, decode: attention outputs bit-identical at every step, the same
// bytes held, and a state refused by a cache of another spec.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/xoshiro.h"
#include "policy/factory.h"

namespace hqekv {
namespace {

const KvGeometry kGeom{2, 4, 2, 64, 512};

std::vector<float> Random(Xoshiro256& rng, size_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(static_cast<double>(rng.Next() >> 11) * 0x1p-53 - 0.5);
  return v;
}

// One batch of n tokens at pos0..: appends and attends every layer, then
// EndBatch; returns every layer's attention output.
std::vector<float> Batch(KvCache& c, uint64_t seed, int pos0, int n, bool prefill) {
  const KvGeometry& g = c.geometry();
  Xoshiro256 rng(seed);
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = pos0 + i;
  std::vector<float> all;
  for (int l = 0; l < g.n_layers; ++l) {
    const auto k = Random(rng, static_cast<size_t>(n) * g.n_kv_heads * g.head_dim);
    const auto v = Random(rng, k.size());
    const auto q = Random(rng, static_cast<size_t>(n) * g.n_q_heads * g.head_dim);
    std::vector<float> out(q.size());
    EXPECT_TRUE(c.Append(l, k.data(), v.data(), pos.data(), n).ok());
    EXPECT_TRUE(c.Attend(l, q.data(), pos.data(), n, out.data()).ok());
    all.insert(all.end(), out.begin(), out.end());
  }
  EXPECT_TRUE(c.EndBatch(n, prefill).ok());
  return all;
}

TEST(StateRoundTrip, EveryPolicyContinuesBitIdenticallyAtHeadSize64) {
  for (const char* spec :
       {"llama:ctk=q8_0,ctv=q4_0", "llama:ctk=q5_1,ctv=q5_0", "llama:bits=6", "hqekv:bits=3",
        "hqekv:bits=2.5,per_head=1", "kivi:nominal_bits=2,residual=32", "fp8", "int8", "h2o:bits=4",
        "snapkv:bits=4", "pyramid:keep=0.4", "streaming:bits=3"}) {
    SCOPED_TRACE(spec);
    auto a = MakeKvCache(spec, kGeom);
    ASSERT_TRUE(a.ok()) << a.message();
    Batch(**a, 1, 0, 150, true);
    std::string state;
    ASSERT_TRUE((*a)->SaveState(&state).ok());
    auto b = MakeKvCache(spec, kGeom);
    ASSERT_TRUE(b.ok());
    const Status st = (*b)->LoadState(state);
    ASSERT_TRUE(st.ok()) << st.message();
    const int64_t held = (*a)->Stats().bytes.total();
    EXPECT_EQ((*b)->Stats().bytes.total(), held);
    std::printf("%-28s held %7lld B, state %7zu B (%.3f)\n", spec, static_cast<long long>(held),
                state.size(), static_cast<double>(state.size()) / static_cast<double>(held));
    for (int i = 0; i < 70; ++i) {
      ASSERT_EQ(Batch(**a, 100 + i, 150 + i, 1, false), Batch(**b, 100 + i, 150 + i, 1, false))
          << "step " << i;
      ASSERT_EQ((*a)->Stats().bytes.total(), (*b)->Stats().bytes.total()) << "step " << i;
      for (int l = 0; l < kGeom.n_layers; ++l)
        ASSERT_EQ((*a)->LayerAllocatedBytes(l), (*b)->LayerAllocatedBytes(l));
    }
    // Another spec's cache refuses the state and stays empty.
    auto c = MakeKvCache(
        std::string(spec).rfind("llama", 0) == 0 ? "fp8" : "llama:ctk=q8_0,ctv=q8_0", kGeom);
    ASSERT_TRUE(c.ok());
    EXPECT_FALSE((*c)->LoadState(state).ok());
    EXPECT_EQ((*c)->Stats().kept_elements, 0);
  }
}

// bits=B solves each event's counts from measured bytes, the pool's table
// included (HqekvCache::table_bytes_): a restored cache must solve the next
// events as the uninterrupted one. 700-token prefill: the budget binds (at
// 150 tokens every budget below 8 sits at the floor).
TEST(StateRoundTrip, HqekvBudgetSolverContinuesBitIdentically) {
  for (const char* spec : {"hqekv:bits=3.4", "hqekv:bits=4.2", "hqekv:bits=5.4", "hqekv:bits=8"}) {
    SCOPED_TRACE(spec);
    const KvGeometry g{2, 4, 2, 64, 1024};
    auto a = MakeKvCache(spec, g);
    ASSERT_TRUE(a.ok()) << a.message();
    Batch(**a, 1, 0, 700, true);
    std::string state;
    ASSERT_TRUE((*a)->SaveState(&state).ok());
    auto b = MakeKvCache(spec, g);
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE((*b)->LoadState(state).ok());
    for (int i = 0; i < 100; ++i) {
      ASSERT_EQ(Batch(**a, 100 + i, 700 + i, 1, false), Batch(**b, 100 + i, 700 + i, 1, false))
          << "step " << i;
      ASSERT_EQ((*a)->Stats().bytes.total(), (*b)->Stats().bytes.total()) << "step " << i;
    }
    std::printf("%-16s %.3f bits/original after 800 tokens\n", spec,
                (*a)->Stats().bits_per_original());
  }
}

}  // namespace
}  // namespace hqekv
