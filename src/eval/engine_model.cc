#include "eval/engine_model.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/file.h"
#include "core/hash.h"

namespace hqekv::eval {

namespace {

// FNV-1a over the size, the first and last MiB and 64 evenly spaced 4 KiB
// blocks of a file: cheap on multi-GB weights, different for any retrained
// checkpoint (every tensor changes).
std::string FileFingerprint(const std::string& path) {
  if (!RegularFile::Open(path, kMaxMappedFileBytes).ok())
    return "unreadable";  // no FIFO, no device
  std::ifstream f(path, std::ios::binary);
  if (!f) return "unreadable";
  f.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(f.tellg());
  uint64_t h = Fnv1a64(&size, sizeof size);
  std::vector<char> buf;
  auto mix = [&](uint64_t off, uint64_t n) {
    if (off >= size) return;
    n = std::min(n, size - off);
    buf.resize(n);
    f.seekg(static_cast<std::streamoff>(off));
    f.read(buf.data(), static_cast<std::streamsize>(n));
    h = Fnv1a64(buf.data(), static_cast<size_t>(f.gcount()), h);
  };
  mix(0, 1 << 20);
  mix(size > (1u << 20) ? size - (1u << 20) : 0, 1 << 20);
  for (int i = 1; i < 64; ++i) mix(size / 64 * i, 4096);
  char out[20];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

}  // namespace

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
  m->identity_ = m->src_->identity + "-" + FileFingerprint(path);
  return m;
}

std::string EngineModel::Name() const {
  const std::string stem = std::filesystem::path(src_->path).filename().string();
  return stem.empty() ? src_->config.name : stem;
}

std::vector<int32_t> EngineModel::Encode(const std::string& text, bool add_bos) const {
  return src_->tokenizer->Encode(text, add_bos);
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
