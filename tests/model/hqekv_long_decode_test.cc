// HqeKV budgets on a real model over a long generation (issue 12 item 3): on
// stories260K after 2000 generated tokens, bits=2 and bits=3.2 still hold
// their 4-bit shares (within 5%) and stay clearly apart in memory. Before the
// fix both ended up the same (the 4-bit tier drained during decode). 2000
// tokens keep the test fast (the issue measured 5000 on the CLI; 5000 passes
// too: bits=2 7.52, bits=3.2 8.69 bits/original, u4 0.032 / 0.636).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/parallel.h"
#include "model/generate.h"
#include "model/llama.h"
#include "io/model_source.h"
#include "policy/factory.h"
#include "policy/hqekv_cache.h"

namespace hqekv {
namespace {

struct LongRun {
  double bits_per_original = 0;
  double u4_share = 0;  // K chunks in u4 / compressed non-pinned chunks, mean over layers
  double r4 = 0;
};

LongRun GenerateLong(const std::string& spec) {
  SetNumThreads(2);
  LongRun out;
  auto src = LoadModel(std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf");
  EXPECT_TRUE(src.ok()) << src.message();
  if (!src.ok()) return out;
  auto m = LlamaModel::Create(**src);
  EXPECT_TRUE(m.ok());
  auto cache = MakeKvCache(spec, (*m)->CacheGeometry(2200));
  EXPECT_TRUE(cache.ok()) << (cache.ok() ? "" : cache.message());
  SamplerConfig sc;
  sc.temperature = 0.8f;
  sc.seed = 7;
  auto sampler = Sampler::Create(sc);
  EXPECT_TRUE(sampler.ok());
  const Tokenizer& tok = *(*src)->tokenizer;
  std::vector<int32_t> prompt =
      tok.Encode("Once upon a time, there was a little girl named Lily.", true);
  GenerateOptions opt;
  opt.max_new = 2000;
  opt.stop_at_eog = false;
  auto r = Generate(**m, **cache, prompt, *sampler, opt);
  EXPECT_TRUE(r.ok()) << r.message();
  if (!r.ok()) return out;
  EXPECT_EQ(r->tokens.size(), 2000u);
  out.bits_per_original = (*cache)->Stats().bits_per_original();
  const auto* h = dynamic_cast<const policy::HqekvCache*>(cache->get());
  const KvGeometry& g = (*cache)->geometry();
  out.r4 = h->ratios(0).r4;
  for (int l = 0; l < g.n_layers; ++l) {
    int64_t u4 = 0;
    for (policy::Tier t : h->k_tiers(l, 0)) u4 += t == policy::Tier::kHigh;
    out.u4_share += static_cast<double>(u4) / (h->chunks_compressed(l) - 2) / g.n_layers;
  }
  SetNumThreads(1);
  return out;
}

TEST(HqekvLongDecode, Bits2AndBits32StayApartAfterALongGeneration) {
  const LongRun lo = GenerateLong("hqekv:nominal_bits=2");
  const LongRun hi = GenerateLong("hqekv:nominal_bits=3.2");
  EXPECT_NEAR(lo.u4_share, lo.r4, 0.05);
  EXPECT_NEAR(hi.u4_share, hi.r4, 0.05);
  EXPECT_GT(hi.bits_per_original, lo.bits_per_original + 0.8)
      << "bits=3.2 " << hi.bits_per_original << " vs bits=2 " << lo.bits_per_original;
  std::printf("after 2000 tokens: bits=2 %.3f bits/original (u4 %.3f), bits=3.2 %.3f (u4 %.3f)\n",
              lo.bits_per_original, lo.u4_share, hi.bits_per_original, hi.u4_share);
}

}  // namespace
}  // namespace hqekv
