// `hqekv study quant --from-model MODEL -f TEXT`: the quantization study of
// eval/study/quant_study.h on the real K and V of a model (the paper's Table 1 and
// Table 2, per layer and overall) instead of synthetic Gaussian vectors.
//
// A RecordingKvCache wraps an fp32 cache and copies every appended K/V row;
// the text is prefilled in windows of the model's context. For each layer the
// vectors of every KV head (each head's tokens in order, cut to whole K
// chunks) are studied: K vectors give the K rows (range/loss correlation,
// "K per-channel" uniform vs normalized), V vectors the V rows.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/kv_cache.h"
#include "eval/run/eval_model.h"
#include "eval/study/quant_study.h"

namespace hqekv::eval {

// Forwards everything to `inner` and records the rows appended to it:
// keys(layer, head) / values(layer, head) are [tokens][head_dim] in append
// order (post-RoPE K, as the cache sees it).
class RecordingKvCache final : public KvCache {
 public:
  explicit RecordingKvCache(std::unique_ptr<KvCache> inner);

  const KvGeometry& geometry() const override { return inner_->geometry(); }
  std::string Describe() const override { return "recording(" + inner_->Describe() + ")"; }
  void Reset() override { inner_->Reset(); }  // recordings are kept across requests
  Status Append(int layer, const float* k, const float* v, const int32_t* pos, int n) override;
  Status Attend(int layer, const float* q, const int32_t* q_pos, int n, float* out) override {
    return inner_->Attend(layer, q, q_pos, n, out);
  }
  Status EndBatch(int n, bool is_prefill) override { return inner_->EndBatch(n, is_prefill); }
  KvStats Stats() const override { return inner_->Stats(); }

  const std::vector<float>& keys(int layer, int head) const { return k_[layer][head]; }
  const std::vector<float>& values(int layer, int head) const { return v_[layer][head]; }
  // Ends a request: each (layer, head) recording is cut to a multiple of
  // `chunk` tokens so that K chunks never straddle two requests.
  void CutToChunks(int chunk);

 private:
  std::unique_ptr<KvCache> inner_;
  std::vector<std::vector<std::vector<float>>> k_, v_;  // [layer][kv head] -> tokens x D
};

struct ModelQuantStudyOptions {
  int window = 0;       // tokens per prefill window (0: the model's trained context)
  int max_windows = 4;  // windows of the text studied (consecutive)
  int chunk = 32;       // K chunk (tokens)
  std::vector<int> bits = {4, 2, 1};
};

struct ModelQuantStudy {
  std::string model, text_path;
  int tokens = 0, windows = 0;
  KvGeometry geometry;
  std::vector<QuantStudyResult> k_layers, v_layers;  // per layer
  QuantStudyResult k_all, v_all;                     // every layer together
};

Result<ModelQuantStudy> RunModelQuantStudy(EvalModel& model, const std::string& text,
                                           const std::string& text_path,
                                           const ModelQuantStudyOptions& o);

nlohmann::json ModelQuantStudyJson(const ModelQuantStudy& s);
// Table 1 (Pearson corr(range, loss) per layer and overall, K and V, next to
// the paper's Llama-3.1-8B values) and Table 2 (mean loss uniform vs
// normalized per bit width, K per-channel and V per-token).
std::string ModelQuantStudyTables(const ModelQuantStudy& s);

}  // namespace hqekv::eval
