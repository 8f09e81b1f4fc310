// The HTTP front of `hqekv serve` (cpp-httplib): OpenAI-compatible routes
// over an Engine, following llama-server's conventions.
//   POST /v1/completions, /v1/chat/completions   (stream: SSE "data: {...}")
//   POST /completion (llama-server's native form), /tokenize, /detokenize,
//        /apply-template, /v1/embeddings (also /embeddings, /embedding)
//   GET  /v1/models, /health, /metrics (Prometheus text), /props, /slots
//   POST /slots/{id}?action=save|restore|erase   body {"filename": NAME}
//   OPTIONS *                                    CORS preflight
// Every error is OpenAI's JSON error object with its HTTP status.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "server/engine.h"

namespace hqekv::server {

// Most HTTP worker threads (a connection holds one while it is read or
// answered), and how long a silent client keeps one.
inline constexpr int kMaxHttpThreads = 512;  // connections served at once (more: 503)
inline constexpr int kMinHttpThreads = 32;
inline constexpr int kReadTimeoutSeconds = 10;
inline constexpr size_t kMaxHeaders = 100;  // header fields of one request (more: 431)
// A whole request header must arrive within this many seconds of the
// connection's start or its previous response (server/http_limits.h).
inline constexpr int kHeaderTimeoutSeconds = 10;
inline constexpr int kMaxHeaderTimeoutSeconds = 600;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;              // "" = no check
  size_t max_body_bytes = 1 << 20;  // larger bodies: 413
  int threads = 0;  // connections served at once (0: max(32, slots + queue + 4)); more: 503
  bool log_requests = true;                      // one JSON line per request on stderr
  std::string model_path;                        // shown by GET /props
  int header_timeout_s = kHeaderTimeoutSeconds;  // whole header; the body gets 3x
};

// Serves until `*stop` becomes true (checked every 50 ms; SIGTERM sets it in
// `hqekv serve`), then cancels what is in flight and returns. on_bound gets
// the port once bound (o.port 0: a free port the system picked).
Status Serve(Engine& engine, const HttpOptions& o, const std::atomic<bool>* stop,
             const std::function<void(int port)>& on_bound);

}  // namespace hqekv::server
