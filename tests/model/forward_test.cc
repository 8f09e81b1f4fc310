// The fast forward (LlamaModel over an fp32 KvCache) against the scalar
// reference forward on small random GGUF models: every weight type, every
// architecture flavour.
//
// Tolerance: max |logit - ref| <= 1e-3 * max(1, max |ref logit|). Both read
// the same dequantized weights; they differ only by fp32 vs double
// arithmetic (summation order, RoPE angles in fp32, fp32 softmax), which
// over 2 layers and a 256-wide model stays below ~1e-5 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "model/forward_ref.h"
#include "model/llama.h"
#include "model/rope.h"
#include "io/model_source.h"
#include "io/synthetic.h"
#include "policy/factory.h"
#include "../temp_path.h"

namespace hqekv {
namespace {

std::string TempModel(const SyntheticSpec& s, const std::string& tag) {
  const std::string path = hqekv::test::TempPath("hqekv_fwd_") + tag + ".gguf";
  std::filesystem::remove(path);
  const Status st = WriteSyntheticGguf(s, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

double MaxAbs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::abs(x)));
  return m;
}

// Switches the int8-activation path off for a scope (also on an early ASSERT return).
struct Fp32Activations {
  Fp32Activations() { kernels::SetInt8Activations(false); }
  ~Fp32Activations() { kernels::SetInt8Activations(true); }
};

// Prefill 7 tokens (all logits) then 3 single-token steps; compares each.
// The reference keeps fp32 activations, so the int8-activation path of Q8_0 /
// Q4_K products is off here (its effect: tests/model/reduced_acts_forward_test.cc).
void CheckAgainstReference(const SyntheticSpec& spec, const std::string& tag, int threads = 1) {
  SetNumThreads(threads);
  const Fp32Activations fp32_acts;
  const std::string path = TempModel(spec, tag);
  auto src = LoadModel(path);
  ASSERT_TRUE(src.ok()) << src.message();
  auto fast = LlamaModel::Create(**src);
  ASSERT_TRUE(fast.ok()) << fast.message();
  auto ref = ReferenceForward::Create(**src);
  ASSERT_TRUE(ref.ok()) << ref.message();
  auto cache = MakeKvCache("fp32", (*fast)->CacheGeometry(64));
  ASSERT_TRUE(cache.ok());
  const int V = (*src)->config.vocab_size;
  std::vector<int32_t> toks = {1, 17, 290, 5, 64, 3, 200, 42, 7, 259};
  std::vector<int32_t> pos(toks.size());
  for (size_t i = 0; i < pos.size(); ++i)
    pos[i] = static_cast<int32_t>(i * 3 + 1);  // gaps on purpose
  std::vector<float> got(7 * V);
  ASSERT_TRUE(
      (*fast)->Forward(toks.data(), pos.data(), 7, **cache, Logits::kAll, got.data(), true).ok());
  auto want = (*ref)->Forward(toks.data(), pos.data(), 7);
  ASSERT_TRUE(want.ok());
  const double scale = std::max(1.0, MaxAbs(*want));
  for (size_t j = 0; j < got.size(); ++j) {
    ASSERT_NEAR(got[j], (*want)[j], 1e-3 * scale) << tag << " prefill logit " << j;
  }
  for (int i = 7; i < 10; ++i) {
    std::vector<float> one(V);
    ASSERT_TRUE(
        (*fast)->Forward(&toks[i], &pos[i], 1, **cache, Logits::kLast, one.data(), false).ok());
    auto w1 = (*ref)->Forward(&toks[i], &pos[i], 1);
    ASSERT_TRUE(w1.ok());
    for (int j = 0; j < V; ++j) ASSERT_NEAR(one[j], (*w1)[j], 1e-3 * scale) << tag << " step " << i;
  }
  std::filesystem::remove(path);
  SetNumThreads(1);
}

class EveryWeightType : public testing::TestWithParam<TensorType> {};

TEST_P(EveryWeightType, FastForwardMatchesReference) {
  SyntheticSpec s;
  s.type = GetParam();
  CheckAgainstReference(s, TensorTypeName(s.type));
}

INSTANTIATE_TEST_SUITE_P(Forward, EveryWeightType,
                         testing::Values(TensorType::kF32, TensorType::kF16, TensorType::kBF16,
                                         TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_K,
                                         TensorType::kQ6_K, TensorType::kQ4_1, TensorType::kQ5_0,
                                         TensorType::kQ5_1, TensorType::kQ2_K, TensorType::kQ3_K,
                                         TensorType::kQ5_K, TensorType::kIQ4_NL,
                                         TensorType::kIQ4_XS),
                         [](const auto& info) { return std::string(TensorTypeName(info.param)); });

// A file shaped like llama.cpp's Q4_K_M of Qwen2.5-0.5B-Instruct: n_embd 896
// (not a multiple of 256) makes the quantizer fall back from Q4_K to Q5_0 for
// every matrix with 896-value rows, and from Q6_K to Q8_0 for attn_v;
// ffn_down (rows of d_ff = 512) stays Q6_K. The loader must accept the mix and
// the forward must match the reference.
TEST(Forward, MixedQ4KMLikeQwen25HalfB) {
  SyntheticSpec s;
  s.arch = "qwen2";
  s.d_model = 896;
  s.n_heads = 14;
  s.n_kv_heads = 2;  // head_dim 64
  s.d_ff = 512;
  s.tied_output = true;
  s.type = TensorType::kQ4_K;
  s.type_overrides = {{"ffn_down", TensorType::kQ6_K}, {"attn_v", TensorType::kQ6_K}};
  EXPECT_EQ(*SyntheticMatrixType(s, "blk.0.attn_q.weight", 896), TensorType::kQ5_0);
  EXPECT_EQ(*SyntheticMatrixType(s, "blk.0.attn_v.weight", 896), TensorType::kQ8_0);
  EXPECT_EQ(*SyntheticMatrixType(s, "blk.1.ffn_down.weight", 512), TensorType::kQ6_K);
  EXPECT_EQ(*SyntheticMatrixType(s, "token_embd.weight", 896), TensorType::kQ5_0);
  s.type = TensorType::kQ5_K;  // a Q5_K_M-like mix: Q5_1 fallback
  EXPECT_EQ(*SyntheticMatrixType(s, "blk.0.attn_q.weight", 896), TensorType::kQ5_1);
  s.type = TensorType::kQ4_K;
  CheckAgainstReference(s, "q4km");
  s.type = TensorType::kIQ4_XS;  // IQ4_XS -> IQ4_NL
  s.type_overrides.clear();
  CheckAgainstReference(s, "iq4xs");
}

TEST(Forward, Qwen2BiasesAndNeoxRope) {
  SyntheticSpec s;
  s.arch = "qwen2";
  s.tied_output = false;
  CheckAgainstReference(s, "qwen2", 2);
}

TEST(Forward, Qwen3QkNormMqaExplicitHeadDim) {
  SyntheticSpec s;
  s.arch = "qwen3";
  s.n_heads = 2;
  s.n_kv_heads = 1;  // MQA
  s.head_dim = 128;  // key_length given, d_model / n_heads would agree here...
  s.d_model = 512;   // ... so make them differ: 512 / 2 = 256 != 128
  s.type = TensorType::kF16;
  CheckAgainstReference(s, "qwen3", 2);
}

// Gemma 3: sqrt(d) embedding scale, QK-norm, post norms, GELU gate, five
// window layers per global one (layers 0-4 and 6 here, window 8 over
// positions 1, 4, 7, ...: each window query sees its last 3 keys), a local
// RoPE base, a final soft-cap.
TEST(Forward, Gemma3SlidingWindowPostNormsGelu) {
  SyntheticSpec s;
  s.arch = "gemma3";
  s.n_layers = 7;
  s.n_heads = 4;
  s.n_kv_heads = 1;
  s.head_dim = 96;  // not d_model / n_heads
  s.sliding_window = 8;
  s.rope_theta = 1000000.0f;
  s.rope_theta_swa = 10000.0f;
  s.final_softcap = 30.0f;
  s.type = TensorType::kF16;
  CheckAgainstReference(s, "gemma3", 2);
}

// Gemma 2: window and global layers alternate, attention scores and final
// logits soft-capped (llama.cpp's defaults 50 and 30: the file has no keys;
// a small attention cap here so that it bites), local RoPE base = global.
TEST(Forward, Gemma2SoftCapsAndAlternatingWindows) {
  SyntheticSpec s;
  s.arch = "gemma2";
  s.n_layers = 4;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.sliding_window = 8;
  s.attn_softcap = 1.5f;
  s.type = TensorType::kF16;
  CheckAgainstReference(s, "gemma2");
  const std::string path = TempModel(s, "gemma2keys");
  auto src = LoadModel(path);
  ASSERT_TRUE(src.ok()) << src.message();
  const ModelConfig& c = (*src)->config;
  EXPECT_EQ(c.layer_window, (std::vector<int>{8, 0, 8, 0}));
  EXPECT_FLOAT_EQ(c.attn_softcap, 1.5f);
  EXPECT_FLOAT_EQ(c.final_softcap, 30.0f);  // llama.cpp's default without the key
  EXPECT_FLOAT_EQ(c.rope_theta_swa, c.rope_theta);
  // The store-backed policies apply the cap too (window_cache_test checks
  // the values): a compressing policy holds the global layers.
  auto m = LlamaModel::Create(**src);
  ASSERT_TRUE(m.ok());
  auto kivi = MakeKvCache("kivi", (*m)->CacheGeometry(64));
  ASSERT_TRUE(kivi.ok()) << kivi.message();
  EXPECT_NE((*kivi)->Describe().find("kivi"), std::string::npos) << (*kivi)->Describe();
  std::filesystem::remove(path);
}

// Phi-3: q/k/v in one attn_qkv matrix, gate and up in one ffn_up of 2 d_ff rows.
TEST(Forward, Phi3FusedQkvAndGateUp) {
  SyntheticSpec s;
  s.arch = "phi3";
  s.n_heads = 4;
  s.n_kv_heads = 4;
  s.type = TensorType::kQ8_0;
  CheckAgainstReference(s, "phi3");
}

TEST(Forward, Gemma3WindowLayersFollowLlamaCppsPattern) {
  SyntheticSpec s;
  s.arch = "gemma3";
  s.n_layers = 13;
  s.sliding_window = 512;
  const std::string path = TempModel(s, "gemma3pattern");
  auto src = LoadModel(path);
  ASSERT_TRUE(src.ok()) << src.message();
  const ModelConfig& c = (*src)->config;
  const std::vector<int> want = {512, 512, 512, 512, 512, 0, 512, 512, 512, 512, 512, 0, 512};
  EXPECT_EQ(c.layer_window, want);
  EXPECT_FLOAT_EQ(c.rope_theta_swa, 10000.0f);  // llama.cpp's default without the key
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / 8.0f);   // 1/sqrt(head_dim 64)
  std::filesystem::remove(path);
}

// Mistral-style llama file: attention.sliding_window makes every layer a
// window layer rotated with the model's own RoPE (here llama3-scaled, so a
// Gemma-style local table would differ). Positions 1, 4, ..., 28 against a
// window of 8: the mask bites from the fourth token on.
TEST(Forward, MistralSlidingWindowOnEveryLlamaLayer) {
  SyntheticSpec s;
  s.n_heads = 8;
  s.n_kv_heads = 2;
  s.sliding_window = 8;
  s.rope_factor = 8.0f;
  s.rope_orig_ctx = 16;
  s.rope_theta = 500000.0f;
  s.type = TensorType::kF16;
  CheckAgainstReference(s, "mistral", 2);
  const std::string path = TempModel(s, "mistralkeys");
  auto src = LoadModel(path);
  ASSERT_TRUE(src.ok()) << src.message();
  const ModelConfig& c = (*src)->config;
  EXPECT_EQ(c.layer_window, std::vector<int>(c.n_layers, 8));
  EXPECT_FALSE(c.swa_own_rope);
  // Every layer is a ring: a compressing policy has nothing to act on and says so.
  auto m = LlamaModel::Create(**src);
  ASSERT_TRUE(m.ok());
  auto bad = MakeKvCache("hqekv:bits=3", (*m)->CacheGeometry(64));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("sliding-window"), std::string::npos) << bad.message();

  // Control: the same weights without the key attend over everything, and
  // the last token's logits move (so the test above saw the mask).
  SyntheticSpec full = s;
  full.sliding_window = 0;
  const std::string full_path = TempModel(full, "mistralfull");
  auto fsrc = LoadModel(full_path);
  ASSERT_TRUE(fsrc.ok()) << fsrc.message();
  EXPECT_TRUE((*fsrc)->config.layer_window.empty());
  auto ra = ReferenceForward::Create(**src);
  auto rb = ReferenceForward::Create(**fsrc);
  ASSERT_TRUE(ra.ok() && rb.ok());
  std::vector<int32_t> toks = {1, 17, 290, 5, 64, 3, 200, 42};
  std::vector<int32_t> pos = {1, 4, 7, 10, 13, 16, 19, 22};
  auto la = (*ra)->Forward(toks.data(), pos.data(), 8);
  auto lb = (*rb)->Forward(toks.data(), pos.data(), 8);
  ASSERT_TRUE(la.ok() && lb.ok());
  const int V = c.vocab_size;
  double first = 0, last = 0;
  for (int j = 0; j < V; ++j) {
    first = std::max(first, double(std::abs((*la)[j] - (*lb)[j])));
    last = std::max(last, double(std::abs((*la)[7 * V + j] - (*lb)[7 * V + j])));
  }
  EXPECT_EQ(first, 0.0);  // inside the window: identical
  EXPECT_GT(last, 1e-3);
  std::filesystem::remove(path);
  std::filesystem::remove(full_path);
}

// Partial rotary (Phi-4-mini turns 96 of its 128 head dimensions): the
// first rope_dim dimensions turn, in NeoX pairs (i, i + rope_dim / 2), the
// rest pass through; with yarn the correction range counts rope_dim.
TEST(Forward, Phi3PartialRotary) {
  SyntheticSpec s;
  s.arch = "phi3";
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 64;
  s.rope_dim = 48;
  s.type = TensorType::kF16;
  CheckAgainstReference(s, "phi3partial");
  s.rope_factor = 4.0f;
  s.rope_scaling_type = "yarn";
  s.rope_orig_ctx = 64;
  CheckAgainstReference(s, "phi3partialyarn");
  // Dimensions past rope_dim do not move: a key at position 0 and at 9 differ
  // only in the rotated ones (checked on the engine's rotation itself).
  ModelConfig c;
  c.head_dim = 64;
  c.rope_dim = 48;
  c.rope_theta = 10000.0f;
  c.rope = RopeStyle::kNeoX;
  const std::vector<float> inv = RopeInvFreq(c);
  ASSERT_EQ(inv.size(), 24u);
  std::vector<float> x(64), y;
  for (int i = 0; i < 64; ++i) x[i] = 0.25f * float(i + 1);
  y = x;
  ApplyRope(c.rope, inv, 9, 1, 64, y.data());
  for (int i = 48; i < 64; ++i) EXPECT_EQ(y[i], x[i]) << i;
  EXPECT_NE(y[1], x[1]);
  EXPECT_NE(y[25], x[25]);  // pair (1, 25)
  // A rope dimension that is odd or above head_dim is refused by name.
  s.rope_dim = 80;
  const std::string bad = TempModel(s, "phi3badrope");
  auto src = LoadModel(bad);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.message().find("rope.dimension_count"), std::string::npos) << src.message();
  std::filesystem::remove(bad);
}

// LongRoPE (Phi-3 128K / Phi-4-mini files): the long factors when the
// cache's context exceeds rope.scaling.original_context_length (64 > 32
// here, and the reference reads the file's 256), the short ones otherwise;
// q and k times attn_factor.
TEST(Forward, Phi3LongRopeFactorsByContext) {
  SyntheticSpec s;
  s.arch = "phi3";
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 64;
  s.rope_dim = 48;
  s.longrope = true;
  s.rope_orig_ctx = 32;
  s.type = TensorType::kF16;
  CheckAgainstReference(s, "phi3longrope");
  const std::string path = TempModel(s, "phi3longropeshort");
  auto src = LoadModel(path);
  ASSERT_TRUE(src.ok()) << src.message();
  const ModelConfig& c = (*src)->config;
  EXPECT_TRUE(c.longrope);
  EXPECT_EQ(c.rope_orig_ctx, 32);
  EXPECT_NEAR(c.rope_attn_factor, std::sqrt(1 + std::log(8.0) / std::log(32.0)), 1e-6);
  const Fp32Activations fp32_acts;
  auto fast = LlamaModel::Create(**src);
  auto ref = ReferenceForward::Create(**src);
  ASSERT_TRUE(fast.ok() && ref.ok());
  std::vector<int32_t> toks = {1, 17, 290, 5, 64, 3};
  std::vector<int32_t> pos = {0, 2, 5, 9, 12, 15};
  const int V = c.vocab_size, n = 6;
  std::vector<float> short_ctx(n * V), long_ctx(n * V);
  auto c16 = MakeKvCache("fp32", (*fast)->CacheGeometry(16));
  auto c64 = MakeKvCache("fp32", (*fast)->CacheGeometry(64));
  ASSERT_TRUE(c16.ok() && c64.ok());
  ASSERT_TRUE((*fast)
                  ->Forward(toks.data(), pos.data(), n, **c16, Logits::kAll, short_ctx.data(), true)
                  .ok());
  ASSERT_TRUE((*fast)
                  ->Forward(toks.data(), pos.data(), n, **c64, Logits::kAll, long_ctx.data(), true)
                  .ok());
  (*ref)->SetContext(16);
  auto want = (*ref)->Forward(toks.data(), pos.data(), n);
  ASSERT_TRUE(want.ok()) << want.message();
  const double scale = std::max(1.0, MaxAbs(*want));
  double differ = 0;
  for (size_t j = 0; j < short_ctx.size(); ++j) {
    ASSERT_NEAR(short_ctx[j], (*want)[j], 1e-3 * scale) << "short factors, logit " << j;
    differ = std::max(differ, double(std::abs(short_ctx[j] - long_ctx[j])));
  }
  EXPECT_GT(differ, 1e-2 * scale);  // the two factor sets give different models
  std::filesystem::remove(path);
}

TEST(Forward, Llama3RopeScaling) {
  SyntheticSpec s;
  s.rope_factor = 8.0f;
  s.rope_orig_ctx = 16;  // so that some wavelengths fall in every regime
  s.rope_theta = 500000.0f;
  CheckAgainstReference(s, "llama3");
}

TEST(Forward, LinearRopeScaling) {
  SyntheticSpec s;
  s.rope_factor = 4.0f;
  s.rope_scaling_type = "linear";
  CheckAgainstReference(s, "linear");
}

TEST(Forward, YarnRopeScaling) {
  SyntheticSpec s;
  s.rope_factor = 4.0f;
  s.rope_scaling_type = "yarn";
  s.rope_orig_ctx = 64;  // correction dims inside the head
  CheckAgainstReference(s, "yarn");
}

TEST(Forward, RejectsBadTokensPositionsAndGeometry) {
  SyntheticSpec s;
  const std::string path = TempModel(s, "bad");
  auto src = LoadModel(path);
  ASSERT_TRUE(src.ok()) << src.message();
  auto m = LlamaModel::Create(**src);
  ASSERT_TRUE(m.ok());
  auto cache = MakeKvCache("fp16", (*m)->CacheGeometry(8));
  std::vector<float> logits(s.vocab);
  const int32_t bad_tok = s.vocab, ok_tok = 1, pos0 = 0, pos_far = 8;
  EXPECT_FALSE((*m)->Forward(&bad_tok, &pos0, 1, **cache, Logits::kLast, logits.data(), true).ok());
  EXPECT_FALSE(
      (*m)->Forward(&ok_tok, &pos_far, 1, **cache, Logits::kLast, logits.data(), true).ok());
  auto other = MakeKvCache("fp16", KvGeometry{1, 4, 2, 64, 8});
  EXPECT_FALSE((*m)->Forward(&ok_tok, &pos0, 1, **other, Logits::kLast, logits.data(), true).ok());
  EXPECT_TRUE((*m)->Forward(&ok_tok, &pos0, 1, **cache, Logits::kLast, logits.data(), true).ok());
  std::filesystem::remove(path);
}

TEST(Forward, PrefillEqualsTokenByTokenDecode) {
  // Batched GEMM prefill and GEMV decode must agree (both fp32, fp16 cache).
  SyntheticSpec s;
  const std::string path = TempModel(s, "batch");
  auto src = LoadModel(path);
  ASSERT_TRUE(src.ok()) << src.message();
  auto m = LlamaModel::Create(**src);
  ASSERT_TRUE(m.ok());
  auto a = MakeKvCache("fp16", (*m)->CacheGeometry(32));
  auto b = MakeKvCache("fp16", (*m)->CacheGeometry(32));
  const std::vector<int32_t> toks = {1, 5, 9, 33, 270, 12};
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4, 5};
  std::vector<float> batch(s.vocab), step(s.vocab);
  ASSERT_TRUE(
      (*m)->Forward(toks.data(), pos.data(), 6, **a, Logits::kLast, batch.data(), true).ok());
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE((*m)->Forward(&toks[i], &pos[i], 1, **b, Logits::kLast, step.data(), i == 0).ok());
  }
  for (int j = 0; j < s.vocab; ++j)
    EXPECT_NEAR(batch[j], step[j], 1e-3 * std::max(1.0, MaxAbs(step)));
  EXPECT_EQ((*a)->Stats().bytes.total(), (*b)->Stats().bytes.total());
  std::filesystem::remove(path);
}

TEST(Forward, ForwardManyEqualsEachSequenceAlone) {
  // Three sequences of different lengths and caches (fp16, kivi, hqekv)
  // decode one token each in one ForwardMany; each must equal its own
  // Forward (GEMM over 3 rows vs GEMV: fp32 summation order only).
  SyntheticSpec s;
  const std::string path = TempModel(s, "many");
  auto src = LoadModel(path);
  ASSERT_TRUE(src.ok()) << src.message();
  auto m = LlamaModel::Create(**src);
  ASSERT_TRUE(m.ok());
  const std::vector<std::string> specs = {"fp16", "kivi:nominal_bits=4", "hqekv:nominal_bits=2"};
  const std::vector<std::vector<int32_t>> prompts = {{1, 5, 9}, {1, 33, 270, 12, 8}, {1, 2}};
  const std::vector<int32_t> next = {40, 41, 42};
  std::vector<std::unique_ptr<KvCache>> solo, many;
  std::vector<std::vector<float>> want(3, std::vector<float>(s.vocab)),
      got(3, std::vector<float>(s.vocab));
  std::vector<SeqBatch> batch;
  std::vector<int32_t> next_pos(3);
  for (int q = 0; q < 3; ++q) {
    for (auto* list : {&solo, &many}) {
      auto c = MakeKvCache(specs[q], (*m)->CacheGeometry(64));
      ASSERT_TRUE(c.ok()) << c.message();
      std::vector<int32_t> pos(prompts[q].size());
      for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i);
      ASSERT_TRUE((*m)->Forward(prompts[q].data(), pos.data(), static_cast<int>(pos.size()), **c,
                                Logits::kNone, nullptr, true)
                      .ok());
      list->push_back(std::move(*c));
    }
    next_pos[q] = static_cast<int32_t>(prompts[q].size());
    ASSERT_TRUE(
        (*m)->Forward(&next[q], &next_pos[q], 1, *solo[q], Logits::kLast, want[q].data(), false)
            .ok());
    batch.push_back(SeqBatch{&next[q], &next_pos[q], 1, many[q].get(), got[q].data(), false});
  }
  ASSERT_TRUE((*m)->ForwardMany(batch.data(), 3).ok());
  for (int q = 0; q < 3; ++q) {
    for (int j = 0; j < s.vocab; ++j)
      ASSERT_NEAR(got[q][j], want[q][j], 1e-3 * std::max(1.0, MaxAbs(want[q]))) << specs[q];
    EXPECT_EQ(many[q]->Stats().bytes.total(), solo[q]->Stats().bytes.total()) << specs[q];
  }
  batch[1].cache = batch[0].cache;  // one cache twice: refused before anything runs
  EXPECT_FALSE((*m)->ForwardMany(batch.data(), 3).ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace hqekv
