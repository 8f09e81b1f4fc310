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

bool ReadPrompt(const json& j, int vocab, CompletionRequest* r, ApiError* err) {
  auto it = j.find("prompt");
  if (it != j.end() && it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    r->prompt = (*it)[0].get<std::string>();
    return true;
  }
  if (it != j.end() && it->is_array() && !it->empty() &&
      ((*it)[0].is_number() || (*it)[0].is_array())) {
    r->prompt_is_tokens = true;
    return ReadTokenIds(*it, "prompt", vocab, &r->prompt_tokens, err);
  }
  if (it != j.end() && it->is_array() && it->size() > 1) {
    *err = BadRequest(
        "'prompt' holds " + std::to_string(it->size()) +
            " prompts; this server answers one prompt per request (send one request each)",
        "prompt");
    return false;
  }
  if (it == j.end() || !it->is_string()) {
    *err = BadRequest("'prompt' must be a string, an array of one string, or an array of token ids",
                      "prompt");
    return false;
  }
  r->prompt = it->get<std::string>();
  return true;
}

// logit_bias: OpenAI's {"token id": bias} with bias in [-100, 100], or
// llama-server's [[id, bias], ...] where a bias of false bans the token.
bool ReadLogitBias(const json& j, int vocab, std::vector<std::pair<int32_t, float>>* out,
                   ApiError* err) {
  auto it = j.find("logit_bias");
  if (it == j.end() || it->is_null()) return true;
  auto bad = [&](const std::string& what) {
    *err = BadRequest("'logit_bias': " + what, "logit_bias");
    return false;
  };
  auto add = [&](int64_t id, const json& b) {
    if (id < 0 || (vocab > 0 && id >= vocab))
      return bad("token id " + std::to_string(id) + " is not in [0, " + std::to_string(vocab) +
                 ")");
    if (b.is_boolean() && !b.get<bool>()) {
      out->emplace_back(static_cast<int32_t>(id), kLogitBan);
      return true;
    }
    if (!b.is_number()) return bad("a bias must be a number in [-100, 100] (or false: banned)");
    const double v = b.get<double>();
    if (!(v >= -100 && v <= 100)) return bad("a bias must be in [-100, 100], got " + b.dump());
    out->emplace_back(static_cast<int32_t>(id), static_cast<float>(v));
    return true;
  };
  if (it->is_object()) {
    for (auto kv = it->begin(); kv != it->end(); ++kv) {
      const std::string& key = kv.key();
      if (key.empty() || key.size() > 10 || key.find_first_not_of("0123456789") != key.npos)
        return bad("keys must be token ids (decimal strings), got '" + key + "'");
      if (!add(std::stoll(key), kv.value())) return false;
    }
    return true;
  }
  if (it->is_array()) {
    for (const json& e : *it) {
      if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer())
        return bad("entries must be [token id, bias]");
      if (!add(e[0].get<int64_t>(), e[1])) return false;
    }
    return true;
  }
  return bad("must be an object {\"token id\": bias} or an array of [token id, bias]");
}

// OpenAI and llama-server parameters this server does not implement: a
// request that sets one to anything but its neutral value is refused with a
// 400 naming it (silently ignoring `tools` or `response_format` would answer
// a different question than the one asked).
struct UnsupportedParam {
  const char* name;
  const char* why;
  bool (*neutral)(const json& v);
};

bool IsNullOrEmpty(const json& v) {
  return v.is_null() || (v.is_array() && v.empty()) ||
         (v.is_string() && v.get<std::string>().empty()) || (v.is_object() && v.empty());
}

const UnsupportedParam kUnsupportedParams[] = {
    {"tools", "tool calls are not implemented", IsNullOrEmpty},
    {"functions", "function calls are not implemented", IsNullOrEmpty},
    {"tool_choice", "tool calls are not implemented",
     [](const json& v) { return v.is_null() || v == "none"; }},
    {"function_call", "function calls are not implemented",
     [](const json& v) { return v.is_null() || v == "none"; }},
    {"response_format", "only {\"type\": \"text\"} is implemented (no JSON mode or schema)",
     [](const json& v) { return v.is_null() || (v.is_object() && v.value("type", "") == "text"); }},
    {"grammar", "grammars are not implemented", IsNullOrEmpty},
    {"json_schema", "JSON schemas are not implemented", IsNullOrEmpty},
    {"suffix", "insertion (suffix) is not implemented", IsNullOrEmpty},
    {"input_extra", "infill is not implemented", IsNullOrEmpty},
    {"audio", "audio output is not implemented", IsNullOrEmpty},
    {"modalities", "only text output is implemented",
     [](const json& v) { return IsNullOrEmpty(v) || v == json::array({"text"}); }},
    {"prediction", "predicted outputs are not implemented", IsNullOrEmpty},
    {"image_data", "images are not implemented", IsNullOrEmpty},
    {"multimodal_data", "images and audio are not implemented", IsNullOrEmpty},
    {"lora", "LoRA adapters are not implemented", IsNullOrEmpty},
    {"samplers", "the sampler order is fixed (model/sampler.h)", IsNullOrEmpty},
    {"web_search_options", "web search is not implemented", IsNullOrEmpty},
    {"reasoning_effort", "reasoning control is not implemented", IsNullOrEmpty},
    {"mirostat", "mirostat is not implemented",
     [](const json& v) { return v.is_null() || v == 0; }},
    {"typical_p", "typical sampling is not implemented",
     [](const json& v) { return v.is_null() || v == 1; }},
    {"tfs_z", "tail-free sampling is not implemented",
     [](const json& v) { return v.is_null() || v == 1; }},
    {"dry_multiplier", "DRY sampling is not implemented",
     [](const json& v) { return v.is_null() || v == 0; }},
    {"xtc_probability", "XTC sampling is not implemented",
     [](const json& v) { return v.is_null() || v == 0; }},
};

bool RefuseUnsupported(const json& j, ApiError* err) {
  for (const UnsupportedParam& p : kUnsupportedParams) {
    auto it = j.find(p.name);
    if (it == j.end() || p.neutral(*it)) continue;
    *err = BadRequest(std::string("'") + p.name + "' is not supported by this server: " + p.why,
                      p.name, "unsupported_parameter");
    return true;
  }
  return false;
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

bool ReadTokenIds(const json& v, const char* param, int vocab, std::vector<int32_t>* out,
                  ApiError* err) {
  const json* ids = &v;
  if (v.is_array() && v.size() == 1 && v[0].is_array()) ids = &v[0];
  if (!ids->is_array()) {
    *err = BadRequest(std::string("'") + param + "' must be an array of token ids", param);
    return false;
  }
  out->clear();
  for (const json& t : *ids) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        (vocab > 0 && t.get<int64_t>() >= vocab)) {
      *err = BadRequest(std::string("'") + param + "' token ids must be integers in [0, " +
                            std::to_string(vocab) + "), got " + t.dump(),
                        param);
      return false;
    }
    out->push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return true;
}

bool ParseCompletionRequest(const std::string& body, RequestKind kind, const RequestLimits& lim,
                            CompletionRequest* out, ApiError* err) {
  const bool chat = kind == RequestKind::kChat;
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *err = BadRequest("the request body is not valid JSON");
    return false;
  }
  if (!j.is_object()) {
    *err = BadRequest("the request body must be a JSON object");
    return false;
  }
  if (RefuseUnsupported(j, err)) return false;
  CompletionRequest r;
  r.chat = chat;
  r.kind = kind;
  if (kind == RequestKind::kNative) {
    r.sampler = kRunSamplerDefaults;
  } else {
    r.sampler.temperature = 1.0f;  // OpenAI's default
    r.sampler.top_k = 0;
  }
  if (chat ? !ReadMessages(j, &r.messages, err) : !ReadPrompt(j, lim.vocab, &r, err)) return false;
  int64_t max_tokens = 0, n_predict = 0, top_k = r.sampler.top_k, seed = 0, id_slot = -1, n = 1,
          best_of = 0, repeat_last_n = r.sampler.repeat_last_n;
  double temperature = r.sampler.temperature, top_p = r.sampler.top_p, min_p = r.sampler.min_p,
         presence = 0, frequency = 0, repeat_penalty = 1.0;
  const int64_t max_new = std::max(1, lim.ctx);
  if (!ReadInt(j, "max_tokens", 1, max_new, &max_tokens, err) ||
      !ReadInt(j, "max_completion_tokens", 1, max_new, &max_tokens, err) ||
      // llama-server: -1 = until the end of generation or the context (the
      // server's --max-tokens here).
      !ReadInt(j, "n_predict", -1, max_new, &n_predict, err) ||
      !ReadNumber(j, "temperature", 0.0, 10.0, &temperature, err) ||
      !ReadNumber(j, "top_p", 0.0, 1.0, &top_p, err) ||
      !ReadNumber(j, "min_p", 0.0, 1.0, &min_p, err) ||
      !ReadInt(j, "top_k", 0, 1 << 30, &top_k, err) ||
      !ReadInt(j, "seed", 0, INT64_MAX, &seed, err) ||
      !ReadInt(j, "id_slot", -1, lim.n_slots - 1, &id_slot, err) ||
      !ReadInt(j, "n", 1, kMaxChoices, &n, err) ||
      !ReadInt(j, "best_of", 1, kMaxChoices, &best_of, err) ||
      !ReadNumber(j, "presence_penalty", -2.0, 2.0, &presence, err) ||
      !ReadNumber(j, "frequency_penalty", -2.0, 2.0, &frequency, err) ||
      !ReadNumber(j, "repeat_penalty", 0.01, 10.0, &repeat_penalty, err) ||
      !ReadInt(j, "repeat_last_n", 0, max_new, &repeat_last_n, err) ||
      !ReadBool(j, "stream", &r.stream, err) || !ReadBool(j, "ignore_eos", &r.ignore_eos, err) ||
      !ReadBool(j, "echo", &r.echo, err) || !ReadString(j, "kv", &r.kv, err) ||
      !ReadString(j, "model", &r.model, err) || !ReadStop(j, lim.max_stops, &r.stop, err) ||
      !ReadLogprobs(j, chat, lim, &r, err) ||
      !ReadLogitBias(j, lim.vocab, &r.sampler.logit_bias, err)) {
    return false;
  }
  if (best_of > 0 && best_of != n) {
    *err = BadRequest("'best_of' other than n is not supported (no ranking of extra samples)",
                      "best_of", "unsupported_parameter");
    return false;
  }
  if (n > 1 && id_slot >= 0) {
    *err = BadRequest("'n' > 1 needs a sequence per choice; it cannot be pinned to one 'id_slot'",
                      "n");
    return false;
  }
  if (r.echo && chat) {
    *err = BadRequest("'echo' is a completions parameter (chat answers hold no prompt)", "echo",
                      "unsupported_parameter");
    return false;
  }
  if (r.echo && r.logprobs) {
    *err = BadRequest("'echo' with 'logprobs' (the prompt's logprobs) is not supported", "echo",
                      "unsupported_parameter");
    return false;
  }
  r.max_tokens = static_cast<int>(max_tokens > 0 ? max_tokens : std::max<int64_t>(n_predict, 0));
  r.n = static_cast<int>(n);
  r.sampler.temperature = static_cast<float>(temperature);
  r.sampler.top_p = static_cast<float>(top_p);
  r.sampler.min_p = static_cast<float>(min_p);
  r.sampler.top_k = static_cast<int>(top_k);
  r.sampler.seed = static_cast<uint64_t>(seed);
  r.sampler.presence_penalty = static_cast<float>(presence);
  r.sampler.frequency_penalty = static_cast<float>(frequency);
  r.sampler.repeat_penalty = static_cast<float>(repeat_penalty);
  r.sampler.repeat_last_n = static_cast<int>(repeat_last_n);
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

std::string ApiError::ToLlamaJson() const {
  return json{{"error", {{"code", status}, {"message", message}, {"type", type}}}}.dump();
}

}  // namespace hqekv::server
