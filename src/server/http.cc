#include "server/http.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <thread>

namespace hqekv::server {
namespace {

using nlohmann::json;

// Token text may end inside a UTF-8 character (byte tokens): invalid bytes
// become U+FFFD instead of an exception.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// a == b in time that depends only on the lengths, not on where the first
// difference is (an API key cannot be guessed byte by byte from timings).
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  // Through a volatile so the compiler cannot stop at the first difference.
  volatile unsigned char v = diff;
  return v == 0;
}

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(e.ToJson(), "application/json");
}

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"kv_bytes", u.kv_bytes},
          {"kv_true_bits", u.kv_true_bits}};
}

// One response being assembled from the engine's events.
struct Reply {
  bool chat = false;
  bool logprobs = false;
  std::string id, model;
  int64_t created = 0;
  std::string text;
  json lp_tokens = json::array(), lp_values = json::array(), lp_top = json::array(),
       lp_content = json::array();

  // Logprobs of some tokens, in the endpoint's shape.
  json LogprobsOf(const std::vector<TokenEvent>& events) const {
    if (!logprobs) return nullptr;
    if (chat) {
      json content = json::array();
      for (const auto& e : events) {
        json top = json::array();
        for (const auto& [t, lp] : e.top) top.push_back({{"token", t}, {"logprob", lp}});
        content.push_back({{"token", e.piece},
                           {"logprob", e.logprob},
                           {"bytes", nullptr},
                           {"top_logprobs", top}});
      }
      return {{"content", content}};
    }
    json tokens = json::array(), values = json::array(), tops = json::array();
    for (const auto& e : events) {
      tokens.push_back(e.piece);
      values.push_back(e.logprob);
      json top = json::object();
      for (const auto& [t, lp] : e.top) top[t] = lp;
      tops.push_back(top);
    }
    return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}};
  }

  json Chunk(const std::vector<TokenEvent>& events, const std::string& delta, bool first,
             const std::optional<FinishEvent>& fin) const {
    json choice = {{"index", 0},
                   {"finish_reason", fin ? json(fin->reason) : json(nullptr)},
                   {"logprobs", LogprobsOf(events)}};
    if (chat) {
      json d = json::object();
      if (first) d["role"] = "assistant";
      if (!delta.empty() || !fin) d["content"] = delta;
      choice["delta"] = d;
    } else {
      choice["text"] = delta;
    }
    json c = {{"id", id},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array({choice})}};
    if (fin) c["usage"] = UsageJson(fin->usage);
    return c;
  }

  json Final(const std::vector<TokenEvent>& events, const FinishEvent& fin) const {
    json choice = {{"index", 0}, {"finish_reason", fin.reason}, {"logprobs", LogprobsOf(events)}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    } else {
      choice["text"] = text;
    }
    return {{"id", id},
            {"object", chat ? "chat.completion" : "text_completion"},
            {"created", created},
            {"model", model},
            {"choices", json::array({choice})},
            {"usage", UsageJson(fin.usage)}};
  }
};

ApiError FinishError(const FinishEvent& f) {
  if (f.reason == "cancelled")
    return ApiError{503, "server_error", f.error.empty() ? "request cancelled" : f.error, "", ""};
  return ApiError{500, "server_error", f.error, "", ""};
}

void HandleCompletion(Engine& engine, bool chat, const httplib::Request& req,
                      httplib::Response& res) {
  static std::atomic<int64_t> next_id{1};
  CompletionRequest r;
  ApiError err;
  if (!ParseCompletionRequest(req.body, chat, engine.limits(), &r, &err))
    return SendError(res, err);
  auto ch = engine.Submit(r, &err);
  if (!ch) return SendError(res, err);
  auto reply = std::make_shared<Reply>();
  reply->chat = chat;
  reply->logprobs = r.logprobs;
  reply->id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
  reply->model = r.model.empty() ? engine.ModelName() : r.model;
  reply->created = static_cast<int64_t>(std::time(nullptr));
  if (!r.stream) {
    std::vector<TokenEvent> events;
    std::optional<FinishEvent> fin;
    while (!fin) ch->Wait(std::chrono::milliseconds(100), &events, &fin);
    if (fin->reason == "cancelled" || fin->reason == "error")
      return SendError(res, FinishError(*fin));
    for (const auto& e : events) reply->text += e.text;
    res.set_content(Dump(reply->Final(events, *fin)), "application/json");
    return;
  }
  auto first = std::make_shared<bool>(true);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [ch, reply, first](size_t, httplib::DataSink& sink) {
        std::vector<TokenEvent> events;
        std::optional<FinishEvent> fin;
        while (events.empty() && !fin) {
          if (!sink.is_writable()) {  // the client went away
            ch->Cancel();
            return false;
          }
          ch->Wait(std::chrono::milliseconds(50), &events, &fin);
        }
        std::string out;
        if (fin && (fin->reason == "error" || fin->reason == "cancelled")) {
          out = "data: " + FinishError(*fin).ToJson() + "\n\n";
        } else {
          std::string delta;
          for (const auto& e : events) delta += e.text;
          out = "data: " + Dump(reply->Chunk(events, delta, *first, fin)) + "\n\n";
          *first = false;
        }
        if (fin) out += "data: [DONE]\n\n";
        if (!sink.write(out.data(), out.size())) {
          ch->Cancel();
          return false;
        }
        if (fin) sink.done();
        return true;
      },
      [ch](bool success) {
        if (!success) ch->Cancel();
      });
}

void HandleSlot(Engine& engine, const httplib::Request& req, httplib::Response& res) {
  const int id = std::stoi(req.matches[1].str());  // at most 6 digits (route pattern)
  const std::string action = req.get_param_value("action");
  const json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object() || !body.contains("filename") ||
      !body["filename"].is_string()) {
    return SendError(res, BadRequest("the body must be {\"filename\": string}", "filename"));
  }
  const std::string name = body["filename"].get<std::string>();
  std::string info;
  ApiError err;
  bool ok = false;
  if (action == "save") {
    ok = engine.SaveSlot(id, name, &info, &err);
  } else if (action == "restore") {
    ok = engine.RestoreSlot(id, name, &info, &err);
  } else {
    err = BadRequest("'action' must be save or restore", "action");
  }
  if (!ok) return SendError(res, err);
  res.set_content(info, "application/json");
}

}  // namespace

Status Serve(Engine& engine, const HttpOptions& o, const std::atomic<bool>* stop,
             const std::function<void(int port)>& on_bound) {
  httplib::Server svr;
  // One worker per slot and queued request, and 4 for /health, /metrics and
  // refusals; never more than kMaxHttpThreads.
  const int threads = std::min(
      kMaxHttpThreads,
      o.threads > 0 ? o.threads : engine.options().n_slots + engine.options().queue_max + 4);
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  svr.set_payload_max_length(o.max_body_bytes);
  // A client that stops sending mid-request frees its worker after this long.
  svr.set_read_timeout(kReadTimeoutSeconds, 0);
  svr.set_write_timeout(kReadTimeoutSeconds, 0);
  svr.set_keep_alive_timeout(kReadTimeoutSeconds);
  const std::string want = "Bearer " + o.api_key;
  svr.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    // No route serves parts of a resource: Range is ignored (RFC 9110 allows
    // it; the whole body, 200). Left in place, httplib would repeat the body
    // once per listed range (/metrics ~700x for one request). The request
    // object is httplib's own non-const one, handed over as const.
    const_cast<httplib::Request&>(req).ranges.clear();
    // Requests with more header fields than any client sends are refused
    // (the parser has read them already: this bounds what a handler sees,
    // not the read).
    if (req.headers.size() > kMaxHeaders) {
      SendError(res,
                ApiError{431, "invalid_request_error",
                         "more than " + std::to_string(kMaxHeaders) + " header fields", "", ""});
      return httplib::Server::HandlerResponse::Handled;
    }
    // A declared body past the limit is refused before any of it is read
    // (httplib would otherwise read and discard all of it first).
    if (req.has_header("Content-Length")) {
      const std::string v = req.get_header_value("Content-Length");
      const bool digits =
          !v.empty() && v.size() <= 19 && v.find_first_not_of("0123456789") == std::string::npos;
      if (!digits || std::stoull(v) > o.max_body_bytes) {
        SendError(res, ApiError{413, "invalid_request_error",
                                "the request body is larger than the server accepts", "", ""});
        res.set_header("Connection", "close");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (o.api_key.empty() || req.path == "/health")
      return httplib::Server::HandlerResponse::Unhandled;
    if (SameSecret(req.get_header_value("Authorization"), want))
      return httplib::Server::HandlerResponse::Unhandled;
    SendError(res, ApiError{401, "authentication_error", "invalid or missing API key", "",
                            "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib raises itself (unknown route, body too large) as JSON too.
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = "HTTP " + std::to_string(res.status);
    if (res.status == 404) msg = "no route " + req.method + " " + req.path;
    if (res.status == 413) msg = "the request body is larger than the server accepts";
    res.set_content(ApiError{res.status, "invalid_request_error", msg, "", ""}.ToJson(),
                    "application/json");
  });
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        SendError(res, ApiError{500, "server_error", "internal error", "", ""});
      });
  svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  svr.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(engine.MetricsText(), "text/plain; version=0.0.4");
  });
  auto models = [&](const httplib::Request&, httplib::Response& res) {
    const json m = {{"id", engine.ModelName()},
                    {"object", "model"},
                    {"created", 0},
                    {"owned_by", "hqekv"},
                    {"meta", {{"n_ctx", engine.options().ctx}, {"kv", engine.options().kv}}}};
    res.set_content(Dump({{"object", "list"}, {"data", json::array({m})}}), "application/json");
  };
  svr.Get("/v1/models", models);
  svr.Get("/models", models);
  for (const char* p : {"/v1/completions", "/completions"})
    svr.Post(p, [&](const httplib::Request& q, httplib::Response& r) {
      HandleCompletion(engine, false, q, r);
    });
  for (const char* p : {"/v1/chat/completions", "/chat/completions"})
    svr.Post(p, [&](const httplib::Request& q, httplib::Response& r) {
      HandleCompletion(engine, true, q, r);
    });
  svr.Post(R"(/slots/(\d{1,6}))",
           [&](const httplib::Request& q, httplib::Response& r) { HandleSlot(engine, q, r); });

  int port = o.port;
  if (o.port == 0) {
    port = svr.bind_to_any_port(o.host);
    if (port <= 0) return MakeError("cannot bind " + o.host + " (any port)");
  } else if (!svr.bind_to_port(o.host, o.port)) {
    return MakeError("cannot bind " + o.host + ":" + std::to_string(o.port) +
                     " (in use, or not an address of this machine)");
  }
  if (on_bound) on_bound(port);
  std::thread listener([&] { svr.listen_after_bind(); });
  while (!stop->load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  engine.Shutdown();  // in-flight requests end as "cancelled"; their handlers return
  svr.stop();
  listener.join();
  return Status::Ok();
}

}  // namespace hqekv::server
