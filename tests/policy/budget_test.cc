// Byte budgets of the eviction policies (issue 4 follow-up): a budget too
// small for a policy's structural minimum keeps that minimum and says so
// (BudgetNote), and the bytes held never decrease when the budget grows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/evict_cache.h"
#include "policy_harness.h"

namespace hqekv::policy {
namespace {

using testing::Driver;
using testing::MustMake;
using testing::SmallGeometry;
using testing::StoriesGeometry;

// Every cache answers BudgetNote() (KvCache interface; empty by default).
std::string Note(const KvCache& c) { return c.BudgetNote(); }

int64_t MinKept(const KvCache& c) {
  const auto& s = dynamic_cast<const StoreBackedCache&>(c).store();
  int64_t m = INT64_MAX;
  for (int l = 0; l < s.n_layers(); ++l)
    for (int h = 0; h < s.n_kv_heads(); ++h) m = std::min(m, s.KeptTokens(l, h));
  return m;
}

// Tiny budgets on the small model: every layer keeps its minimum (never 0
// tokens, as before the fix), and the note says the budget was not met.
TEST(EvictionBudget, TinyBudgetsKeepTheStructuralMinimumAndSaySo) {
  const struct {
    const char* spec;
    int64_t minimum;
  } cases[] = {{"streaming:bits=0.1", 4 + 1},
               {"streaming:sink=2,keep=0.000001", 2 + 1},
               {"h2o:bits=0.1", 1},
               {"snapkv:bits=0.1,window=8", 8},
               {"pyramid:bits=0.1,window=8", 8}};
  for (const auto& tc : cases) {
    auto c = MustMake(tc.spec, StoriesGeometry());
    ASSERT_NE(c, nullptr);
    Driver d(c.get(), 21);
    d.Step(200, true, false);
    ASSERT_TRUE(d.last_status_.ok()) << tc.spec << ": " << d.last_status_.message();
    EXPECT_EQ(MinKept(*c), tc.minimum) << tc.spec;
    const std::string note = Note(*c);
    EXPECT_NE(note.find("budget not met"), std::string::npos) << tc.spec << ": " << note;
    EXPECT_NE(note.find("structural minimum"), std::string::npos) << note;
    for (int s = 0; s < 10; ++s) d.Step(1, false, false);
    EXPECT_GE(MinKept(*c), tc.minimum) << tc.spec;
  }
  // Streaming's minimum is the sink and the newest token.
  auto c = MustMake("streaming:bits=0.1", StoriesGeometry());
  Driver d(c.get(), 22);
  d.Step(100, true, false);
  std::vector<int32_t> pos;
  dynamic_cast<const StoreBackedCache&>(*c).store().KeptPositions(2, 1, &pos);
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 1, 2, 3, 99}));
}

// A budget that fits says nothing, and holds at most its bytes.
TEST(EvictionBudget, MetBudgetHasNoNoteAndFits) {
  for (const char* spec : {"streaming:bits=4", "h2o:bits=4", "snapkv:bits=4,window=8"}) {
    auto c = MustMake(spec, SmallGeometry(2, 4, 2, 64));
    Driver d(c.get(), 23);
    d.Step(512, true, false);
    EXPECT_EQ(Note(*c), "") << spec;
    const KvStats st = c->Stats();
    EXPECT_LE(st.bits_per_original(), 4.0 + 1e-9) << spec;
    EXPECT_GT(st.bits_per_original(), 3.0) << spec;  // what fits is used
  }
}

// The eviction-only store holds no spare fp16 residual: after the prefill of
// a streaming cache, the residual bytes are those of the unsealed tokens.
TEST(EvictionBudget, EvictionCachesKeepNoResidualReserve) {
  auto c = MustMake("streaming:sink=4,window=36", SmallGeometry(1, 2, 1, 8));
  Driver d(c.get(), 24);
  d.Step(100, true, false);
  // 40 kept = one sealed 32-token chunk + 8 residual tokens (K, V fp16 [8][8]).
  EXPECT_EQ(c->Stats().bytes.residual, 8 * 8 * 2 * 2);
}

// Memory is monotone in the budget: for every policy, context and head size,
// a larger bits= never holds fewer bytes after the prefill or after a short
// decode (same tokens in every run).
TEST(EvictionBudget, BytesAreMonotoneInBits) {
  const double budgets[] = {0.5, 1, 2, 3.2, 6};
  const char* families[] = {"streaming:", "h2o:", "snapkv:window=8,", "pyramid:window=8,"};
  struct Shape {
    KvGeometry g;
    std::vector<int> contexts;
  };
  // Heads of the bundled model (3 of its 5 layers, to stay fast under ASan)
  // and Llama-size heads.
  const Shape shapes[] = {{SmallGeometry(3, 8, 4, 8), {64, 512}},
                          {SmallGeometry(2, 1, 1, 128), {256}}};
  for (const Shape& sh : shapes) {
    for (int ctx : sh.contexts) {
      for (const char* fam : families) {
        int64_t prev_prefill = -1, prev_decode = -1;
        double prev_bits = 0;
        for (double b : budgets) {
          char spec[96];
          std::snprintf(spec, sizeof spec, "%sbits=%g", fam, b);
          auto c = MustMake(spec, sh.g);
          ASSERT_NE(c, nullptr);
          Driver d(c.get(), 25);
          d.Step(ctx, true, false);
          ASSERT_TRUE(d.last_status_.ok()) << spec << ": " << d.last_status_.message();
          const int64_t after_prefill = c->Stats().bytes.total();
          for (int s = 0; s < 8; ++s) d.Step(1, false, false);
          const int64_t after_decode = c->Stats().bytes.total();
          const std::string where = std::string(spec) + " D=" + std::to_string(sh.g.head_dim) +
                                    " ctx=" + std::to_string(ctx) +
                                    " vs bits=" + std::to_string(prev_bits);
          EXPECT_GE(after_prefill, prev_prefill) << where;
          EXPECT_GE(after_decode, prev_decode) << where;
          prev_prefill = after_prefill;
          prev_decode = after_decode;
          prev_bits = b;
        }
      }
    }
  }
}

}  // namespace
}  // namespace hqekv::policy
