// A tiny deterministic language model over a byte tokenizer, for harness
// tests: two attention layers whose K/V go through the KvCache under test, so
// cache differences reach the logits. It is not trained; it only has to be
// deterministic and cache-sensitive.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "eval/run/eval_model.h"
#include "eval/run/rng.h"

namespace hqekv::eval::testing {

class ToyModel final : public EvalModel {
 public:
  static constexpr int kVocab = 259;  // 0 unused, 1 BOS, 2 EOS, 3 + byte
  static constexpr int kDim = 16, kLayers = 2, kHeads = 2, kKvHeads = 1, kHeadDim = 8;

  explicit ToyModel(int trained_ctx = 512) : ctx_(trained_ctx) {
    Rng r(7);
    auto fill = [&r](std::vector<float>& w, size_t n, float scale) {
      w.resize(n);
      for (auto& x : w) x = static_cast<float>((r.Uniform() * 2 - 1) * scale);
    };
    fill(emb_, size_t(kVocab) * kDim, 1.0f);
    for (int l = 0; l < kLayers; ++l) {
      fill(wq_[l], size_t(kHeads) * kHeadDim * kDim, 0.5f);
      fill(wk_[l], size_t(kKvHeads) * kHeadDim * kDim, 0.5f);
      fill(wv_[l], size_t(kKvHeads) * kHeadDim * kDim, 0.5f);
      fill(wo_[l], size_t(kDim) * kHeads * kHeadDim, 0.5f);
    }
  }

  std::string Name() const override { return "toy"; }
  std::string Identity() const override { return "toy-v1"; }
  int VocabSize() const override { return kVocab; }
  int TrainedContext() const override { return ctx_; }
  KvGeometry Geometry(int max_ctx) const override {
    return KvGeometry{kLayers, kHeads, kKvHeads, kHeadDim, max_ctx};
  }
  std::vector<int32_t> Encode(const std::string& text, bool add_bos) const override {
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(1);
    for (unsigned char c : text) ids.push_back(3 + c);
    return ids;
  }
  std::string Decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t t : ids)
      if (t >= 3 && t < kVocab) s.push_back(static_cast<char>(t - 3));
    return s;
  }
  bool IsEndOfGeneration(int32_t t) const override { return t == 2; }

  Status Forward(KvCache& cache, const int32_t* tokens, int n, int pos0, bool is_prefill,
                 std::vector<float>* logits) override {
    std::vector<float> x(size_t(n) * kDim);
    std::vector<int32_t> pos(n);
    for (int i = 0; i < n; ++i) {
      if (tokens[i] < 0 || tokens[i] >= kVocab) return MakeError("toy: token out of range");
      pos[i] = pos0 + i;
      for (int d = 0; d < kDim; ++d) x[size_t(i) * kDim + d] = emb_[size_t(tokens[i]) * kDim + d];
    }
    for (int l = 0; l < kLayers; ++l) {
      std::vector<float> q(size_t(n) * kHeads * kHeadDim), k(size_t(n) * kKvHeads * kHeadDim),
          v(k.size()), att(q.size());
      for (int i = 0; i < n; ++i) {
        MatVec(wq_[l], &x[size_t(i) * kDim], kHeads * kHeadDim, kDim,
               &q[size_t(i) * kHeads * kHeadDim]);
        MatVec(wk_[l], &x[size_t(i) * kDim], kKvHeads * kHeadDim, kDim,
               &k[size_t(i) * kKvHeads * kHeadDim]);
        MatVec(wv_[l], &x[size_t(i) * kDim], kKvHeads * kHeadDim, kDim,
               &v[size_t(i) * kKvHeads * kHeadDim]);
      }
      HQEKV_RETURN_IF_ERROR(cache.Append(l, k.data(), v.data(), pos.data(), n));
      HQEKV_RETURN_IF_ERROR(cache.Attend(l, q.data(), pos.data(), n, att.data()));
      std::vector<float> o(kDim);
      for (int i = 0; i < n; ++i) {
        MatVec(wo_[l], &att[size_t(i) * kHeads * kHeadDim], kDim, kHeads * kHeadDim, o.data());
        for (int d = 0; d < kDim; ++d) x[size_t(i) * kDim + d] += o[d];
      }
    }
    HQEKV_RETURN_IF_ERROR(cache.EndBatch(n, is_prefill));
    logits->assign(kVocab, 0.f);
    const float* last = &x[size_t(n - 1) * kDim];
    for (int t = 0; t < kVocab; ++t) {
      float s = 0;
      for (int d = 0; d < kDim; ++d) s += emb_[size_t(t) * kDim + d] * last[d];
      (*logits)[t] = s;
    }
    return Status::Ok();
  }

 private:
  static void MatVec(const std::vector<float>& w, const float* x, int rows, int cols, float* y) {
    for (int r = 0; r < rows; ++r) {
      float s = 0;
      for (int c = 0; c < cols; ++c) s += w[size_t(r) * cols + c] * x[c];
      y[r] = s;
    }
  }
  int ctx_;
  std::vector<float> emb_, wq_[kLayers], wk_[kLayers], wv_[kLayers], wo_[kLayers];
};

// Whitespace-separated words + punctuation count: a tokenizer-free counter.
inline int WordCount(const std::string& s) {
  int n = 0;
  bool in = false;
  for (unsigned char c : s) {
    const bool sp = std::isspace(c);
    if (!sp && !in) ++n;
    in = !sp;
  }
  return n;
}

}  // namespace hqekv::eval::testing
