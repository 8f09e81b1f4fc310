// 20,000-token generations past a 256-position context (issue 14: "long
// decodes (20K tokens) for every eviction policy hold their budget"), for
// fp16, kivi, hqekv and every eviction policy, through
// the shared step with context shift (model/generate_step.h), on
// stories260K: every step's logits are finite, generation reaches the end,
// and the KV bytes stay bounded: the peak over the whole run is at most the
// peak of its first 1,000 tokens (which already include shifts); fp16's peak
// is exactly its bytes at the first full context. bits/original element is
// printed, not bounded: after a shift the kept half is re-prefilled, so a
// policy's state differs from the one decode built (kivi's residual, hqekv's
// tiers). Label long_no_sanitize (~7-16 s per policy on one loaded core;
// `ctest -LE long` skips them): tests/CMakeLists.txt.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/parallel.h"
#include "io/model_source.h"
#include "model/generate_step.h"
#include "model/llama.h"
#include "policy/factory.h"

namespace hqekv {
namespace {

constexpr int kCtx = 256;
constexpr int kTokens = 20000;
constexpr int kEarly = 1000;  // the reference window of the byte bound

struct LongDecode {
  int tokens = 0, shifts = 0, nonfinite_steps = 0;
  int64_t peak_early = 0, peak = 0;
  int64_t bytes_first_full = 0;
  double bits_first_full = 0, bits_end = 0;
  double max_bits_after_full = 0;  // bits/original, every step from the first full context on
};

LongDecode DecodeLong(const ModelSource& src, LlamaModel& model, const std::string& kv) {
  LongDecode out;
  auto cache = policy::CreateCache(*policy::ParseSpec(kv), model.CacheGeometry(kCtx), {});
  EXPECT_TRUE(cache.ok()) << kv << ": " << cache.message();
  if (!cache.ok()) return out;
  SamplerConfig sc;
  sc.temperature = 0.8f;  // varied text; seeded: deterministic
  sc.seed = 14;
  auto sampler = Sampler::Create(sc);
  EXPECT_TRUE(sampler.ok());
  Sequence seq;
  const int32_t bos = src.tokenizer->bos();
  EXPECT_TRUE(DecodeTokens(model, **cache, seq, &bos, 1).ok());
  StepOptions step;
  step.stop_at_eog = false;
  step.context_shift = true;
  step.n_keep = 1;  // BOS, as `hqekv run --keep 0`
  for (int i = 0; i < kTokens; ++i) {
    auto r = GenerateStep(model, **cache, *sampler, seq, step);
    EXPECT_TRUE(r.ok()) << kv << " step " << i << ": " << r.message();
    if (!r.ok() || r->end != StepEnd::kToken) break;
    ++out.tokens;
    const bool finite =
        std::all_of(seq.logits.begin(), seq.logits.end(), [](float v) { return std::isfinite(v); });
    out.nonfinite_steps += !finite;
    const KvStats st = (*cache)->Stats();
    out.peak = std::max(out.peak, st.bytes.total());
    if (i < kEarly) out.peak_early = out.peak;
    if (out.bits_first_full == 0 && seq.window.size() == static_cast<size_t>(kCtx)) {
      out.bits_first_full = st.bits_per_original();
      out.bytes_first_full = st.bytes.total();
    }
    if (out.bits_first_full > 0)
      out.max_bits_after_full = std::max(out.max_bits_after_full, st.bits_per_original());
  }
  out.shifts = seq.context_shifts;
  out.bits_end = (*cache)->Stats().bits_per_original();
  return out;
}

class LongDecode20k : public testing::TestWithParam<const char*> {};

TEST_P(LongDecode20k, RunsToTheEndWithBoundedKvAndFiniteLogits) {
  SetNumThreads(1);
  auto src = LoadModel(std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf");
  ASSERT_TRUE(src.ok()) << src.message();
  auto model = LlamaModel::Create(**src);
  ASSERT_TRUE(model.ok()) << model.message();
  const std::string kv = GetParam();
  const LongDecode r = DecodeLong(**src, **model, kv);
  EXPECT_EQ(r.tokens, kTokens) << kv;
  EXPECT_EQ(r.nonfinite_steps, 0) << kv;
  // A shift drops (256 - 1) / 2 = 127 tokens: one per 127 generated once full.
  EXPECT_EQ(r.shifts, (kTokens - kCtx) / 127 + 1) << kv;
  EXPECT_GT(r.peak_early, 0) << kv;
  EXPECT_LE(r.peak, r.peak_early) << kv << ": KV bytes grew after the first " << kEarly;
  EXPECT_GT(r.bytes_first_full, 0) << kv;
  const ModelConfig& c = (*src)->config;
  const int64_t fp16_ctx = int64_t{2} * 2 * c.n_layers * c.kv_dim() * kCtx;
  // The decode-time evictors hold their true-bits budget (2) on every step
  // once the window is full. snapkv and pyramid compress the prompt only (as
  // in their papers): during a decode they keep every new token, so only the
  // context shift bounds them (~18 bits/original at the first full context).
  if (kv == "streaming:bits=2" || kv == "h2o:bits=2") {
    EXPECT_LE(r.max_bits_after_full, 2 * 1.03) << kv;
  }
  if (kv == "fp16") {
    EXPECT_EQ(r.peak, r.bytes_first_full);
    EXPECT_GE(r.peak, fp16_ctx);  // the K/V payload, plus positions
  }
  std::printf(
      "%s: %d tokens, %d shifts, peak %lld bytes (fp16 of the context %lld), "
      "%.3f bits/original at the first full context, %.3f at the end, max %.3f\n",
      kv.c_str(), r.tokens, r.shifts, static_cast<long long>(r.peak),
      static_cast<long long>(fp16_ctx), r.bits_first_full, r.bits_end, r.max_bits_after_full);
}

INSTANTIATE_TEST_SUITE_P(Policies, LongDecode20k,
                         testing::Values("fp16", "streaming:bits=2", "h2o:bits=2", "snapkv:bits=2",
                                         "pyramid:bits=2", "hqekv:nominal_bits=2",
                                         "kivi:nominal_bits=2"),
                         [](const testing::TestParamInfo<const char*>& p) {
                           std::string n = p.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace hqekv
