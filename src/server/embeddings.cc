#include "server/embeddings.h"

#include <string>
#include <vector>

namespace hqekv::server {
namespace {

using nlohmann::json;

// Token ids of one input: a string (tokenized with BOS as a prompt) or an
// array of ids.
bool EmbeddingInputTokens(const Engine& engine, const json& in, std::vector<int32_t>* ids,
                          ApiError* err) {
  const Tokenizer& tok = engine.tokenizer();
  if (in.is_string()) {
    *ids = tok.Encode(in.get<std::string>(), tok.add_bos(), /*parse_special=*/false);
    return true;
  }
  ids->clear();
  const int vocab = engine.limits().vocab;
  for (const json& t : in) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab) {
      *err = BadRequest("'input': token ids must be integers in [0, " + std::to_string(vocab) + ")",
                        "input");
      return false;
    }
    ids->push_back(t.get<int32_t>());
  }
  return true;
}

}  // namespace

bool EmbeddingsResponse(Engine& engine, const json& body, json* out, int* prompt_tokens,
                        ApiError* err) {
  for (const char* k : {"dimensions", "user_embeddings"}) {
    if (body.contains(k)) {
      *err = BadRequest(std::string("'") + k + "' is not supported by this server", k);
      return false;
    }
  }
  if (body.contains("encoding_format") && body["encoding_format"] != "float") {
    *err = BadRequest("'encoding_format' must be \"float\" (base64 is not supported)",
                      "encoding_format");
    return false;
  }
  std::string kv;
  if (body.contains("kv")) {
    if (!body["kv"].is_string()) {
      *err = BadRequest("'kv' must be a string", "kv");
      return false;
    }
    kv = body["kv"].get<std::string>();
  }
  auto it = body.find("input");
  if (it == body.end()) it = body.find("content");  // llama-server's /embedding
  if (it == body.end()) {
    *err = BadRequest("'input' is required", "input");
    return false;
  }
  // One input (a string or one id array) or a list of them.
  std::vector<json> inputs;
  const json& in = *it;
  const bool one_id_array = in.is_array() && !in.empty() && in[0].is_number();
  if (in.is_string() || one_id_array) {
    inputs.push_back(in);
  } else if (in.is_array() && !in.empty()) {
    for (const json& x : in) inputs.push_back(x);
  } else {
    *err = BadRequest("'input' must be a string, an array of strings, or token id arrays", "input");
    return false;
  }
  if (static_cast<int>(inputs.size()) > kMaxEmbeddingInputs) {
    *err = BadRequest("'input' has " + std::to_string(inputs.size()) + " items; at most " +
                          std::to_string(kMaxEmbeddingInputs),
                      "input");
    return false;
  }
  std::vector<std::vector<int32_t>> ids(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].is_string() && !inputs[i].is_array()) {
      *err = BadRequest("'input' item " + std::to_string(i) + " must be a string or token ids",
                        "input");
      return false;
    }
    if (!EmbeddingInputTokens(engine, inputs[i], &ids[i], err)) return false;
  }
  std::vector<std::vector<float>> vectors;
  if (!engine.Embed(ids, kv, &vectors, err)) return false;
  json data = json::array();
  int total = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", vectors[i]}});
    total += static_cast<int>(ids[i].size());
  }
  *prompt_tokens = total;
  *out = {{"object", "list"},
          {"data", data},
          {"model", engine.ModelName()},
          {"usage", {{"prompt_tokens", total}, {"total_tokens", total}}}};
  return true;
}

}  // namespace hqekv::server
