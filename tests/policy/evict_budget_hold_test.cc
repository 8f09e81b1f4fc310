// bits=B of the eviction policies (streaming, H2O, SnapKV, PyramidKV) is a
// true-bits budget at every point (issue 12 item 1): over a long decode the
// cache holds <= B + 0.01 true bits per original element after every step,
// and the end of the run lands within 3% under B (what fits is kept), at the
// bundled model's head_dim 8 and at head_dim 64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "policy/evict_cache.h"
#include "policy/snapkv_cache.h"
#include "policy_harness.h"
#include "../sanitized.h"

namespace hqekv::policy {
namespace {

using testing::Driver;
using testing::MustMake;
using testing::SmallGeometry;

constexpr double kOver = 0.01;   // bits above B tolerated at any step
constexpr double kUnder = 0.03;  // relative shortfall tolerated at the end

struct Run {
  double after_prefill = 0, worst = 0, end = 0;
  std::string note;
};

// Prefill `prefill` tokens in one batch, then `decode` single-token steps;
// bits per original element after the prefill, the most at any step, and at
// the end.
Run Trace(const std::string& spec, const KvGeometry& g, int prefill, int decode) {
  Run r;
  auto c = MustMake(spec, g);
  EXPECT_NE(c, nullptr) << spec;
  if (!c) return r;
  Driver d(c.get(), 41);
  d.Step(prefill, true, false);
  r.after_prefill = r.worst = c->Stats().bits_per_original();
  for (int i = 0; i < decode; ++i) {
    d.Step(1, false, false);
    r.worst = std::max(r.worst, c->Stats().bits_per_original());
  }
  r.end = c->Stats().bits_per_original();
  r.note = c->BudgetNote();
  return r;
}

void ExpectHolds(const KvGeometry& g, const std::vector<double>& budgets, int prefill, int decode) {
  for (const char* fam : {"streaming:", "h2o:", "snapkv:", "pyramid:"}) {
    for (double b : budgets) {
      char spec[64];
      std::snprintf(spec, sizeof spec, "%sbits=%g", fam, b);
      SCOPED_TRACE(std::string(spec) + " D=" + std::to_string(g.head_dim));
      const Run r = Trace(spec, g, prefill, decode);
      EXPECT_LE(r.worst, b + kOver);
      EXPECT_GE(r.after_prefill, b * (1 - kUnder));
      EXPECT_GE(r.end, b * (1 - kUnder));
      EXPECT_LE(r.end, b + kOver);
      EXPECT_EQ(r.note, "");
    }
  }
}

// stories260K's heads: 4 KV heads of D = 8 (3 of its 5 layers), a prompt of
// 512 and as many decoded tokens. Before the fix H2O ended ~8% under B
// (its scores grew by doubling and FitBytes evicted tokens to pay for the
// spare capacity), streaming ~3.5% under (a first cut below what fits), and
// SnapKV/PyramidKV ended far above B (decode tokens were never evicted).
TEST(EvictBudgetHold, HeadDim8HoldsAtEveryStepAndEndsWithin3Percent) {
  // The sanitized tree walks the lowest and highest budget only (minutes otherwise).
  ExpectHolds(SmallGeometry(3, 8, 4, 8),
              test::kSanitized ? std::vector<double>{2, 8} : std::vector<double>{2, 3.4, 5.4, 8},
              512, 512);
}

TEST(EvictBudgetHold, HeadDim64HoldsAtEveryStepAndEndsWithin3Percent) {
  ExpectHolds(SmallGeometry(2, 4, 2, 64), {2, 3.4, 8}, 512, 400);
}

// SnapKV under bits=B during decode: the prompt selection stays, the newest
// `window` tokens stay, and the decoded tokens older than the window leave
// first, oldest first (then the oldest prompt tokens).
TEST(EvictBudgetHold, SnapKvDecodeEvictsOldDecodedTokensFirst) {
  const KvGeometry g = SmallGeometry(1, 2, 1, 8);
  auto c = MustMake("snapkv:bits=4,window=8", g);
  ASSERT_NE(c, nullptr);
  Driver d(c.get(), 43);
  d.Step(256, true, false);
  const auto& store = dynamic_cast<const StoreBackedCache&>(*c).store();
  std::vector<int32_t> prompt;
  store.KeptPositions(0, 0, &prompt);
  for (int i = 0; i < 200; ++i) d.Step(1, false, false);
  std::vector<int32_t> pos;
  store.KeptPositions(0, 0, &pos);
  // The kept prompt tokens are the selection's newest ones: while fewer
  // than `window` tokens are decoded, only the prompt has tokens outside
  // the window, and its oldest leave first.
  std::vector<int32_t> kept_prompt, decoded;
  for (int32_t p : pos) (p < 256 ? kept_prompt : decoded).push_back(p);
  ASSERT_LE(kept_prompt.size(), prompt.size());
  EXPECT_GT(kept_prompt.size(), prompt.size() / 2);
  EXPECT_TRUE(std::equal(kept_prompt.begin(), kept_prompt.end(),
                         prompt.end() - static_cast<std::ptrdiff_t>(kept_prompt.size())));
  // The decoded tokens kept are the newest ones, contiguous up to 455.
  ASSERT_GE(decoded.size(), 8u);
  EXPECT_LT(decoded.size(), 200u);
  for (size_t i = 0; i < decoded.size(); ++i)
    EXPECT_EQ(decoded[i], 456 - static_cast<int32_t>(decoded.size()) + static_cast<int32_t>(i));
}

// keep=f stays a fraction of the prompt: decoded tokens are not evicted.
TEST(EvictBudgetHold, SnapKvKeepFractionAppendsDecodeTokens) {
  auto c = MustMake("snapkv:keep=0.25,window=8", SmallGeometry(1, 2, 1, 8));
  ASSERT_NE(c, nullptr);
  Driver d(c.get(), 44);
  d.Step(256, true, false);
  const auto& store = dynamic_cast<const StoreBackedCache&>(*c).store();
  EXPECT_EQ(store.KeptTokens(0, 0), 64);
  for (int i = 0; i < 50; ++i) d.Step(1, false, false);
  EXPECT_EQ(store.KeptTokens(0, 0), 64 + 50);
}

}  // namespace
}  // namespace hqekv::policy
