// EvalModel over the real engine: a GGUF or llama2.c model loaded by
// io/model_source.h and run by model/llama.h.
#pragma once

#include <memory>
#include <string>

#include "eval/run/eval_model.h"
#include "model/llama.h"
#include "io/model_source.h"

namespace hqekv::eval {

// Hex FNV-1a over the size, the first and last MiB and 64 evenly spaced 4 KiB
// blocks of a file: cheap on multi-GB weights, different for any retrained
// checkpoint (every tensor changes). Reads through the one checked handle
// (RegularFile: no FIFO, no device, no second open of a path that may have
// changed in between).
Result<std::string> FileFingerprint(const std::string& path);

class EngineModel final : public EvalModel {
 public:
  // Loads `path`. trained_ctx > 0 overrides the context the model is trusted
  // with; otherwise the file's context length, except for the bundled
  // stories260K (its GGUF says 2048, it was trained on 512 positions).
  static Result<std::unique_ptr<EngineModel>> Load(const std::string& path, int trained_ctx = 0);

  std::string Name() const override;
  // The model's config identity plus a fingerprint of the weights file, so
  // that a new checkpoint of the same architecture does not reuse cells.
  std::string Identity() const override { return identity_; }
  int VocabSize() const override { return src_->config.vocab_size; }
  int TrainedContext() const override { return trained_ctx_; }
  KvGeometry Geometry(int max_ctx) const override { return llama_->CacheGeometry(max_ctx); }
  std::vector<int32_t> Encode(const std::string& text, bool add_bos) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  bool IsEndOfGeneration(int32_t token) const override;
  Status Forward(KvCache& cache, const int32_t* tokens, int n, int pos0, bool is_prefill,
                 std::vector<float>* logits) override;

  LlamaModel& llama() { return *llama_; }
  const ModelSource& source() const { return *src_; }

 private:
  std::unique_ptr<ModelSource> src_;
  std::unique_ptr<LlamaModel> llama_;
  int trained_ctx_ = 0;
  std::string identity_;
  std::vector<int32_t> pos_;
};

}  // namespace hqekv::eval
