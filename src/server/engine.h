// The serving engine: N slots (sequences) over one model, driven by one
// scheduler thread (continuous batching). Each step prefills the requests
// that just joined (one Forward each) and then decodes one token for every
// active slot in ONE LlamaModel::ForwardMany (the weights are read once per
// step for all of them). Requests join between steps; each slot has its own
// cache and policy ("kv" of the request, else --kv).
//
// Admission by true KV bytes: a request reserves the bytes its policy holds
// for prompt + max_tokens positions (measured once per policy on a probe
// cache, linear in the tokens, +10%); the sum of reservations never exceeds
// the budget (--kv-budget-mb; 0 = no cap). A request that does not fit now
// waits in a bounded queue; when the queue is full the caller answers 503
// (Retry-After). A cancelled request (client gone) frees its slot at the next
// step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "io/model_file.h"
#include "kvtier/tier.h"
#include "model/llama.h"
#include "server/api_error.h"
#include "server/request.h"
#include "tokenizer/chat_template.h"

namespace hqekv::server {

// Bounds of every count the server takes from its flags (checked by
// Engine::Create before any thread starts; docs/server.md lists them).
inline constexpr int kMaxSlots = 256;              // -np
inline constexpr int kMaxQueue = 1024;             // --queue
inline constexpr int kMaxDefaultTokens = 1 << 20;  // --max-tokens
inline constexpr int kMaxProbedSpecs = 32;         // distinct "kv" specs whose size is cached

struct EngineOptions {
  int n_slots = 1;
  int ctx = 0;  // positions per slot (0: min(model context, 4096))
  std::string kv = "fp16";
  int64_t kv_budget_bytes = 0;  // 0 = no cap
  int queue_max = 64;           // waiting requests before 503
  int default_max_tokens = 256;
  std::string chat_template;   // "" = the model's, else chatml
  std::string slot_save_path;  // "" = slot save/restore disabled
  // Profiles a request may name ("kv":"hqekv:profile=NAME": DIR/NAME, or
  // DIR/NAME.json). "" = requests may not name a profile; a path is never
  // taken from a client.
  std::string profile_dir;
  // The shared KV tier (docs/scale-out.md): "" = none, else dir:PATH or
  // redis://HOST:PORT[/prefix]. Prompts are cut into blocks of
  // kv_store_block tokens; the state after each whole block is stored.
  std::string kv_store;
  kvtier::TierOptions kv_store_options;
  int kv_store_block = 256;
};

// What the engine has done, for /metrics and tests (a copy under the lock).
struct EngineCounters {
  int64_t requests = 0, rejected = 0, prompt_tokens = 0, generated_tokens = 0;
  double decode_seconds = 0;  // wall time of decode steps
  int64_t decode_steps = 0, decode_rows = 0;
  int64_t kv_bytes_held = 0, kv_kept_elements = 0, kv_bytes_peak = 0, kv_reserved = 0;
  int64_t kv_reserved_peak = 0;  // largest sum of reservations of requests served together
  int slots_busy = 0;
  int slots_busy_peak = 0;
  // Prompt tokens run through a prefill forward (a restored or reused
  // slot state skips its cached tokens: "compress once, ask many").
  int64_t prompt_tokens_evaluated = 0;
  // The shared KV tier: prompt tokens loaded from it, entries refused
  // (corrupt, foreign, colliding), entries published / dropped because the
  // publisher's queue was full.
  int64_t tier_tokens_loaded = 0, tier_entries_rejected = 0;
  int64_t tier_entries_queued = 0, tier_entries_dropped = 0;
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;       // prompt tokens taken from the slot's cache (not run again)
  int64_t kv_store_bytes = 0;  // bytes fetched from the shared KV tier for this request
  int64_t kv_bytes = 0;
  double kv_true_bits = 0;
  double prompt_ms = 0;     // prefill of the prompt (0 when it came from the cache)
  double predicted_ms = 0;  // from the end of the prefill to the end of the request
};

struct TokenEvent {
  std::string text;   // text released by this token (may be empty: held back for stop strings)
  std::string piece;  // the token's own text
  int32_t id = -1;    // the token
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // most likely tokens, with logprobs
};

struct FinishEvent {
  std::string reason;  // "stop", "length", "cancelled", "error"
  Usage usage;
  std::string error;      // reason "error"
  std::string stop_word;  // the stop string that ended generation ("" for any other end)
  int id_slot = -1;       // the slot that served the request
};

// From the scheduler to the HTTP thread of one request.
class RequestChannel {
 public:
  void Push(TokenEvent e);
  void Finish(FinishEvent f);
  // Waits up to `timeout` for news; moves what arrived into *tokens and
  // *finish. True when something arrived.
  bool Wait(std::chrono::milliseconds timeout, std::vector<TokenEvent>* tokens,
            std::optional<FinishEvent>* finish);
  void Cancel() { cancelled_ = true; }
  // The key of the prompt's first block (hex; "" when the prompt is shorter
  // than a block): the server echoes it in X-Hqekv-Prefix-Hash for routing.
  std::string prefix_hash;
  bool cancelled() const { return cancelled_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<TokenEvent> tokens_;
  std::optional<FinishEvent> finish_;
  std::atomic<bool> cancelled_{false};
};

class Engine {
 public:
  // `src` must outlive the engine. Starts the scheduler thread.
  static Result<std::unique_ptr<Engine>> Create(const ModelSource& src, const EngineOptions& o);
  ~Engine();

  // Tokenizes and checks the request (context, kv spec, budget) and queues
  // it; nullptr with *err (400, or 503 when the queue is full) otherwise.
  std::shared_ptr<RequestChannel> Submit(const CompletionRequest& req, ApiError* err);

  // Saves / restores slot `id`'s cache (idle slot) to / from
  // slot_save_path/filename; *info gets the file's size and the bytes held.
  bool SaveSlot(int id, const std::string& filename, std::string* info, ApiError* err);
  bool RestoreSlot(int id, const std::string& filename, std::string* info, ApiError* err);

  // Mean-pooled, L2-normalised final hidden states [n_embd] of each input
  // (token ids, 1..ctx each) under policy `kv` ("" = --kv), computed
  // between scheduler steps. False with *err (400) otherwise.
  bool Embed(const std::vector<std::vector<int32_t>>& inputs, const std::string& kv,
             std::vector<std::vector<float>>* out, ApiError* err);
  // Empties an idle slot's cache (llama-server's action=erase); *n_erased
  // gets the tokens it held. 404 unknown slot, 409 busy.
  bool EraseSlot(int id, int* n_erased, ApiError* err);

  // What GET /slots shows of one slot.
  struct SlotInfo {
    int id = 0;
    bool busy = false;
    std::string spec;                   // the cache's policy ("" = no cache)
    int n_cached = 0;                   // tokens the cache holds
    int64_t kv_bytes = 0;               // true bytes it holds
    int n_prompt = 0, n_generated = 0;  // of the request being served
  };
  // Taken between scheduler steps (waits for the current one).
  std::vector<SlotInfo> Slots();

  // The prompt a chat request becomes (the model's chat template).
  std::string RenderChatPrompt(const std::vector<ChatMessage>& messages) const;
  const char* ChatTemplateName() const;
  const Tokenizer& tokenizer() const { return *src_.tokenizer; }

  std::string MetricsText() const;
  EngineCounters Counters() const;
  // Bytes a request of `tokens` positions under `spec` (canonical) reserves;
  // -1 with *err when the spec cannot make a cache.
  int64_t ReservationBytes(const std::string& spec, int tokens, ApiError* err);
  std::string ModelName() const;
  const EngineOptions& options() const { return o_; }
  RequestLimits limits() const;  // includes the vocabulary size
  // Cancels every request (in flight and queued) and stops the scheduler.
  void Shutdown();

 private:
  struct Job;
  struct Slot;
  struct Probe;
  Engine(const ModelSource& src, const EngineOptions& o);
  void Loop();
  void Step();
  void Admit();  // under mu_
  // The request's policy spec, canonical; a profile named by the client is
  // looked up in profile_dir. False with *err (400) otherwise.
  bool ResolveSpec(const std::string& kv, std::string* spec, ApiError* err) const;
  void AccountHeld();  // under step_mu_: kv_bytes_held and friends from the slots' caches
  bool Prefill(Slot& s);
  void Emit(Slot& s);  // samples from s.logits; finishes or leaves a pending token
  void Release(Slot& s, const std::string& reason, const std::string& error = "",
               const std::string& stop_word = "");
  bool SlotFile(int id, const std::string& filename, std::string* path, ApiError* err);
  // The shared KV tier (engine_tier.cc). TierLookup runs in Submit, outside
  // the engine's locks: the longest stored block prefix of the prompt.
  // TierRestore loads it into the slot (0 tokens on a miss or a refused
  // entry); TierForward runs the rest of the prompt block by block and
  // queues the state after each whole block for the publisher thread.
  void TierLookup(Job& job);
  size_t TierRestore(Slot& s);
  Status TierForward(Slot& s, size_t reuse, bool publish);
  void TierPublishLoop();
  std::string TierMetricsText() const;  // under mu_

  const ModelSource& src_;
  EngineOptions o_;
  std::unique_ptr<LlamaModel> model_;
  ChatFormat chat_format_ = ChatFormat::kChatML;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::deque<std::shared_ptr<Job>> queue_;
  // Cached per-spec probes, oldest first, at most kMaxProbedSpecs. Probing
  // runs a full-context fill: under probe_mu_ only, never under mu_, so
  // /metrics, other submissions and the scheduler do not wait for it.
  std::deque<std::unique_ptr<Probe>> probes_;
  std::mutex probe_mu_;
  mutable std::mutex mu_;  // queue_, slot assignment, reservations, metrics
  std::mutex step_mu_;     // held by a step and by slot save / restore
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;

  EngineCounters m_;  // under mu_

  std::unique_ptr<kvtier::KvTier> tier_;
  std::deque<std::pair<std::string, std::string>> tier_queue_;  // key, entry; under tier_mu_
  int64_t tier_queue_bytes_ = 0;
  bool tier_stop_ = false;
  std::mutex tier_mu_;
  std::condition_variable tier_cv_;
  std::thread tier_thread_;
};

}  // namespace hqekv::server
