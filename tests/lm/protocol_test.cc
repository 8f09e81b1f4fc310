#include "lm/protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cache/plain_cache.h"

namespace hqekv::lm {
namespace {

// Records every Forward call; its "logits" are [pos0 + n - 1, token] so the
// test can see which step they came from.
class RecordingModel final : public StepModel {
 public:
  struct Call {
    int n, pos0;
    bool is_prefill, wants_logits;
  };
  int vocab() const override { return 2; }
  Status Forward(KvCache& cache, const int32_t* tokens, int n, int pos0, bool is_prefill,
                 float* logits) override {
    calls.push_back({n, pos0, is_prefill, logits != nullptr});
    if (logits) {
      logits[0] = static_cast<float>(pos0 + n - 1);
      logits[1] = static_cast<float>(tokens[n - 1]);
    }
    if (fail_at_pos >= 0 && pos0 == fail_at_pos) return MakeError("step failed");
    return Status::Ok();
  }
  std::vector<Call> calls;
  int fail_at_pos = -1;
};

std::unique_ptr<KvCache> Cache() {
  return PlainKvCache::Create(KvGeometry{1, 1, 1, 8, 64}, PlainPrecision::kF32).value();
}

TEST(RunWindow, PrefillBatchThenOneTokenStepsScoringFromPrefillEnd) {
  RecordingModel m;
  auto cache = Cache();
  const std::vector<int32_t> t = {10, 11, 12, 13, 14, 15};
  std::vector<std::string> events;
  WindowHooks hooks;
  hooks.after_prefill = [&] { events.push_back("prefill"); };
  hooks.on_logits = [&](int pos, float* logits) {
    EXPECT_EQ(logits[0], pos);     // the logits after position pos
    EXPECT_EQ(logits[1], t[pos]);  // ... fed token t[pos]
    events.push_back(std::to_string(pos));
    return Status::Ok();
  };
  ASSERT_TRUE(RunWindow(m, *cache, Window{t.data(), 5, 3, 2}, hooks).ok());  // ppl/eval: P-1 .. n-1
  EXPECT_EQ(events, (std::vector<std::string>{"prefill", "2", "3", "4"}));
  ASSERT_EQ(m.calls.size(), 3u);
  EXPECT_EQ(m.calls[0].n, 3);
  EXPECT_TRUE(m.calls[0].is_prefill);
  EXPECT_TRUE(m.calls[0].wants_logits);
  for (int c = 1; c < 3; ++c) {
    EXPECT_EQ(m.calls[c].n, 1);
    EXPECT_EQ(m.calls[c].pos0, 2 + c);
    EXPECT_FALSE(m.calls[c].is_prefill);
  }
}

TEST(RunWindow, CalibrationVariantSkipsPrefillLogitsAndScoresLastToken) {
  RecordingModel m;
  auto cache = Cache();
  const std::vector<int32_t> t = {1, 2, 3, 4, 5, 6};
  std::vector<int> scored;
  WindowHooks hooks;
  hooks.on_logits = [&](int pos, float*) {
    scored.push_back(pos);
    return Status::Ok();
  };
  ASSERT_TRUE(RunWindow(m, *cache, Window{t.data(), 6, 3, 3}, hooks).ok());
  EXPECT_EQ(scored, (std::vector<int>{3, 4, 5}));
  ASSERT_EQ(m.calls.size(), 4u);
  EXPECT_FALSE(m.calls[0].wants_logits);  // no logits computed for the prefill
  // Later first_scored: steps still run, without logits.
  RecordingModel m2;
  scored.clear();
  ASSERT_TRUE(RunWindow(m2, *cache, Window{t.data(), 6, 2, 4}, hooks).ok());
  EXPECT_EQ(scored, (std::vector<int>{4, 5}));
  ASSERT_EQ(m2.calls.size(), 5u);
  EXPECT_FALSE(m2.calls[2].wants_logits);  // position 3
  EXPECT_TRUE(m2.calls[3].wants_logits);   // position 4
}

TEST(RunWindow, ErrorsPassThrough) {
  RecordingModel m;
  m.fail_at_pos = 3;
  auto cache = Cache();
  const std::vector<int32_t> t = {1, 2, 3, 4, 5, 6};
  WindowHooks hooks;
  auto st = RunWindow(m, *cache, Window{t.data(), 6, 2, 1}, hooks);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "step failed");
  hooks.on_logits = [](int pos, float*) {
    return pos == 2 ? Status(MakeError("stop at 2")) : Status::Ok();
  };
  RecordingModel ok_model;
  auto st2 = RunWindow(ok_model, *cache, Window{t.data(), 6, 2, 1}, hooks);
  ASSERT_FALSE(st2.ok());
  EXPECT_EQ(st2.message(), "stop at 2");
  EXPECT_EQ(ok_model.calls.size(), 2u);  // stopped right after the step of position 2
}

}  // namespace
}  // namespace hqekv::lm
