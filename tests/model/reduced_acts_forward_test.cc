// Model-level effect of the reduced-precision activation paths
// (kernels/kernels.h SetInt8Activations): the mean tempered KL of the
// next-token distribution, reduced-precision vs fp32 activations, on
// synthetic models of every int8-path weight type and of BF16 / F16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "io/model_source.h"
#include "io/synthetic.h"
#include "kernels/gemm_panel.h"
#include "kernels/kernels.h"
#include "model/llama.h"
#include "policy/factory.h"
#include "../temp_path.h"

namespace hqekv::kernels {
namespace {

// The weight types with an int8-activation path (kernels::HasInt8Path).
constexpr TensorType kReducedActsInt8Types[] = {
    TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_1,   TensorType::kQ5_0,
    TensorType::kQ5_1, TensorType::kQ2_K, TensorType::kQ3_K,   TensorType::kQ4_K,
    TensorType::kQ5_K, TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS};

// KL(softmax(p / T) || softmax(q / T)), T = the standard deviation of p (at
// least 1): the synthetic models' logits span hundreds of units (one-hot
// distributions whose KL says nothing), the tempered ones are spread out.
double Kl(const float* p_logits, const float* q_logits, int v) {
  double mean = 0, var = 0;
  for (int j = 0; j < v; ++j) mean += p_logits[j] / v;
  for (int j = 0; j < v; ++j) var += (p_logits[j] - mean) * (p_logits[j] - mean) / v;
  const double inv_t = 1 / std::max(1.0, std::sqrt(var));
  auto log_z = [&](const float* l) {
    double mx = l[0];
    for (int j = 1; j < v; ++j) mx = std::max(mx, double(l[j]));
    double z = 0;
    for (int j = 0; j < v; ++j) z += std::exp((l[j] - mx) * inv_t);
    return mx * inv_t + std::log(z);
  };
  const double lp = log_z(p_logits), lq = log_z(q_logits);
  double kl = 0;
  for (int j = 0; j < v; ++j) {
    const double a = p_logits[j] * inv_t - lp, b = q_logits[j] * inv_t - lq;
    kl += std::exp(a) * (a - b);
  }
  return kl;
}

// Mean tempered KL(fp32 activations || reduced-precision activations) of
// the next-token distribution over a `prefill`-token prefill and 8 decode
// steps (prefill > 32 takes the panel GEMMs, m <= 32 the dot-form kernels).
double ForwardKl(const std::string& path, int prefill = 24) {
  auto src = LoadModel(path);
  EXPECT_TRUE(src.ok()) << src.message();
  auto model = LlamaModel::Create(**src);
  EXPECT_TRUE(model.ok());
  const int V = (*src)->config.vocab_size;
  std::vector<int32_t> toks, pos;
  std::mt19937 rng(17);
  const int total = prefill + 8;
  for (int i = 0; i < total; ++i) {
    toks.push_back(3 + static_cast<int32_t>(rng() % (V - 3)));
    pos.push_back(i);
  }
  std::vector<float> logits[2];
  for (int on = 0; on < 2; ++on) {
    SetInt8Activations(on == 1);
    auto cache = MakeKvCache("fp32", (*model)->CacheGeometry(64));
    EXPECT_TRUE(cache.ok());
    logits[on].resize(static_cast<size_t>(total) * V);
    EXPECT_TRUE((*model)
                    ->Forward(toks.data(), pos.data(), prefill, **cache, Logits::kAll,
                              logits[on].data(), true)
                    .ok());
    for (int i = prefill; i < total; ++i) {
      EXPECT_TRUE((*model)
                      ->Forward(&toks[i], &pos[i], 1, **cache, Logits::kLast,
                                logits[on].data() + i * V, false)
                      .ok());
    }
  }
  SetInt8Activations(true);
  double kl = 0;
  for (int i = 0; i < total; ++i) kl += Kl(&logits[0][i * V], &logits[1][i * V], V);
  return kl / total;
}

// A synthetic model of weight type t (d_model 512, d_ff 1024, 8 heads) in a
// temporary file named from `prefix`; "" when it cannot be written.
std::string KlModel(TensorType t, const char* prefix) {
  SyntheticSpec s;
  s.type = t;
  s.d_model = 512;
  s.d_ff = 1024;
  s.n_heads = 8;
  const std::string path = hqekv::test::TempPath(prefix) + TensorTypeName(t) + ".gguf";
  std::filesystem::remove(path);
  return WriteSyntheticGguf(s, path).ok() ? path : "";
}

TEST(Int8Acts, ModelKlAgainstFp32ActivationsIsTiny) {
  for (TensorType t : kReducedActsInt8Types) {
    const std::string path = KlModel(t, "hqekv_int8kl_");
    ASSERT_FALSE(path.empty());
    const double kl = ForwardKl(path);
    EXPECT_LE(kl, 1e-4) << TensorTypeName(t);
    EXPECT_GT(kl, 0.0) << TensorTypeName(t);  // the forwards really differ
    std::printf("[ KL ] synthetic %s: mean tempered KL(fp32 acts || int8 acts) = %.3g\n",
                TensorTypeName(t), kl);
    std::filesystem::remove(path);
  }
}

// BF16 / F16 weights with a 48-token prefill: every prefill GEMM (m = 48 >
// 32) takes bf16 activations where a kernel for them runs (BF16: vdpbf16ps on
// AVX-512 BF16 CPUs or AMX; F16: AMX only, the weights split into two bf16
// parts: gemm_panel.h); decode (m = 1) keeps fp32 activations. Elsewhere both
// forwards are the fp32 path (KL 0).
TEST(Bf16Acts, ModelKlAgainstFp32ActivationsIsTiny) {
  for (TensorType t : {TensorType::kBF16, TensorType::kF16}) {
    const std::string path = KlModel(t, "hqekv_bf16kl_");
    ASSERT_FALSE(path.empty());
    const double kl = ForwardKl(path, 48);
    const bool bf16_acts = t == TensorType::kBF16 ? GemmBf16Available() : GemmAmxBf16Available();
    EXPECT_LE(kl, 1e-4) << TensorTypeName(t);
    if (bf16_acts) {
      EXPECT_GT(kl, 0.0) << TensorTypeName(t);  // the forwards really differ
    } else {
      EXPECT_EQ(kl, 0.0) << TensorTypeName(t);
    }
    std::printf(
        "[ KL ] synthetic %s, 48-token prefill: mean tempered KL(fp32 acts || bf16 acts) = %.3g "
        "(bf16 activations %s)\n",
        TensorTypeName(t), kl, bf16_acts ? "on" : "unavailable");
    std::filesystem::remove(path);
  }
}

// refmodel-4l is all F32: its forward takes no reduced-precision path at all.
TEST(Int8Acts, RefModelF32ForwardUnchanged) {
  EXPECT_EQ(ForwardKl(std::string(HQEKV_SOURCE_DIR) + "/models/refmodel-4l.gguf"), 0.0);
  EXPECT_EQ(ForwardKl(std::string(HQEKV_SOURCE_DIR) + "/models/refmodel-4l.gguf", 48), 0.0);
}

}  // namespace
}  // namespace hqekv::kernels
