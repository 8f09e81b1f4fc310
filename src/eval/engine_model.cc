#include "eval/engine_model.h"

#include <algorithm>
#include <filesystem>

namespace hqekv::eval {

Result<std::unique_ptr<EngineModel>> EngineModel::Load(const std::string& path, int trained_ctx) {
  auto src = LoadModel(path);
  if (!src.ok()) return src.error();
  auto m = std::unique_ptr<EngineModel>(new EngineModel());
  m->src_ = std::move(src).value();
  auto llama = LlamaModel::Create(*m->src_);
  if (!llama.ok()) return llama.error();
  m->llama_ = std::move(llama).value();
  int ctx = m->src_->config.max_ctx;
  const std::string stem = std::filesystem::path(path).stem().string();
  if (stem.find("stories260K") != std::string::npos) ctx = std::min(ctx, 512);  // see models/SOURCES.md
  if (trained_ctx > 0) ctx = trained_ctx;
  if (ctx <= 0) return MakeError("model '" + path + "' has no context length; pass --ctx");
  m->trained_ctx_ = ctx;
  return m;
}

std::string EngineModel::Name() const {
  const std::string stem = std::filesystem::path(src_->path).filename().string();
  return stem.empty() ? src_->config.name : stem;
}

std::vector<int32_t> EngineModel::Encode(const std::string& text, bool add_bos) const {
  return src_->tokenizer->Encode(text, add_bos);
}

std::string EngineModel::Decode(const std::vector<int32_t>& ids) const { return src_->tokenizer->Decode(ids); }

bool EngineModel::IsEndOfGeneration(int32_t token) const { return src_->tokenizer->IsEndOfGeneration(token); }

Status EngineModel::Forward(KvCache& cache, const int32_t* tokens, int n, int pos0, bool is_prefill,
                            std::vector<float>* logits) {
  pos_.resize(n);
  for (int i = 0; i < n; ++i) pos_[i] = pos0 + i;
  logits->resize(VocabSize());
  return llama_->Forward(tokens, pos_.data(), n, cache, Logits::kLast, logits->data(), is_prefill);
}

}  // namespace hqekv::eval
