// C API: models (load, metadata, tokenize / detokenize).
#include <string>
#include <string_view>
#include <vector>

#include "capi/handles.h"
#include "core/log.h"
#include "io/model_source.h"
#include "tokenizer/tokenizer.h"

using hqekv::capi::Fail;
using hqekv::capi::Guard;

extern "C" {

hqekv_status hqekv_model_load(const char* path, const char* tokenizer_path, hqekv_model** out) {
  return Guard("hqekv_model_load", [&] {
    if (!out) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_model_load: out is NULL");
    *out = nullptr;
    if (!path || !*path)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_model_load: path is NULL or empty");
    auto src = hqekv::LoadModel(path, tokenizer_path ? tokenizer_path : "");
    if (!src.ok()) return Fail(HQEKV_ERR_LOAD, "hqekv_model_load: " + src.message());
    auto m = std::make_unique<hqekv_model>();
    m->src = std::shared_ptr<const hqekv::ModelSource>(std::move(*src));
    if (hqekv::LogEnabled()) {
      const hqekv::ModelConfig& c = m->src->config;
      hqekv::Log(hqekv::LogLevel::kInfo,
                 std::string("loaded ") + path + ": " + c.arch + ", " + std::to_string(c.n_layers) +
                     " layers, d_model " + std::to_string(c.d_model) + ", " +
                     std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) + " heads of " +
                     std::to_string(c.head_dim) + ", vocab " + std::to_string(c.vocab_size) +
                     ", context " + std::to_string(c.max_ctx) + ", " +
                     std::to_string(m->src->ParameterCount()) + " parameters");
    }
    *out = m.release();
    return HQEKV_OK;
  });
}

void hqekv_model_free(hqekv_model* model) { delete model; }

#define HQEKV_MODEL_GETTER(type, name, none, expr) \
  type hqekv_model_##name(const hqekv_model* model) { return model ? (expr) : (none); }

HQEKV_MODEL_GETTER(const char*, name, "", model->src->config.name.c_str())
HQEKV_MODEL_GETTER(const char*, arch, "", model->src->config.arch.c_str())
HQEKV_MODEL_GETTER(const char*, identity, "", model->src->identity.c_str())
HQEKV_MODEL_GETTER(int, n_vocab, 0, model->src->config.vocab_size)
HQEKV_MODEL_GETTER(int, n_layers, 0, model->src->config.n_layers)
HQEKV_MODEL_GETTER(int, n_embd, 0, model->src->config.d_model)
HQEKV_MODEL_GETTER(int, n_heads, 0, model->src->config.n_heads)
HQEKV_MODEL_GETTER(int, n_kv_heads, 0, model->src->config.n_kv_heads)
HQEKV_MODEL_GETTER(int, head_dim, 0, model->src->config.head_dim)
HQEKV_MODEL_GETTER(int, n_ctx_train, 0, model->src->config.max_ctx)
HQEKV_MODEL_GETTER(int64_t, n_params, 0, model->src->ParameterCount())
HQEKV_MODEL_GETTER(int32_t, bos, -1, model->src->tokenizer->bos())
HQEKV_MODEL_GETTER(int32_t, eos, -1, model->src->tokenizer->eos())
HQEKV_MODEL_GETTER(int, add_bos, 0, model->src->tokenizer->add_bos() ? 1 : 0)
#undef HQEKV_MODEL_GETTER

int hqekv_model_is_eog(const hqekv_model* model, int32_t token) {
  return model && model->src->tokenizer->IsEndOfGeneration(token) ? 1 : 0;
}

hqekv_status hqekv_tokenize(const hqekv_model* model, const char* text, size_t text_len,
                            int add_bos, int parse_special, int32_t* tokens, size_t cap,
                            size_t* n_tokens) {
  return Guard("hqekv_tokenize", [&] {
    if (!model) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_tokenize: model is NULL");
    if (!text) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_tokenize: text is NULL");
    if (!n_tokens) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_tokenize: n_tokens is NULL");
    if (cap > 0 && !tokens)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_tokenize: tokens is NULL but cap > 0");
    const std::string_view sv = text_len == static_cast<size_t>(-1)
                                    ? std::string_view(text)
                                    : std::string_view(text, text_len);
    const std::vector<int32_t> ids =
        model->src->tokenizer->Encode(sv, add_bos != 0, parse_special != 0);
    *n_tokens = ids.size();
    if (ids.size() > cap) {
      return Fail(HQEKV_ERR_BUFFER_TOO_SMALL, "hqekv_tokenize: the text has " +
                                                  std::to_string(ids.size()) + " tokens, cap is " +
                                                  std::to_string(cap));
    }
    std::copy(ids.begin(), ids.end(), tokens);
    return HQEKV_OK;
  });
}

hqekv_status hqekv_detokenize(const hqekv_model* model, const int32_t* tokens, size_t n,
                              int32_t prev, char* buf, size_t cap, size_t* len) {
  return Guard("hqekv_detokenize", [&] {
    if (!model) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_detokenize: model is NULL");
    if (n > 0 && !tokens)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_detokenize: tokens is NULL but n > 0");
    const hqekv::Tokenizer& tok = *model->src->tokenizer;
    const int32_t vocab = tok.vocab_size();
    if (prev < -1 || prev >= vocab) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_detokenize: prev " + std::to_string(prev) +
                                                  " is outside [-1, " + std::to_string(vocab) +
                                                  ")");
    }
    std::string text;
    for (size_t i = 0; i < n; ++i) {
      if (tokens[i] < 0 || tokens[i] >= vocab) {
        return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                    "hqekv_detokenize: token " + std::to_string(tokens[i]) + " at index " +
                        std::to_string(i) + " is outside [0, " + std::to_string(vocab) + ")");
      }
      text += tok.DecodePiece(prev, tokens[i]);
      prev = tokens[i];
    }
    return hqekv::capi::CopyOut("hqekv_detokenize", text, buf, cap, len);
  });
}

}  // extern "C"
