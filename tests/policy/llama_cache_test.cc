// The llama.cpp cache types as a policy (policy/llama_cache.h): exact bytes
// (codes + fp16 scales [+ minima] = 8.5 / 4.5 / 5 / 5.5 / 6 bits per element,
// held bytes = counted bytes), attention over the new layouts against an fp64
// reference, bits=B picking the widest pair that fits, and clear errors.
#include "policy/llama_cache.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "policy/store_cache.h"
#include "policy_harness.h"

namespace hqekv::policy {
namespace {

using testing::Driver;
using testing::MustMake;

KvGeometry Geometry(int d = 64, int max_ctx = 2048) {
  KvGeometry g = testing::SmallGeometry(2, 4, 2, d);
  g.max_ctx = max_ctx;
  return g;
}

TEST(LlamaCache, PayloadAndScalesAreLlamaCppsBitsAndEveryByteIsCounted) {
  struct Case {
    const char* type;
    double bits;  // codes + fp16 scale (and minimum) per element
    double over;  // at most this much more per original element at 528 tokens
  } cases[] = {{"q8_0", 8.5, 1.1},
               {"q4_0", 4.5, 1.1},
               {"q4_1", 5.0, 1.1},
               // q5_0's metadata block (6 units of 64 bytes at D = 64) is aligned to 4
               // units by the page pool: 2 units of gap per block, 0.5 bit (true_bits model).
               {"q5_0", 5.5, 1.6},
               {"q5_1", 6.0, 1.1}};
  for (const Case& k : cases) {
    const std::string spec = std::string("llama:ctk=") + k.type + ",ctv=" + k.type;
    SCOPED_TRACE(spec);
    auto c = MustMake(spec, Geometry());
    ASSERT_NE(c, nullptr);
    Driver drv(c.get(), 5);
    drv.Step(488, true, false);
    for (int i = 0; i < 40; ++i) drv.Step(1, false, false);
    const KvStats st = c->Stats();
    const auto& store = dynamic_cast<StoreBackedCache&>(*c).store();
    for (int l = 0; l < 2; ++l) {
      const KvLayerStats& L = st.layers[l];
      // 528 tokens: 16 chunks sealed, 16 waiting in the fp16 residual.
      EXPECT_EQ(L.k_tiers.at(k.type), 2 * 512);
      EXPECT_EQ(L.v_tiers.at(k.type), 2 * 512);
      EXPECT_EQ(L.k_tiers.at("residual"), 2 * 16);
      const double sealed_elems = 2.0 /*K,V*/ * 2 /*heads*/ * 512 * 64;
      EXPECT_DOUBLE_EQ(8.0 * (L.bytes.payload + L.bytes.metadata) / sealed_elems, k.bits);
      EXPECT_EQ(L.bytes.total(), store.LayerHeldBytes(l)) << "layer " << l;
    }
    // Bookkeeping (chunk records, page table, slack) and the residual on top.
    EXPECT_GT(st.bits_per_original(), k.bits);
    EXPECT_LT(st.bits_per_original(), k.bits + k.over);
  }
}

// Decode steps over q8_0 chunks round the query / the weights to int16
// (attn/multi_query_rows_q16.h, as for int8): 2e-4, the bound of the int8 and
// KIVI caches in policy_cache_test (measured up to 8.2e-5 here); the other
// block types are read exactly.
TEST(LlamaCache, AttentionReadsTheBlockLayoutsExactly) {
  for (const char* spec : {"llama:ctk=q8_0,ctv=q4_0", "llama:ctk=q4_1,ctv=q5_0",
                           "llama:ctk=q5_1,ctv=q8_0", "llama:ctk=f16,ctv=q4_0"}) {
    SCOPED_TRACE(spec);
    const double bound = std::string(spec).find("q8_0") != std::string::npos ? 2e-4 : 2e-5;
    for (int d : {32, 64, 128}) {
      auto c = MustMake(spec, Geometry(d));
      ASSERT_NE(c, nullptr);
      Driver drv(c.get(), 9);
      drv.Step(100, true, false);  // 96 tokens sealed, 4 waiting
      double worst = 0;
      for (int i = 0; i < 40; ++i) worst = std::max(worst, drv.Step(1, false, true));
      worst = std::max(worst, drv.Step(20, false, true));
      EXPECT_LT(worst, bound) << "D=" << d;
    }
  }
}

TEST(LlamaCache, TheTypesReachTheStoreAndAreReported) {
  auto c = MustMake("llama:ctk=q5_1,ctv=q4_0", Geometry());
  ASSERT_NE(c, nullptr);
  Driver drv(c.get(), 3);
  drv.Step(64, true, false);
  const KvStats st = c->Stats();
  EXPECT_EQ(st.layers[0].k_tiers.count("q5_1"), 1u);
  EXPECT_EQ(st.layers[0].v_tiers.count("q4_0"), 1u);
  EXPECT_EQ(c->Describe(), "llama:ctk=q5_1,ctv=q4_0");
  // Default: llama.cpp's f16 cache.
  auto f = MustMake("llama", Geometry());
  ASSERT_NE(f, nullptr);
  Driver d2(f.get(), 3);
  d2.Step(64, true, false);
  EXPECT_EQ(f->Stats().layers[0].k_tiers.count("fp16"), 1u);
}

TEST(LlamaCache, BitsPicksTheWidestPairThatFits) {
  const KvGeometry g = Geometry(64, 2048);
  // Held <= B at the cache's full context (1024 tokens: short enough for the
  // sanitizer build), more budget never buys less.
  const KvGeometry small = Geometry(64, 1024);
  double last = 0;
  for (double b : {5.8, 7.4, 12.0}) {
    char spec[64];
    std::snprintf(spec, sizeof spec, "llama:bits=%g", b);
    SCOPED_TRACE(spec);
    auto pick = LlamaTypesForBudget(*ParseSpec(spec), small);
    ASSERT_TRUE(pick.ok()) << pick.message();
    auto c = MustMake(spec, small);
    ASSERT_NE(c, nullptr);
    EXPECT_NE(c->Describe().find("(ctk=" + quant::FormatName(pick->first)), std::string::npos)
        << c->Describe();
    Driver drv(c.get(), 7);
    drv.Step(992, true, false);
    for (int i = 0; i < 31; ++i) drv.Step(1, false, false);  // the worst point of the cycle
    const double held = c->Stats().bits_per_original();
    EXPECT_LE(held, b + 0.01);
    EXPECT_GE(held, last);  // more budget never buys less
    last = held;
  }
  // 15.9 bits buys everything but f16/f16 (~17 true bits): f16 K, q8_0 V.
  auto pick = LlamaTypesForBudget(*ParseSpec("llama:bits=15.9"), g);
  ASSERT_TRUE(pick.ok());
  EXPECT_EQ(quant::FormatName(pick->first), "f16");
  EXPECT_EQ(quant::FormatName(pick->second), "q8_0");
  // Just above q4_0/q4_0 (~4.9 with the residual): exactly that pair.
  auto low = LlamaTypesForBudget(*ParseSpec("llama:bits=5.0"), g);
  ASSERT_TRUE(low.ok()) << low.message();
  EXPECT_EQ(quant::FormatName(low->first), "q4_0");
  EXPECT_EQ(quant::FormatName(low->second), "q4_0");
}

TEST(LlamaCache, BadInputGivesClearErrors) {
  struct Case {
    const char* spec;
    int d;
    const char* says;
  } cases[] = {
      {"llama:ctk=q3_0", 64, "must be one of f16|q8_0|q5_1|q5_0|q4_1|q4_0"},
      {"llama:ctv=q8", 64, "must be one of"},
      {"llama:bits=3", 64, "below the cheapest llama.cpp cache types"},
      {"llama:bits=3", 64, "true bits per element at 2048 tokens"},
      {"llama:bits=6,ctk=q8_0", 64, "at most one of"},
      {"llama:ctk=q4_0", 8, "head_dim % 32 == 0"},
      {"llama:ctv=q8_0", 48, "not a multiple of"},
  };
  for (const Case& k : cases) {
    auto c = MakeKvCache(k.spec, Geometry(k.d));
    ASSERT_FALSE(c.ok()) << k.spec;
    EXPECT_NE(c.message().find(k.says), std::string::npos) << k.spec << ": " << c.message();
  }
  // f16 works at any head size (the bundled model has D = 8).
  EXPECT_NE(MustMake("llama:ctk=f16,ctv=f16", Geometry(8)), nullptr);
}

}  // namespace
}  // namespace hqekv::policy
