// The shared generation step (model/generate_step.h): context shift past the
// cache's length, recomputation of the kept window, and the stop without it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/model_source.h"
#include "model/generate.h"
#include "model/generate_step.h"
#include "model/llama.h"
#include "policy/factory.h"
#include "../source_root.h"

namespace hqekv {
namespace {

struct Stories {
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<LlamaModel> model;
  Stories() {
    auto s = LoadModel(test::kSourceRoot + "/models/stories260K.gguf", "");
    EXPECT_TRUE(s.ok()) << s.message();
    src = std::move(*s);
    auto m = LlamaModel::Create(*src);
    EXPECT_TRUE(m.ok()) << m.message();
    model = std::move(*m);
  }
  std::unique_ptr<KvCache> Cache(const std::string& kv, int ctx) {
    auto c = policy::CreateCache(*policy::ParseSpec(kv), model->CacheGeometry(ctx), {});
    EXPECT_TRUE(c.ok()) << c.message();
    return std::move(*c);
  }
  Result<GenerateResult> Run(KvCache& cache, int max_new, bool shift, int n_keep = 1) {
    auto sampler = Sampler::Create(SamplerConfig{});  // greedy
    GenerateOptions opt;
    opt.max_new = max_new;
    opt.stop_at_eog = false;
    opt.context_shift = shift;
    opt.n_keep = n_keep;
    return Generate(*model, cache, {src->tokenizer->bos()}, *sampler, opt);
  }
};

// ctx 64, keep 1 (BOS): the first shift comes when 64 tokens are held and
// drops (64 - 1) / 2 = 31, leaving 33; each later one after 31 more tokens.
// 200 generated tokens decode 199 after the prompt: the window reaches 64
// after 63 of them, then every 31: shifts at decodes 64, 95, 126, 157, 188.
TEST(ContextShift, GeneratesPastTheContextForEveryPolicy) {
  Stories s;
  for (const char* kv : {"fp16", "fp32", "hqekv:nominal_bits=2", "streaming:bits=2", "h2o:bits=2",
                         "snapkv:bits=4", "pyramid:bits=4", "kivi:nominal_bits=2"}) {
    auto cache = s.Cache(kv, 64);
    auto r = s.Run(*cache, 200, true);
    ASSERT_TRUE(r.ok()) << kv << ": " << r.message();
    EXPECT_EQ(r->tokens.size(), 200u) << kv;
    EXPECT_EQ(r->context_shifts, 5) << kv;
    EXPECT_FALSE(r->hit_context_end) << kv;
  }
}

TEST(ContextShift, OffStopsAtTheContextEnd) {
  Stories s;
  auto cache = s.Cache("fp16", 64);
  auto r = s.Run(*cache, 200, false);
  ASSERT_TRUE(r.ok()) << r.message();
  // 63 tokens decoded after BOS fill the 64 positions; the 64th is emitted
  // but cannot be decoded.
  EXPECT_EQ(r->tokens.size(), 64u);
  EXPECT_TRUE(r->hit_context_end);
  EXPECT_EQ(r->context_shifts, 0);
}

// Before the first shift the output equals an unshifted run on a larger cache.
TEST(ContextShift, SameTokensUntilTheFirstShift) {
  Stories s;
  auto small = s.Cache("fp16", 64), large = s.Cache("fp16", 512);
  auto a = s.Run(*small, 100, true), b = s.Run(*large, 100, true);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->context_shifts, 0);
  EXPECT_EQ(std::vector<int32_t>(a->tokens.begin(), a->tokens.begin() + 64),
            std::vector<int32_t>(b->tokens.begin(), b->tokens.begin() + 64));
}

// ShiftContext keeps window[0..keep) and the newer half of the rest, and the
// cache then holds exactly what a fresh prefill of those tokens gives.
TEST(ContextShift, KeepsTheFirstAndTheNewerHalfAndRecomputes) {
  Stories s;
  auto cache = s.Cache("fp16", 64);
  Sequence seq;
  std::vector<int32_t> toks(64);
  for (int i = 0; i < 64; ++i) toks[i] = (i * 37 + 5) % s.model->vocab_size();
  ASSERT_TRUE(DecodeTokens(*s.model, *cache, seq, toks.data(), 64).ok());
  ASSERT_TRUE(ShiftContext(*s.model, *cache, seq, 4).ok());
  // (64 - 4) / 2 = 30 dropped: positions 4..33.
  std::vector<int32_t> want(toks.begin(), toks.begin() + 4);
  want.insert(want.end(), toks.begin() + 34, toks.end());
  EXPECT_EQ(seq.window, want);
  EXPECT_EQ(seq.history, toks);  // the sampler's history keeps everything
  EXPECT_EQ(seq.context_shifts, 1);
  auto fresh = s.Cache("fp16", 64);
  Sequence ref;
  ASSERT_TRUE(DecodeTokens(*s.model, *fresh, ref, want.data(), 34).ok());
  EXPECT_EQ(seq.logits, ref.logits);
  // The next token decodes at position 34 in both.
  const int32_t next = 7;
  ASSERT_TRUE(DecodeTokens(*s.model, *cache, seq, &next, 1).ok());
  ASSERT_TRUE(DecodeTokens(*s.model, *fresh, ref, &next, 1).ok());
  EXPECT_EQ(seq.logits, ref.logits);
  EXPECT_EQ(cache->Stats().bytes.total(), fresh->Stats().bytes.total());
}

TEST(ContextShift, KeepingEverythingIsAnError) {
  Stories s;
  auto cache = s.Cache("fp16", 16);
  Sequence seq;
  std::vector<int32_t> toks(16, 3);
  ASSERT_TRUE(DecodeTokens(*s.model, *cache, seq, toks.data(), 16).ok());
  const Status st = ShiftContext(*s.model, *cache, seq, 15);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("nothing to discard"), std::string::npos) << st.message();
  cache->Reset();
  auto r = s.Run(*cache, 40, true, 16);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("--keep"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace hqekv
