// Errors the server returns to a client, in OpenAI's shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// with the HTTP status that goes with them (400 bad request, 401 missing or
// wrong API key, 404 unknown route or slot, 413 body too large, 503 busy).
// llama-server's native routes (/completion, POST /props) answer in its shape:
//   {"error": {"code": <HTTP status>, "message": ..., "type": ...}}
#pragma once

#include <string>

namespace hqekv::server {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // the request field at fault ("" = none)
  std::string code;   // e.g. "context_length_exceeded" ("" = none)

  std::string ToJson() const;       // OpenAI's shape
  std::string ToLlamaJson() const;  // llama-server's shape
};

inline ApiError BadRequest(std::string message, std::string param = "", std::string code = "") {
  return ApiError{400, "invalid_request_error", std::move(message), std::move(param),
                  std::move(code)};
}

}  // namespace hqekv::server
