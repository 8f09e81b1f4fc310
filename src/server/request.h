// The body of POST /v1/completions, /v1/chat/completions and llama-server's
// native /completion, parsed and checked before anything is queued. Unknown
// fields are ignored (clients send many); a known field of the wrong type or
// out of range is a 400 naming it, and so is every OpenAI / llama-server
// parameter this server does not implement (tools, response_format,
// grammar, suffix, ...: kUnsupportedParams) unless it has its neutral value.
//
// Fields (OpenAI names, llama-server extensions in brackets):
//   prompt (completions: string, [string] of one, token ids [int, ...] or
//   [[int, ...]] of one) | messages (chat:
//   [{role, content}] with content a string or [{type:"text", text}]),
//   max_tokens (1..ctx; [n_predict]), temperature [0, 10], top_p (0, 1],
//   top_k >= 0, min_p [0, 1), seed >= 0, stop (string or up to 4 strings),
//   n 1..kMaxChoices, echo (completions), presence_penalty / frequency_penalty
//   [-2, 2], logit_bias ({"id": bias} with bias [-100, 100], or llama-server's
//   [[id, bias|false], ...]), [repeat_penalty], [repeat_last_n],
//   stream, [ignore_eos], logprobs (completions: 0..20 top entries; chat: bool with
//   top_logprobs 0..20), [n_probs] 0..20, [id_slot] -1..N-1, and the hqekv
//   extension "kv": a policy spec checked with policy::ParseSpec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/sampler.h"
#include "server/api_error.h"
#include "tokenizer/chat_template.h"

namespace hqekv::server {

// Choices one request may ask for (n): each is a sequence of its own.
inline constexpr int kMaxChoices = 16;

// Which route the body came to: the defaults differ (OpenAI's temperature 1
// and no filters; llama-server's /completion: temperature 0.8, top-k 40,
// top-p 0.95, min-p 0.05 as `hqekv run`).
enum class RequestKind { kCompletion, kChat, kNative };

struct RequestLimits {
  int ctx = 0;             // context of every slot: max_tokens may not exceed it
  int max_top_probs = 20;  // logprobs / top_logprobs / n_probs
  int max_stops = 4;
  int n_slots = 1;  // id_slot range
  int vocab = 0;    // token ids of prompts and logit_bias must be below it (0 = unchecked)
};

struct CompletionRequest {
  bool chat = false;
  RequestKind kind = RequestKind::kCompletion;
  std::string prompt;                  // completions
  bool prompt_is_tokens = false;       // the prompt was given as token ids
  std::vector<int32_t> prompt_tokens;  // then: used as they are (no BOS added)
  std::vector<ChatMessage> messages;   // chat
  int max_tokens = 0;                  // 0 = not given (the server's default)
  SamplerConfig sampler;               // temperature defaults to 1 as OpenAI's
  std::vector<std::string> stop;
  bool stream = false;
  bool ignore_eos = false;  // llama-server: generate past end-of-generation tokens
  bool logprobs = false;
  int top_logprobs = 0;  // entries per token besides the chosen one
  std::string kv;        // "" = the server's --kv
  int id_slot = -1;      // -1 = any free slot
  std::string model;     // echoed back
  int n = 1;             // choices (each its own sequence, seed + index)
  bool echo = false;     // completions: the prompt's text before the completion
};

// Returns false and fills *err (status 400) when the body is not a valid
// request.
bool ParseCompletionRequest(const std::string& body, RequestKind kind, const RequestLimits& lim,
                            CompletionRequest* out, ApiError* err);
inline bool ParseCompletionRequest(const std::string& body, bool chat, const RequestLimits& lim,
                                   CompletionRequest* out, ApiError* err) {
  return ParseCompletionRequest(body, chat ? RequestKind::kChat : RequestKind::kCompletion, lim,
                                out, err);
}

// Token ids of a JSON value: [int, ...] or [[int, ...]] of one; false with
// *err (naming `param`) when it is another shape or an id is outside
// [0, vocab) (vocab 0: not checked). Shared by prompts and /detokenize.
bool ReadTokenIds(const nlohmann::json& v, const char* param, int vocab, std::vector<int32_t>* out,
                  ApiError* err);

}  // namespace hqekv::server
