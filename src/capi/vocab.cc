// C API: vocabulary entries and GGUF metadata of a model (llama.h's
// llama_token_get_text / llama_model_meta_* in hqekv's buffer convention).
#include <string>

#include "capi/handles.h"
#include "io/gguf.h"

using hqekv::capi::CopyOut;
using hqekv::capi::Fail;
using hqekv::capi::Guard;

namespace {

bool TokenInRange(const hqekv_model* model, int32_t token) {
  return model && token >= 0 && token < model->src->tokenizer->vocab_size();
}

}  // namespace

extern "C" {

hqekv_status hqekv_token_get_text(const hqekv_model* model, int32_t token, char* buf, size_t cap,
                                  size_t* len) {
  return Guard("hqekv_token_get_text", [&] {
    if (!model) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_token_get_text: model is NULL");
    if (!TokenInRange(model, token)) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  "hqekv_token_get_text: token " + std::to_string(token) + " is outside [0, " +
                      std::to_string(model->src->tokenizer->vocab_size()) + ")");
    }
    return CopyOut("hqekv_token_get_text", model->src->tokenizer->Piece(token), buf, cap, len);
  });
}

int hqekv_token_is_control(const hqekv_model* model, int32_t token) {
  return TokenInRange(model, token) && model->src->tokenizer->IsControl(token) ? 1 : 0;
}

int hqekv_model_meta_count(const hqekv_model* model) {
  if (!model || !model->src->gguf) return 0;
  return static_cast<int>(model->src->gguf->metadata.size());
}

hqekv_status hqekv_model_meta_key_by_index(const hqekv_model* model, int i, char* buf, size_t cap,
                                           size_t* len) {
  return Guard("hqekv_model_meta_key_by_index", [&] {
    const int n = hqekv_model_meta_count(model);
    if (!model || i < 0 || i >= n) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_model_meta_key_by_index: index " +
                                                  std::to_string(i) + " is outside [0, " +
                                                  std::to_string(n) + ")");
    }
    return CopyOut("hqekv_model_meta_key_by_index",
                   model->src->gguf->metadata[static_cast<size_t>(i)].first, buf, cap, len);
  });
}

hqekv_status hqekv_model_meta_val_str(const hqekv_model* model, const char* key, char* buf,
                                      size_t cap, size_t* len) {
  return Guard("hqekv_model_meta_val_str", [&] {
    if (!model || !key)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_model_meta_val_str: model or key is NULL");
    const hqekv::GgufValue* v = model->src->gguf ? model->src->gguf->Find(key) : nullptr;
    if (!v) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string("hqekv_model_meta_val_str: key '") + key +
                                                  "' is not in " + model->src->path);
    }
    // Strings as they are; everything else as `hqekv inspect` prints it.
    const std::string text = v->type == hqekv::GgufType::kString ? v->str : v->ToString(8);
    return CopyOut("hqekv_model_meta_val_str", text, buf, cap, len);
  });
}

}  // extern "C"
