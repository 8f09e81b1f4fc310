// The body of POST /v1/completions and /v1/chat/completions, parsed and
// checked before anything is queued. Unknown fields are ignored (clients send
// many); a known field of the wrong type or out of range is a 400 naming it.
//
// Fields (OpenAI names, llama-server extensions in brackets):
//   prompt (completions: string or [string] of one) | messages (chat:
//   [{role, content}] with content a string or [{type:"text", text}]),
//   max_tokens (1..ctx; [n_predict]), temperature [0, 10], top_p (0, 1],
//   top_k >= 0, min_p [0, 1), seed >= 0, stop (string or up to 4 strings),
//   stream, [ignore_eos], logprobs (completions: 0..20 top entries; chat: bool with
//   top_logprobs 0..20), [n_probs] 0..20, [id_slot] -1..N-1, and the hqekv
//   extension "kv": a policy spec checked with policy::ParseSpec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/sampler.h"
#include "server/api_error.h"
#include "tokenizer/chat_template.h"

namespace hqekv::server {

struct RequestLimits {
  int ctx = 0;             // context of every slot: max_tokens may not exceed it
  int max_top_probs = 20;  // logprobs / top_logprobs / n_probs
  int max_stops = 4;
  int n_slots = 1;  // id_slot range
};

struct CompletionRequest {
  bool chat = false;
  std::string prompt;                 // completions
  std::vector<ChatMessage> messages;  // chat
  int max_tokens = 0;                 // 0 = not given (the server's default)
  SamplerConfig sampler;              // temperature defaults to 1 as OpenAI's
  std::vector<std::string> stop;
  bool stream = false;
  bool ignore_eos = false;  // llama-server: generate past end-of-generation tokens
  bool logprobs = false;
  int top_logprobs = 0;  // entries per token besides the chosen one
  std::string kv;        // "" = the server's --kv
  int id_slot = -1;      // -1 = any free slot
  std::string model;     // echoed back
};

// Returns false and fills *err (status 400) when the body is not a valid
// request.
bool ParseCompletionRequest(const std::string& body, bool chat, const RequestLimits& lim,
                            CompletionRequest* out, ApiError* err);

}  // namespace hqekv::server
