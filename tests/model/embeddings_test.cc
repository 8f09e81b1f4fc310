// LlamaModel's embeddings output (SeqBatch::embeddings): the final hidden
// state of every token after the output norm is exactly what the output head
// reads, so output.weight . embedding must give the logits Forward returns.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "io/model_source.h"
#include "io/synthetic.h"
#include "kernels/kernels.h"
#include "model/llama.h"
#include "policy/factory.h"
#include "../temp_path.h"

namespace hqekv {
namespace {

void CheckEmbeddingsFeedTheHead(bool tied, TensorType type, const std::string& tag) {
  SetNumThreads(1);
  // fp32 activations: the int8-activation path of Q8_0 products would add
  // its own ~1e-2 rounding to the head's logits.
  struct Fp32Acts {
    Fp32Acts() { kernels::SetInt8Activations(false); }
    ~Fp32Acts() { kernels::SetInt8Activations(true); }
  } fp32_acts;
  SyntheticSpec spec;
  spec.tied_output = tied;
  spec.type = type;
  const std::string path = hqekv::test::TempPath("hqekv_embd_") + tag + ".gguf";
  std::filesystem::remove(path);
  ASSERT_TRUE(WriteSyntheticGguf(spec, path).ok());
  auto src = LoadModel(path);
  ASSERT_TRUE(src.ok()) << src.message();
  auto model = LlamaModel::Create(**src);
  ASSERT_TRUE(model.ok()) << model.message();
  auto cache = MakeKvCache("fp32", (*model)->CacheGeometry(64));
  ASSERT_TRUE(cache.ok());
  const int V = (*src)->config.vocab_size, D = (*src)->config.d_model;
  const std::vector<int32_t> toks = {1, 17, 290, 5, 64, 3};
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4, 5};
  const int n = static_cast<int>(toks.size());
  std::vector<float> logits(size_t(n) * V), embd(size_t(n) * D, NAN);
  ASSERT_TRUE((*model)
                  ->Forward(toks.data(), pos.data(), n, **cache, Logits::kAll, logits.data(), true,
                            embd.data())
                  .ok());
  const Tensor& head = (*src)->Get(tied ? "token_embd.weight" : "output.weight");
  for (int i = 0; i < n; ++i) {
    const float* e = &embd[size_t(i) * D];
    double norm2 = 0;
    for (int c = 0; c < D; ++c) norm2 += double(e[c]) * e[c];
    ASSERT_GT(norm2, 0.0) << "token " << i;
    for (int v = 0; v < V; v += 7) {
      const double want = logits[size_t(i) * V + v];
      // The reference dot in double over the dequantized row: fp32 vs double
      // summation only.
      const double got = kernels::DotRef(type, head.data + size_t(v) * head.row_bytes(), e, D);
      const double tol = 1e-4 * std::max(1.0, std::abs(want));
      EXPECT_NEAR(got, want, tol) << "token " << i << " vocab " << v;
    }
  }
  // Decoding one more token gives its embedding too, and a batch without the
  // pointer leaves the buffer alone.
  std::vector<float> one(D, NAN), last(V);
  const int32_t t = 42, p = n;
  ASSERT_TRUE(
      (*model)->Forward(&t, &p, 1, **cache, Logits::kLast, last.data(), false, one.data()).ok());
  EXPECT_FALSE(std::isnan(one[0]));
  std::filesystem::remove(path);
}

TEST(Embeddings, FeedTheOutputHeadF32Untied) {
  CheckEmbeddingsFeedTheHead(false, TensorType::kF32, "f32");
}
TEST(Embeddings, FeedTheOutputHeadQ8Tied) {
  CheckEmbeddingsFeedTheHead(true, TensorType::kQ8_0, "q8");
}

}  // namespace
}  // namespace hqekv
