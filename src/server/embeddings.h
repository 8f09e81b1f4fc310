// POST /v1/embeddings (OpenAI) and /embedding (llama-server): the model's
// final hidden states (after its last norm) of each input, mean-pooled over
// the input's tokens and L2-normalised, computed under the request's "kv"
// policy (else the server's --kv).
//   {"input": "text" | ["text", ...] | [id, ...] | [[id, ...], ...],
//    "model": ignored, "encoding_format": "float", "kv": SPEC}
//   -> {"object": "list", "data": [{"object": "embedding", "index": i,
//       "embedding": [n_embd floats]}], "model", "usage": {"prompt_tokens",
//       "total_tokens"}}
#pragma once

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/engine.h"

namespace hqekv::server {

inline constexpr int kMaxEmbeddingInputs = 64;  // inputs of one request

// The response body, or false with *err (400 naming the parameter).
bool EmbeddingsResponse(Engine& engine, const nlohmann::json& body, nlohmann::json* out,
                        int* prompt_tokens, ApiError* err);

}  // namespace hqekv::server
