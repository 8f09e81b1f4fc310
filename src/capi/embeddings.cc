// C API: hidden-state embeddings of the last decode (hqekv_context_set_embeddings,
// hqekv_get_embeddings_ith, hqekv_get_embeddings_seq).
#include <string>
#include <vector>

#include "capi/handles.h"
#include "model/embedding_pool.h"

using hqekv::capi::Fail;
using hqekv::capi::Guard;

namespace {

// Row i (i < 0: from the end) of the last decode's embeddings, or a failure.
hqekv_status EmbeddingRow(const char* fn, const hqekv_context* ctx, int i, const float** row) {
  if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": ctx is NULL");
  const int n = static_cast<int>(ctx->embd_seq.size());
  if (n == 0) {
    return Fail(HQEKV_ERR_STATE, std::string(fn) +
                                     ": no embeddings (turn them on with "
                                     "hqekv_context_set_embeddings, then decode)");
  }
  const int j = i < 0 ? n + i : i;
  if (j < 0 || j >= n) {
    return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": index " + std::to_string(i) +
                                                " is outside the last batch of " +
                                                std::to_string(n) + " tokens");
  }
  *row = ctx->embd.data() + static_cast<size_t>(j) * ctx->src->config.d_model;
  return HQEKV_OK;
}

}  // namespace

extern "C" {

hqekv_status hqekv_context_set_embeddings(hqekv_context* ctx, int enable) {
  return Guard("hqekv_context_set_embeddings", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_set_embeddings: ctx is NULL");
    ctx->embeddings_on = enable != 0;
    return HQEKV_OK;
  });
}

hqekv_status hqekv_get_embeddings_ith(const hqekv_context* ctx, int i, const float** embd,
                                      int* n_embd) {
  return Guard("hqekv_get_embeddings_ith", [&] {
    if (!embd || !n_embd)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_get_embeddings_ith: embd or n_embd is NULL");
    const hqekv_status st = EmbeddingRow("hqekv_get_embeddings_ith", ctx, i, embd);
    if (st != HQEKV_OK) return st;
    *n_embd = ctx->src->config.d_model;
    return HQEKV_OK;
  });
}

hqekv_status hqekv_get_embeddings_seq(const hqekv_context* ctx, hqekv_seq_id seq, int pooling,
                                      int normalize, float* out, size_t cap) {
  return Guard("hqekv_get_embeddings_seq", [&] {
    const char* fn = "hqekv_get_embeddings_seq";
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": ctx is NULL");
    if (!out) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": out is NULL");
    const size_t d = static_cast<size_t>(ctx->src->config.d_model);
    if (cap < d) {
      return Fail(HQEKV_ERR_BUFFER_TOO_SMALL, std::string(fn) + ": out needs " + std::to_string(d) +
                                                  " floats, cap is " + std::to_string(cap));
    }
    if (pooling != HQEKV_POOLING_MEAN && pooling != HQEKV_POOLING_LAST &&
        pooling != HQEKV_POOLING_FIRST) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": unknown pooling " +
                                                  std::to_string(pooling) +
                                                  " (HQEKV_POOLING_MEAN, _LAST or _FIRST)");
    }
    if (ctx->embd_seq.empty()) {
      return Fail(HQEKV_ERR_STATE, std::string(fn) +
                                       ": no embeddings (turn them on with "
                                       "hqekv_context_set_embeddings, then decode)");
    }
    std::vector<size_t> rows;
    for (size_t i = 0; i < ctx->embd_seq.size(); ++i) {
      if (ctx->embd_seq[i] == seq) rows.push_back(i);
    }
    if (rows.empty()) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": sequence " +
                                                  std::to_string(seq) +
                                                  " has no token in the last batch");
    }
    if (pooling != HQEKV_POOLING_MEAN)
      rows = {pooling == HQEKV_POOLING_LAST ? rows.back() : rows.front()};
    hqekv::PoolEmbedding(ctx->embd.data(), d, rows.data(), rows.size(), normalize != 0, out);
    return HQEKV_OK;
  });
}

}  // extern "C"
