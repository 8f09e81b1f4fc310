#include "server/http.h"
#include "server/http_limits.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "server/embeddings.h"

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

void SendError(httplib::Response& res, const ApiError& e, bool llama_shape = false) {
  res.status = e.status;
  if (e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(llama_shape ? e.ToLlamaJson() : e.ToJson(), "application/json");
}

json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"kv_store_bytes", u.kv_store_bytes},
          {"kv_bytes", u.kv_bytes},
          {"kv_true_bits", u.kv_true_bits}};
}

// What the request log records of the request a worker thread is serving
// (one worker serves one request at a time, from the pre-routing handler to
// the logger, streamed bodies included).
struct RequestTrace {
  std::chrono::steady_clock::time_point start{};
  int prompt_tokens = -1, completion_tokens = -1;
};
thread_local RequestTrace tl_trace;
// True on the threads that serve connections past the connection cap: they
// answer 503 (all but /health) instead of queueing behind slow clients.
thread_local bool tl_overflow = false;

void TraceTokens(const Usage& u) {
  tl_trace.prompt_tokens = std::max(tl_trace.prompt_tokens, 0) + u.prompt_tokens;
  tl_trace.completion_tokens = std::max(tl_trace.completion_tokens, 0) + u.completion_tokens;
}

// One response being assembled from the engine's events, for n choices.
struct Reply {
  RequestKind kind = RequestKind::kCompletion;
  bool logprobs = false;
  bool return_tokens = false;  // /completion: the token ids too
  std::string id, model;
  std::string echo;  // completions with echo: the prompt's text, before each choice's text
  int64_t created = 0;
  bool chat() const { return kind == RequestKind::kChat; }

  // Logprobs of some tokens, in the endpoint's shape.
  json LogprobsOf(const std::vector<TokenEvent>& events) const {
    if (!logprobs) return nullptr;
    if (kind == RequestKind::kNative) {  // llama-server's completion_probabilities
      json probs = json::array();
      for (const auto& e : events) {
        if (e.id < 0) continue;
        json top = json::array();
        for (const auto& [t, lp] : e.top) top.push_back({{"token", t}, {"logprob", lp}});
        probs.push_back(
            {{"id", e.id}, {"token", e.piece}, {"logprob", e.logprob}, {"top_logprobs", top}});
      }
      return probs;
    }
    if (chat()) {
      json content = json::array();
      for (const auto& e : events) {
        if (e.id < 0) continue;
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
      if (e.id < 0) continue;
      tokens.push_back(e.piece);
      values.push_back(e.logprob);
      json top = json::object();
      for (const auto& [t, lp] : e.top) top[t] = lp;
      tops.push_back(top);
    }
    return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}};
  }

  static std::string TextOf(const std::vector<TokenEvent>& events) {
    std::string t;
    for (const auto& e : events) t += e.text;
    return t;
  }

  // llama-server's /completion object (a stream chunk when !fin).
  json Native(const std::vector<TokenEvent>& events, const std::string& content,
              const std::optional<FinishEvent>& fin) const {
    json c = {{"content", content}, {"stop", fin.has_value()}, {"model", model}};
    json ids = json::array();
    if (return_tokens)
      for (const auto& e : events)
        if (e.id >= 0) ids.push_back(e.id);
    c["tokens"] = ids;
    if (logprobs) c["completion_probabilities"] = LogprobsOf(events);
    if (!fin) return c;
    const Usage& u = fin->usage;
    c["id_slot"] = fin->id_slot;
    c["stop_type"] = fin->reason == "length" ? "limit" : !fin->stop_word.empty() ? "word" : "eos";
    c["stopping_word"] = fin->stop_word;
    c["tokens_predicted"] = u.completion_tokens;
    c["tokens_evaluated"] = u.prompt_tokens;
    c["tokens_cached"] = u.cached_tokens;
    c["kv_store_bytes"] = u.kv_store_bytes;
    c["truncated"] = false;
    c["timings"] = {
        {"prompt_n", u.prompt_tokens - u.cached_tokens},
        {"prompt_ms", u.prompt_ms},
        {"prompt_per_second",
         u.prompt_ms > 0 ? (u.prompt_tokens - u.cached_tokens) * 1000.0 / u.prompt_ms : 0.0},
        {"predicted_n", u.completion_tokens},
        {"predicted_ms", u.predicted_ms},
        {"predicted_per_second",
         u.predicted_ms > 0 ? u.completion_tokens * 1000.0 / u.predicted_ms : 0.0}};
    c["kv_bytes"] = u.kv_bytes;
    c["kv_true_bits"] = u.kv_true_bits;
    return c;
  }

  json Choice(int index, const std::vector<TokenEvent>& events, const std::string& text,
              const std::optional<FinishEvent>& fin, bool stream, bool first) const {
    json choice = {{"index", index},
                   {"finish_reason", fin ? json(fin->reason) : json(nullptr)},
                   {"logprobs", LogprobsOf(events)}};
    if (chat() && stream) {
      json d = json::object();
      if (first) d["role"] = "assistant";
      if (!text.empty() || !fin) d["content"] = text;
      choice["delta"] = d;
    } else if (chat()) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    } else {
      choice["text"] = text;
    }
    return choice;
  }

  json Envelope(json choices, bool stream) const {
    return {{"id", id},
            {"object",
             chat() ? (stream ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
            {"created", created},
            {"model", model},
            {"choices", std::move(choices)}};
  }
};

json UsageSum(const std::vector<Usage>& us) {
  // OpenAI counts the prompt once for n choices and sums the completions.
  Usage t;
  for (const Usage& u : us) {
    t.prompt_tokens = u.prompt_tokens;
    t.completion_tokens += u.completion_tokens;
    t.cached_tokens = std::max(t.cached_tokens, u.cached_tokens);
    t.kv_bytes += u.kv_bytes;
    t.kv_store_bytes = std::max(t.kv_store_bytes, u.kv_store_bytes);
    t.kv_true_bits = u.kv_true_bits;
  }
  json j = UsageJson(t);
  if (us.size() > 1) j["kv_true_bits"] = nullptr;  // per sequence: see each
  return j;
}

ApiError FinishError(const FinishEvent& f) {
  if (f.reason == "cancelled")
    return ApiError{503, "server_error", f.error.empty() ? "request cancelled" : f.error, "", ""};
  return ApiError{500, "server_error", f.error, "", ""};
}

// The n sequences of one request, choice i under seed + i.
struct Choices {
  std::vector<std::shared_ptr<RequestChannel>> ch;
  std::vector<std::vector<TokenEvent>> events;  // not yet sent (stream) / all (plain)
  std::vector<std::optional<FinishEvent>> fin;
  std::vector<bool> sent_fin, first;
  void CancelAll() {
    for (auto& c : ch) c->Cancel();
  }
  bool AllDone() const {
    for (bool b : sent_fin)
      if (!b) return false;
    return true;
  }
};

bool SubmitChoices(Engine& engine, const CompletionRequest& r, Choices* c, ApiError* err) {
  for (int i = 0; i < r.n; ++i) {
    CompletionRequest ri = r;
    ri.sampler.seed = r.sampler.seed + static_cast<uint64_t>(i);
    auto ch = engine.Submit(ri, err);
    if (!ch) {
      c->CancelAll();
      return false;
    }
    c->ch.push_back(std::move(ch));
  }
  c->events.resize(r.n);
  c->fin.resize(r.n);
  c->sent_fin.assign(r.n, false);
  c->first.assign(r.n, true);
  return true;
}

void HandleCompletion(Engine& engine, RequestKind kind, const httplib::Request& req,
                      httplib::Response& res) {
  static std::atomic<int64_t> next_id{1};
  CompletionRequest r;
  ApiError err;
  const bool native = kind == RequestKind::kNative;  // llama-server's error shape
  if (!ParseCompletionRequest(req.body, kind, engine.limits(), &r, &err))
    return SendError(res, err, native);
  auto c = std::make_shared<Choices>();
  if (!SubmitChoices(engine, r, c.get(), &err)) return SendError(res, err, native);
  if (!c->ch[0]->prefix_hash.empty())  // for prefix-aware routing (docs/scale-out.md)
    res.set_header("X-Hqekv-Prefix-Hash", c->ch[0]->prefix_hash);
  auto reply = std::make_shared<Reply>();
  reply->kind = kind;
  reply->logprobs = r.logprobs;
  {
    const json j = json::parse(req.body, nullptr, false);
    reply->return_tokens = j.is_object() && j.value("return_tokens", false) == true;
  }
  reply->id = (kind == RequestKind::kChat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
  reply->model = r.model.empty() ? engine.ModelName() : r.model;
  reply->created = static_cast<int64_t>(std::time(nullptr));
  if (r.echo)
    reply->echo = r.prompt_is_tokens ? engine.tokenizer().Decode(r.prompt_tokens) : r.prompt;
  if (!r.stream) {
    for (size_t i = 0; i < c->ch.size(); ++i) {
      while (!c->fin[i]) {
        c->ch[i]->Wait(std::chrono::milliseconds(100), &c->events[i], &c->fin[i]);
        // Nobody will read the answer: stop generating it (499 is what the
        // request log shows, as nginx logs a client that closed first).
        if (!c->fin[i] && CurrentClientGone()) {
          c->CancelAll();
          res.status = 499;
          return;
        }
      }
      if (c->fin[i]->reason == "cancelled" || c->fin[i]->reason == "error") {
        c->CancelAll();
        return SendError(res, FinishError(*c->fin[i]), native);
      }
    }
    std::vector<Usage> us;
    json choices = json::array();
    for (size_t i = 0; i < c->ch.size(); ++i) {
      us.push_back(c->fin[i]->usage);
      TraceTokens(c->fin[i]->usage);
      const std::string text = reply->echo + Reply::TextOf(c->events[i]);
      choices.push_back(
          reply->Choice(static_cast<int>(i), c->events[i], text, c->fin[i], false, false));
    }
    json out;
    if (kind == RequestKind::kNative) {
      out = reply->Native(c->events[0], Reply::TextOf(c->events[0]), c->fin[0]);
      if (r.n > 1) {  // llama-server has no n: the other choices as an array
        json more = json::array();
        for (size_t i = 1; i < c->ch.size(); ++i)
          more.push_back(reply->Native(c->events[i], Reply::TextOf(c->events[i]), c->fin[i]));
        out["choices"] = more;
      }
    } else {
      out = reply->Envelope(std::move(choices), false);
      out["usage"] = UsageSum(us);
    }
    res.set_content(Dump(out), "application/json");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  auto us = std::make_shared<std::vector<Usage>>();
  res.set_chunked_content_provider(
      "text/event-stream",
      [c, reply, us](size_t, httplib::DataSink& sink) {
        // Wait until some choice has news.
        bool any = false;
        while (!any) {
          if (!sink.is_writable()) {  // the client went away
            c->CancelAll();
            return false;
          }
          for (size_t i = 0; i < c->ch.size(); ++i) {
            if (c->sent_fin[i]) continue;
            const auto wait = std::chrono::milliseconds(c->ch.size() == 1 ? 50 : 5);
            c->ch[i]->Wait(wait, &c->events[i], &c->fin[i]);
            any = any || !c->events[i].empty() || c->fin[i].has_value();
          }
        }
        std::string out;
        for (size_t i = 0; i < c->ch.size(); ++i) {
          if (c->sent_fin[i] || (c->events[i].empty() && !c->fin[i])) continue;
          const auto& fin = c->fin[i];
          if (fin && (fin->reason == "error" || fin->reason == "cancelled")) {
            const ApiError e = FinishError(*fin);
            out += "data: " + (reply->kind == RequestKind::kNative ? e.ToLlamaJson() : e.ToJson()) +
                   "\n\n";
            c->CancelAll();
            for (size_t k = 0; k < c->ch.size(); ++k) c->sent_fin[k] = true;
            break;
          }
          std::string text = Reply::TextOf(c->events[i]);
          if (c->first[i]) text = reply->echo + text;
          json chunk;
          if (reply->kind == RequestKind::kNative) {
            chunk = reply->Native(c->events[i], text, fin);
            if (c->ch.size() > 1) chunk["index"] = i;
          } else {
            chunk = reply->Envelope(json::array({reply->Choice(static_cast<int>(i), c->events[i],
                                                               text, fin, true, c->first[i])}),
                                    true);
          }
          c->first[i] = false;
          c->events[i].clear();
          if (fin) {
            c->sent_fin[i] = true;
            us->push_back(fin->usage);
            TraceTokens(fin->usage);
            if (reply->kind != RequestKind::kNative && c->AllDone()) chunk["usage"] = UsageSum(*us);
          }
          out += "data: " + Dump(chunk) + "\n\n";
        }
        const bool done = c->AllDone();
        // OpenAI's stream ends with [DONE]; llama-server's /completion with
        // the chunk that says "stop": true.
        if (done && reply->kind != RequestKind::kNative) out += "data: [DONE]\n\n";
        if (!sink.write(out.data(), out.size())) {
          c->CancelAll();
          return false;
        }
        if (done) sink.done();
        return true;
      },
      [c](bool success) {
        if (!success) c->CancelAll();
      });
}

// A JSON object body, or a 400.
bool ObjectBody(const httplib::Request& req, json* out, httplib::Response& res) {
  *out = json::parse(req.body, nullptr, false);
  if (out->is_discarded() || !out->is_object()) {
    SendError(res, BadRequest("the request body must be a JSON object"));
    return false;
  }
  return true;
}

// POST /tokenize {"content", "add_special" (false), "parse_special" (true),
// "with_pieces" (false)} -> {"tokens": [id, ...] or [{"id", "piece"}, ...]}.
void HandleTokenize(Engine& engine, const httplib::Request& req, httplib::Response& res) {
  json j;
  if (!ObjectBody(req, &j, res)) return;
  auto it = j.find("content");
  if (it == j.end() || !it->is_string())
    return SendError(res, BadRequest("'content' must be a string", "content"));
  for (const char* k : {"add_special", "parse_special", "with_pieces"})
    if (j.contains(k) && !j[k].is_boolean())
      return SendError(res, BadRequest(std::string("'") + k + "' must be true or false", k));
  const Tokenizer& tok = engine.tokenizer();
  const std::vector<int32_t> ids =
      tok.Encode(it->get<std::string>(), j.value("add_special", false) && tok.add_bos(),
                 j.value("parse_special", true));
  json tokens = json::array();
  int32_t prev = tok.bos();
  for (int32_t t : ids) {
    if (j.value("with_pieces", false))
      tokens.push_back({{"id", t}, {"piece", tok.DecodePiece(prev, t)}});
    else
      tokens.push_back(t);
    prev = t;
  }
  tl_trace.prompt_tokens = static_cast<int>(ids.size());
  res.set_content(Dump({{"tokens", tokens}}), "application/json");
}

// POST /detokenize {"tokens": [id, ...]} -> {"content": text}.
void HandleDetokenize(Engine& engine, const httplib::Request& req, httplib::Response& res) {
  json j;
  if (!ObjectBody(req, &j, res)) return;
  std::vector<int32_t> ids;
  ApiError err;
  if (!j.contains("tokens") ||
      !ReadTokenIds(j["tokens"], "tokens", engine.tokenizer().vocab_size(), &ids, &err))
    return SendError(res, j.contains("tokens") ? err
                                               : BadRequest("'tokens' must be an array of token "
                                                            "ids",
                                                            "tokens"));
  res.set_content(Dump({{"content", engine.tokenizer().Decode(ids)}}), "application/json");
}

// POST /apply-template {"messages": [...]} -> {"prompt": the chat template's text}.
void HandleApplyTemplate(Engine& engine, const httplib::Request& req, httplib::Response& res) {
  CompletionRequest r;
  ApiError err;
  if (!ParseCompletionRequest(req.body, RequestKind::kChat, engine.limits(), &r, &err))
    return SendError(res, err);
  res.set_content(Dump({{"prompt", engine.RenderChatPrompt(r.messages)}}), "application/json");
}

void HandleProps(Engine& engine, const HttpOptions& o, httplib::Response& res) {
  const EngineOptions& eo = engine.options();
  const json params = {
      {"n_predict", eo.default_max_tokens}, {"temperature", kRunSamplerDefaults.temperature},
      {"top_k", kRunSamplerDefaults.top_k}, {"top_p", kRunSamplerDefaults.top_p},
      {"min_p", kRunSamplerDefaults.min_p}, {"kv", eo.kv}};
  const json props = {{"default_generation_settings", {{"n_ctx", eo.ctx}, {"params", params}}},
                      {"total_slots", eo.n_slots},
                      {"model_path", o.model_path},
                      {"model_alias", engine.ModelName()},
                      {"chat_template", engine.ChatTemplateName()},
                      {"n_vocab", engine.tokenizer().vocab_size()},
                      {"kv", eo.kv},
                      {"kv_budget_bytes", eo.kv_budget_bytes},
                      {"build_info", "hqekv"}};
  res.set_content(Dump(props), "application/json");
}

void HandleSlotsList(Engine& engine, httplib::Response& res) {
  json out = json::array();
  for (const Engine::SlotInfo& s : engine.Slots()) {
    out.push_back({{"id", s.id},
                   {"n_ctx", engine.options().ctx},
                   {"is_processing", s.busy},
                   {"kv", s.spec.empty() ? json(nullptr) : json(s.spec)},
                   {"n_cached", s.n_cached},
                   {"kv_bytes", s.kv_bytes},
                   {"n_prompt_tokens", s.n_prompt},
                   {"n_decoded", s.n_generated}});
  }
  res.set_content(Dump(out), "application/json");
}

void HandleSlot(Engine& engine, const httplib::Request& req, httplib::Response& res) {
  const int id = std::stoi(req.matches[1].str());  // at most 6 digits (route pattern)
  const std::string action = req.get_param_value("action");
  ApiError err;
  if (action == "erase") {
    int n = 0;
    if (!engine.EraseSlot(id, &n, &err)) return SendError(res, err);
    res.set_content(Dump({{"id_slot", id}, {"n_erased", n}}), "application/json");
    return;
  }
  if (action != "save" && action != "restore")
    return SendError(res, BadRequest("'action' must be save, restore or erase", "action"));
  const json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object() || !body.contains("filename") ||
      !body["filename"].is_string()) {
    return SendError(res, BadRequest("the body must be {\"filename\": string}", "filename"));
  }
  const std::string name = body["filename"].get<std::string>();
  std::string info;
  const bool ok = action == "save" ? engine.SaveSlot(id, name, &info, &err)
                                   : engine.RestoreSlot(id, name, &info, &err);
  if (!ok) return SendError(res, err);
  res.set_content(info, "application/json");
}

// The connections httplib hands over, each served by a thread of its own up
// to `cap` (a slow client holds only its own thread); past the cap they go
// to kOverflowThreads threads that answer 503 to everything but /health.
// httplib's own ThreadPool queues connections behind busy workers without
// bound, so slow clients there starve /health. Every connection, overflow
// ones too, is watched by `watch` (deadlines for its header and body).
class ConnectionQueue : public httplib::TaskQueue {
 public:
  static constexpr int kOverflowThreads = 4;

  ConnectionQueue(int cap, ConnectionWatch* watch) : cap_(cap), watch_(watch) {
    for (int i = 0; i < kOverflowThreads; ++i)
      overflow_threads_.emplace_back([this] {
        tl_overflow = true;
        Work(overflow_jobs_);
      });
  }
  ~ConnectionQueue() override { shutdown(); }

  void enqueue(std::function<void()> task) override {
    // On the listener thread, right after the accept (see Identify).
    std::string peer;
    const int64_t id = watch_->Identify(&peer);
    std::unique_lock<std::mutex> l(mu_);
    // One client address may hold at most 3/4 of the threads, so others
    // still find one while it keeps many slow connections open.
    const int per_peer = std::max(1, cap_ - std::max(1, cap_ / 4));
    const bool main = busy_ < cap_ && per_peer_[peer] < per_peer;
    std::function<void()> fn = [this, id, main, peer, task = std::move(task)] {
      watch_->Begin(id);
      task();
      watch_->End();
      if (!main) return;
      std::lock_guard<std::mutex> g(mu_);
      if (--per_peer_[peer] == 0) per_peer_.erase(peer);
    };
    if (main) {
      ++busy_;
      ++per_peer_[peer];
      jobs_.push_back(std::move(fn));
      // A thread for every connection no waiting thread will take (at most
      // cap_ threads: each one not waiting serves a counted connection).
      if (jobs_.size() > static_cast<size_t>(idle_)) threads_.emplace_back([this] { Work(jobs_); });
    } else {
      overflow_jobs_.push_back(std::move(fn));
    }
    cv_.notify_all();
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) return;
      stop_ = true;
      cv_.notify_all();
    }
    for (auto& t : threads_) t.join();
    for (auto& t : overflow_threads_) t.join();
  }

 private:
  void Work(std::deque<std::function<void()>>& q) {
    const bool main = &q == &jobs_;
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> l(mu_);
        if (main) ++idle_;
        cv_.wait(l, [&] { return stop_ || !q.empty(); });
        if (main) --idle_;
        if (q.empty()) return;  // stopping, nothing left
        fn = std::move(q.front());
        q.pop_front();
      }
      fn();
      if (main) {
        std::lock_guard<std::mutex> l(mu_);
        --busy_;
      }
    }
  }

  const int cap_;
  ConnectionWatch* const watch_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_, overflow_jobs_;
  std::vector<std::thread> threads_, overflow_threads_;
  int busy_ = 0;                         // connections given to the main threads, not finished
  std::map<std::string, int> per_peer_;  // of busy_, by client address
  int idle_ = 0;                         // main threads waiting for a connection
  bool stop_ = false;
};

void LogRequest(const httplib::Request& req, const httplib::Response& res) {
  const auto now = std::chrono::steady_clock::now();
  json line = {{"event", "request"},   {"time", static_cast<int64_t>(std::time(nullptr))},
               {"method", req.method}, {"path", req.path},
               {"status", res.status}, {"remote", req.remote_addr}};
  if (tl_trace.start != std::chrono::steady_clock::time_point{})
    line["ms"] =
        std::round(std::chrono::duration<double, std::milli>(now - tl_trace.start).count() * 10) /
        10;
  if (tl_trace.prompt_tokens >= 0) line["prompt_tokens"] = tl_trace.prompt_tokens;
  if (tl_trace.completion_tokens >= 0) line["completion_tokens"] = tl_trace.completion_tokens;
  tl_trace = RequestTrace{};
  const std::string s = Dump(line) + "\n";
  std::fwrite(s.data(), 1, s.size(), stderr);  // one write per line: lines do not interleave
}

}  // namespace

Status Serve(Engine& engine, const HttpOptions& o, const std::atomic<bool>* stop,
             const std::function<void(int port)>& on_bound) {
  httplib::Server svr;
  // Connections served at once: one per slot and queued request and 4 for
  // /health, /metrics and refusals, at least kMinHttpThreads (idle
  // keep-alive clients hold one each), never more than kMaxHttpThreads.
  const int threads = std::min(
      kMaxHttpThreads,
      o.threads > 0
          ? o.threads
          : std::max(kMinHttpThreads, engine.options().n_slots + engine.options().queue_max + 4));
  // Created once the port is bound (it finds connections by their local port).
  std::unique_ptr<ConnectionWatch> watch;
  svr.new_task_queue = [threads, &watch] { return new ConnectionQueue(threads, watch.get()); };
  // httplib's default socket options add SO_REUSEPORT, with which a second
  // server binds the same port and the kernel splits connections between
  // them: SO_REUSEADDR only (restart over TIME_WAIT), so a busy port fails.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // Called after every response written: the connection's next header is due.
  svr.set_logger([log = o.log_requests](const httplib::Request& req, const httplib::Response& res) {
    ConnectionWatch::ResponseDone();
    if (log) LogRequest(req, res);
  });
  // Browsers (CORS): every answer may be read by any origin; preflights
  // (OPTIONS) are answered without the API key, as llama-server does.
  svr.set_default_headers({{"Access-Control-Allow-Origin", "*"}});
  svr.Options(R"(.*)", [](const httplib::Request&, httplib::Response& res) {
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
    res.set_header("Access-Control-Max-Age", "86400");
  });
  svr.set_payload_max_length(o.max_body_bytes);
  // A client that stops sending mid-request frees its worker after this long.
  svr.set_read_timeout(kReadTimeoutSeconds, 0);
  svr.set_write_timeout(kReadTimeoutSeconds, 0);
  svr.set_keep_alive_timeout(kReadTimeoutSeconds);
  const std::string want = "Bearer " + o.api_key;
  svr.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    // The header is complete: the body's deadline starts, or none when the
    // request has no body.
    // (httplib reads a body for POST, PUT and PATCH only.)
    ConnectionWatch::HeaderDone(
        (req.method == "POST" || req.method == "PUT" || req.method == "PATCH") &&
        (req.has_header("Transfer-Encoding") ||
         (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0")));
    tl_trace = RequestTrace{};
    tl_trace.start = std::chrono::steady_clock::now();
    if (tl_overflow && req.path != "/health") {
      SendError(res, ApiError{503, "server_error",
                              "too many connections (" + std::to_string(threads) +
                                  " served at once); retry later",
                              "", ""});
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
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
    // Bodies are JSON whatever the Content-Type says (as llama-server):
    // curl -d sends application/x-www-form-urlencoded, which httplib would
    // parse as a form and refuse past 8 KiB with a misleading 413. A
    // multipart body is no JSON document: 415.
    if (req.method == "POST") {
      auto& headers = const_cast<httplib::Request&>(req).headers;
      const std::string ct = req.get_header_value("Content-Type");
      if (ct.rfind("multipart/", 0) == 0) {
        SendError(res, ApiError{415, "invalid_request_error",
                                "the body must be JSON (Content-Type: application/json), got " + ct,
                                "", ""});
        return httplib::Server::HandlerResponse::Handled;
      }
      if (ct.find("json") == std::string::npos) {
        headers.erase("Content-Type");
        headers.emplace("Content-Type", "application/json");
      }
      // A request with neither Content-Length nor Transfer-Encoding has an
      // empty body (RFC 9112 6.3); httplib 0.11 would read until the client
      // closes (`curl -X POST .../slots/0?action=erase` waited for the 10 s
      // read timeout, then got 400).
      if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding"))
        headers.emplace("Content-Length", "0");
    }
    if (o.api_key.empty() || req.path == "/health" || req.method == "OPTIONS")
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
  // Every POST route goes through `post`: its handler first ends the body's
  // deadline (a route registered with svr.Post directly would have its
  // connection closed body_deadline after the header, mid-answer).
  auto post = [&svr](const std::string& pattern, httplib::Server::Handler h) {
    svr.Post(pattern, [h = std::move(h)](const httplib::Request& q, httplib::Response& r) {
      ConnectionWatch::Serving();
      h(q, r);
    });
  };
  svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  svr.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    std::string text = engine.MetricsText();
    if (watch) {  // connections the watchdog closed, by cause
      const ConnectionLimitCounters c = watch->Counters();
      text +=
          "# HELP hqekv_http_connections_closed_total Connections closed for a limit: a header "
          "or body past its deadline, a header flood.\n"
          "# TYPE hqekv_http_connections_closed_total counter\n";
      for (const auto& [cause, n] :
           {std::pair<const char*, int64_t>{"header_deadline", c.header_deadline},
            {"body_deadline", c.body_deadline},
            {"header_bytes", c.header_bytes}})
        text += std::string("hqekv_http_connections_closed_total{cause=\"") + cause + "\"} " +
                std::to_string(n) + "\n";
      text +=
          "# HELP hqekv_http_connections_unwatched_total Connections served without "
          "deadlines (their descriptor was not found).\n"
          "# TYPE hqekv_http_connections_unwatched_total counter\n"
          "hqekv_http_connections_unwatched_total " +
          std::to_string(c.unidentified) + "\n";
    }
    res.set_content(text, "text/plain; version=0.0.4");
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
    post(p, [&](const httplib::Request& q, httplib::Response& r) {
      HandleCompletion(engine, RequestKind::kCompletion, q, r);
    });
  for (const char* p : {"/v1/chat/completions", "/chat/completions"})
    post(p, [&](const httplib::Request& q, httplib::Response& r) {
      HandleCompletion(engine, RequestKind::kChat, q, r);
    });
  post("/completion", [&](const httplib::Request& q, httplib::Response& r) {
    HandleCompletion(engine, RequestKind::kNative, q, r);
  });
  post("/tokenize",
       [&](const httplib::Request& q, httplib::Response& r) { HandleTokenize(engine, q, r); });
  post("/detokenize",
       [&](const httplib::Request& q, httplib::Response& r) { HandleDetokenize(engine, q, r); });
  post("/apply-template",
       [&](const httplib::Request& q, httplib::Response& r) { HandleApplyTemplate(engine, q, r); });
  svr.Get("/props",
          [&](const httplib::Request&, httplib::Response& r) { HandleProps(engine, o, r); });
  // llama-server changes nothing on POST /props either (only with --props does
  // it answer {"success": true}); here the properties are read-only, said
  // with llama-server's own status and shape for a disabled endpoint.
  post("/props", [](const httplib::Request&, httplib::Response& r) {
    SendError(r,
              ApiError{501, "not_supported_error",
                       "this server's properties are read-only: GET /props reads them, the "
                       "command line sets them",
                       "", ""},
              /*llama_shape=*/true);
  });
  svr.Get("/slots",
          [&](const httplib::Request&, httplib::Response& r) { HandleSlotsList(engine, r); });
  for (const char* p : {"/v1/embeddings", "/embeddings", "/embedding"})
    post(p, [&](const httplib::Request& q, httplib::Response& r) {
      json j, body;
      if (!ObjectBody(q, &j, r)) return;
      ApiError e;
      if (!EmbeddingsResponse(engine, j, &body, &tl_trace.prompt_tokens, &e))
        return SendError(r, e);
      r.set_content(Dump(body), "application/json");
    });
  // llama-server / OpenAI routes this server does not have: a clear 501
  // instead of "no route".
  for (const char* p : {"/infill", "/rerank", "/v1/rerank"})
    post(p, [](const httplib::Request& q, httplib::Response& r) {
      SendError(r, ApiError{501, "not_supported_error",
                            q.path + " is not implemented by this server (text generation only)",
                            "", ""});
    });
  post(R"(/slots/(\d{1,6}))",
       [&](const httplib::Request& q, httplib::Response& r) { HandleSlot(engine, q, r); });

  int port = o.port;
  if (o.port == 0) {
    port = svr.bind_to_any_port(o.host);
    if (port <= 0) return MakeError("cannot bind " + o.host + " (any port)");
  } else if (!svr.bind_to_port(o.host, o.port)) {
    return MakeError("cannot bind " + o.host + ":" + std::to_string(o.port) +
                     " (in use, or not an address of this machine)");
  }
  ConnectionLimits limits;
  limits.header_deadline = std::chrono::seconds(o.header_timeout_s);
  limits.body_deadline = std::chrono::seconds(3 * o.header_timeout_s);
  watch = std::make_unique<ConnectionWatch>(port, limits);
  if (on_bound) on_bound(port);
  std::thread listener([&] { svr.listen_after_bind(); });
  while (!stop->load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  engine.Shutdown();  // in-flight requests end as "cancelled"; their handlers return
  svr.stop();
  listener.join();
  return Status::Ok();
}

}  // namespace hqekv::server
