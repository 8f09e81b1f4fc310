#include "server/request.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "policy/spec.h"

namespace hqekv::server {
namespace {

using nlohmann::json;

// Typed readers of an optional field: false (with *err) when the field is
// present with the wrong type or out of [lo, hi].
bool ReadNumber(const json& j, const char* key, double lo, double hi, double* out, ApiError* err) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_number()) {
    *err = BadRequest(std::string("'") + key + "' must be a number", key);
    return false;
  }
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    *err = BadRequest(std::string("'") + key + "' must be in [" + json(lo).dump() + ", " +
                          json(hi).dump() + "], got " + it->dump(),
                      key);
    return false;
  }
  *out = v;
  return true;
}

bool ReadInt(const json& j, const char* key, int64_t lo, int64_t hi, int64_t* out, ApiError* err) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_number_integer()) {
    *err = BadRequest(std::string("'") + key + "' must be an integer", key);
    return false;
  }
  // Unsigned values above int64 are out of range too.
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    *err = BadRequest(
        std::string("'") + key + "' must be at most " + std::to_string(hi) + ", got " + it->dump(),
        key);
    return false;
  }
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    *err = BadRequest(std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "], got " + it->dump(),
                      key);
    return false;
  }
  *out = v;
  return true;
}

bool ReadBool(const json& j, const char* key, bool* out, ApiError* err) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    *err = BadRequest(std::string("'") + key + "' must be true or false", key);
    return false;
  }
  *out = it->get<bool>();
  return true;
}

bool ReadString(const json& j, const char* key, std::string* out, ApiError* err) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_string()) {
    *err = BadRequest(std::string("'") + key + "' must be a string", key);
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

// content: a string, or [{type: "text", text: ...}] parts joined.
bool ReadContent(const json& m, size_t i, std::string* out, ApiError* err) {
  const std::string where = "messages[" + std::to_string(i) + "].content";
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) {
    *err = BadRequest("'" + where + "' is missing", "messages");
    return false;
  }
  if (it->is_string()) {
    *out = it->get<std::string>();
    return true;
  }
  if (!it->is_array()) {
    *err = BadRequest("'" + where + "' must be a string or an array of text parts", "messages");
    return false;
  }
  out->clear();
  for (const json& part : *it) {
    auto t = part.is_object() ? part.find("text") : part.end();
    if (!part.is_object() || part.value("type", "") != "text" || t == part.end() ||
        !t->is_string()) {
      *err = BadRequest("'" + where + "' parts must be {\"type\": \"text\", \"text\": string}",
                        "messages");
      return false;
    }
    *out += t->get<std::string>();
  }
  return true;
}

bool ReadMessages(const json& j, std::vector<ChatMessage>* out, ApiError* err) {
  auto it = j.find("messages");
  if (it == j.end() || !it->is_array() || it->empty()) {
    *err = BadRequest("'messages' must be a non-empty array", "messages");
    return false;
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) {
      *err = BadRequest("'" + where + "' must be an object", "messages");
      return false;
    }
    ChatMessage msg;
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      *err = BadRequest("'" + where + ".role' must be a string", "messages");
      return false;
    }
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant") {
      *err = BadRequest(
          "'" + where + ".role' must be system, user or assistant, got '" + msg.role + "'",
          "messages");
      return false;
    }
    if (!ReadContent(m, i, &msg.content, err)) return false;
    out->push_back(std::move(msg));
  }
  return true;
}

bool ReadPrompt(const json& j, std::string* out, ApiError* err) {
  auto it = j.find("prompt");
  if (it != j.end() && it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    *out = (*it)[0].get<std::string>();
    return true;
  }
  if (it == j.end() || !it->is_string()) {
    *err = BadRequest("'prompt' must be a string (or an array of one string)", "prompt");
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

bool ReadStop(const json& j, int max_stops, std::vector<std::string>* out, ApiError* err) {
  auto it = j.find("stop");
  if (it == j.end() || it->is_null()) return true;
  if (it->is_string()) {
    if (!it->get<std::string>().empty()) out->push_back(it->get<std::string>());
    return true;
  }
  if (!it->is_array() || it->size() > static_cast<size_t>(max_stops)) {
    *err = BadRequest(
        "'stop' must be a string or an array of at most " + std::to_string(max_stops) + " strings",
        "stop");
    return false;
  }
  for (const json& s : *it) {
    if (!s.is_string()) {
      *err = BadRequest("'stop' entries must be strings", "stop");
      return false;
    }
    if (!s.get<std::string>().empty()) out->push_back(s.get<std::string>());
  }
  return true;
}

// logprobs: an integer count (completions), or a bool plus top_logprobs
// (chat); n_probs (llama-server) as a count.
bool ReadLogprobs(const json& j, bool chat, const RequestLimits& lim, CompletionRequest* r,
                  ApiError* err) {
  int64_t n = -1;
  if (chat) {
    if (!ReadBool(j, "logprobs", &r->logprobs, err)) return false;
    if (!ReadInt(j, "top_logprobs", 0, lim.max_top_probs, &n, err)) return false;
  } else {
    if (!ReadInt(j, "logprobs", 0, lim.max_top_probs, &n, err)) return false;
    if (n >= 0) r->logprobs = true;
  }
  int64_t np = -1;
  if (!ReadInt(j, "n_probs", 0, lim.max_top_probs, &np, err)) return false;
  if (np > 0) {
    r->logprobs = true;
    n = std::max(n, np);
  }
  r->top_logprobs = n > 0 ? static_cast<int>(n) : 0;
  return true;
}

}  // namespace

bool ParseCompletionRequest(const std::string& body, bool chat, const RequestLimits& lim,
                            CompletionRequest* out, ApiError* err) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *err = BadRequest("the request body is not valid JSON");
    return false;
  }
  if (!j.is_object()) {
    *err = BadRequest("the request body must be a JSON object");
    return false;
  }
  CompletionRequest r;
  r.chat = chat;
  r.sampler.temperature = 1.0f;  // OpenAI's default
  r.sampler.top_k = 0;
  if (chat ? !ReadMessages(j, &r.messages, err) : !ReadPrompt(j, &r.prompt, err)) return false;
  int64_t max_tokens = 0, n_predict = 0, top_k = 0, seed = 0, id_slot = -1;
  double temperature = r.sampler.temperature, top_p = 1.0, min_p = 0.0;
  const int64_t max_new = std::max(1, lim.ctx);
  if (!ReadInt(j, "max_tokens", 1, max_new, &max_tokens, err) ||
      !ReadInt(j, "max_completion_tokens", 1, max_new, &max_tokens, err) ||
      !ReadInt(j, "n_predict", 1, max_new, &n_predict, err) ||
      !ReadNumber(j, "temperature", 0.0, 10.0, &temperature, err) ||
      !ReadNumber(j, "top_p", 0.0, 1.0, &top_p, err) ||
      !ReadNumber(j, "min_p", 0.0, 1.0, &min_p, err) ||
      !ReadInt(j, "top_k", 0, 1 << 30, &top_k, err) ||
      !ReadInt(j, "seed", 0, INT64_MAX, &seed, err) ||
      !ReadInt(j, "id_slot", -1, lim.n_slots - 1, &id_slot, err) ||
      !ReadBool(j, "stream", &r.stream, err) || !ReadBool(j, "ignore_eos", &r.ignore_eos, err) ||
      !ReadString(j, "kv", &r.kv, err) || !ReadString(j, "model", &r.model, err) ||
      !ReadStop(j, lim.max_stops, &r.stop, err) || !ReadLogprobs(j, chat, lim, &r, err)) {
    return false;
  }
  r.max_tokens = static_cast<int>(max_tokens > 0 ? max_tokens : n_predict);
  r.sampler.temperature = static_cast<float>(temperature);
  r.sampler.top_p = static_cast<float>(top_p);
  r.sampler.min_p = static_cast<float>(min_p);
  r.sampler.top_k = static_cast<int>(top_k);
  r.sampler.seed = static_cast<uint64_t>(seed);
  r.id_slot = static_cast<int>(id_slot);
  if (Status st = ValidateSamplerConfig(r.sampler); !st.ok()) {
    *err = BadRequest(st.message());
    return false;
  }
  if (!r.kv.empty()) {
    auto spec = policy::ParseSpec(r.kv);
    if (!spec.ok()) {
      *err = BadRequest("'kv': " + spec.message(), "kv");
      return false;
    }
  }
  *out = std::move(r);
  return true;
}

std::string ApiError::ToJson() const {
  json e = {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}};
  return json{{"error", e}}.dump();
}

}  // namespace hqekv::server
