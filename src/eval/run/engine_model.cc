#include "eval/run/engine_model.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "core/file.h"
#include "core/hash.h"

namespace hqekv::eval {

Result<std::string> FileFingerprint(const std::string& path) {
  HQEKV_ASSIGN_OR_RETURN(RegularFile f, RegularFile::Open(path, kMaxMappedFileBytes));
  const uint64_t size = f.size();
  uint64_t h = Fnv1a64(&size, sizeof size);
  std::vector<char> buf;
  auto mix = [&](uint64_t off, uint64_t n) -> Status {
    if (off >= size) return Status::Ok();
    n = std::min(n, size - off);
    buf.resize(n);
    HQEKV_ASSIGN_OR_RETURN(const size_t got, f.ReadAt(off, buf.data(), n));
    h = Fnv1a64(buf.data(), got, h);
    return Status::Ok();
  };
  HQEKV_RETURN_IF_ERROR(mix(0, 1 << 20));
  HQEKV_RETURN_IF_ERROR(mix(size > (1u << 20) ? size - (1u << 20) : 0, 1 << 20));
  for (int i = 1; i < 64; ++i) HQEKV_RETURN_IF_ERROR(mix(size / 64 * i, 4096));
  char out[20];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return std::string(out);
}

Result<std::unique_ptr<EngineModel>> EngineModel::Load(const std::string& path, int trained_ctx) {
  HQEKV_ASSIGN_OR_RETURN(auto src, LoadModel(path));
  auto m = std::unique_ptr<EngineModel>(new EngineModel());
  m->src_ = std::move(src);
  HQEKV_ASSIGN_OR_RETURN(auto llama, LlamaModel::Create(*m->src_));
  m->llama_ = std::move(llama);
  int ctx = m->src_->config.max_ctx;
  const std::string stem = std::filesystem::path(path).stem().string();
  if (stem.find("stories260K") != std::string::npos)
    ctx = std::min(ctx, 512);  // see models/SOURCES.md
  if (trained_ctx > 0) ctx = trained_ctx;
  if (ctx <= 0) return MakeError("model '" + path + "' has no context length; pass --ctx");
  m->trained_ctx_ = ctx;
  HQEKV_ASSIGN_OR_RETURN(const std::string fingerprint, FileFingerprint(path));
  m->identity_ = m->src_->identity + "-" + fingerprint;
  return m;
}

std::string EngineModel::Name() const {
  const std::string stem = std::filesystem::path(src_->path).filename().string();
  return stem.empty() ? src_->config.name : stem;
}

std::vector<int32_t> EngineModel::Encode(const std::string& text, bool add_bos) const {
  // BOS only where the file asks for it (add_bos_token=false on Qwen).
  return src_->tokenizer->Encode(text, add_bos && src_->tokenizer->add_bos());
}

std::string EngineModel::Decode(const std::vector<int32_t>& ids) const {
  return src_->tokenizer->Decode(ids);
}

bool EngineModel::IsEndOfGeneration(int32_t token) const {
  return src_->tokenizer->IsEndOfGeneration(token);
}

Status EngineModel::Forward(KvCache& cache, const int32_t* tokens, int n, int pos0, bool is_prefill,
                            std::vector<float>* logits) {
  pos_.resize(n);
  for (int i = 0; i < n; ++i) pos_[i] = pos0 + i;
  logits->resize(VocabSize());
  return llama_->Forward(tokens, pos_.data(), n, cache, Logits::kLast, logits->data(), is_prefill);
}

}  // namespace hqekv::eval
