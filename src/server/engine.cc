#include "server/engine.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "cache/kv_state.h"
#include "core/file.h"
#include "core/xoshiro.h"
#include "io/mmap_file.h"
#include "lm/logprob.h"
#include "model/generate_step.h"
#include "model/sampler.h"
#include "policy/factory.h"
#include "server/engine_state.h"
#include "tokenizer/stop_text.h"

namespace hqekv::server {

using Clock = std::chrono::steady_clock;

void RequestChannel::Push(TokenEvent e) {
  std::lock_guard<std::mutex> l(mu_);
  tokens_.push_back(std::move(e));
  cv_.notify_all();
}

void RequestChannel::Finish(FinishEvent f) {
  std::lock_guard<std::mutex> l(mu_);
  finish_ = std::move(f);
  cv_.notify_all();
}

bool RequestChannel::Wait(std::chrono::milliseconds timeout, std::vector<TokenEvent>* tokens,
                          std::optional<FinishEvent>* finish) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, timeout, [&] { return !tokens_.empty() || finish_.has_value(); });
  const bool any = !tokens_.empty() || finish_.has_value();
  for (auto& t : tokens_) tokens->push_back(std::move(t));
  tokens_.clear();
  if (finish_) *finish = std::move(finish_);
  finish_.reset();
  return any;
}

Engine::Engine(const ModelSource& src, const EngineOptions& o) : src_(src), o_(o) {}

Result<std::unique_ptr<Engine>> Engine::Create(const ModelSource& src, const EngineOptions& o) {
  if (o.n_slots < 1 || o.n_slots > kMaxSlots)
    return MakeError("-np must be in [1, " + std::to_string(kMaxSlots) + "], got " +
                     std::to_string(o.n_slots));
  if (o.queue_max < 0 || o.queue_max > kMaxQueue)
    return MakeError("--queue must be in [0, " + std::to_string(kMaxQueue) + "], got " +
                     std::to_string(o.queue_max));
  if (o.default_max_tokens < 1 || o.default_max_tokens > kMaxDefaultTokens)
    return MakeError("--max-tokens must be in [1, " + std::to_string(kMaxDefaultTokens) +
                     "], got " + std::to_string(o.default_max_tokens));
  if (o.kv_budget_bytes < 0) return MakeError("--kv-budget-mb must be >= 0 (0 = no cap)");
  if (!o.profile_dir.empty() && !std::filesystem::is_directory(o.profile_dir))
    return MakeError("--profile-dir " + o.profile_dir + " is not a directory");
  std::unique_ptr<Engine> e(new Engine(src, o));
  HQEKV_ASSIGN_OR_RETURN(e->model_, LlamaModel::Create(src));
  const ModelConfig& c = src.config;
  if (e->o_.ctx <= 0) e->o_.ctx = std::min(c.max_ctx > 0 ? c.max_ctx : 4096, 4096);
  if (c.max_ctx > 0 && e->o_.ctx > c.max_ctx) {
    return MakeError("--ctx " + std::to_string(e->o_.ctx) + " is more than the model's " +
                     std::to_string(c.max_ctx));
  }
  auto spec = policy::ParseSpec(o.kv);
  if (!spec.ok()) return MakeError("--kv: " + spec.message());
  e->o_.kv = spec->Canonical();
  const std::string& tmpl = src.tokenizer->chat_template();
  if (!o.chat_template.empty() || !tmpl.empty()) {
    HQEKV_ASSIGN_OR_RETURN(e->chat_format_,
                           ResolveChatFormat(tmpl, o.chat_template, ChatTokensOf(*src.tokenizer)));
  }
  for (int i = 0; i < o.n_slots; ++i) {
    e->slots_.push_back(std::make_unique<Slot>());
    e->slots_.back()->id = i;
  }
  {  // The default policy must fit at all: a bad --kv fails at start, not per request.
    ApiError err;
    if (e->ReservationBytes(e->o_.kv, 1, &err) < 0) return MakeError("--kv: " + err.message);
  }
  if (!o.kv_store.empty()) {
    if (o.kv_store_block < 1 || o.kv_store_block > kvtier::kMaxBlockTokens)
      return MakeError("--kv-store-block must be in [1, " +
                       std::to_string(kvtier::kMaxBlockTokens) + "]");
    HQEKV_ASSIGN_OR_RETURN(e->tier_, kvtier::OpenKvTier(o.kv_store, o.kv_store_options));
    e->tier_thread_ = std::thread([p = e.get()] { p->TierPublishLoop(); });
  }
  e->thread_ = std::thread([p = e.get()] { p->Loop(); });
  return e;
}

Engine::~Engine() { Shutdown(); }

void Engine::Shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
    for (auto& j : queue_)
      j->ch->Finish(FinishEvent{"cancelled", {}, "the server is shutting down"});
    queue_.clear();
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> l(tier_mu_);
    tier_stop_ = true;
    tier_cv_.notify_all();
  }
  if (tier_thread_.joinable()) tier_thread_.join();
}

std::string Engine::ModelName() const {
  const std::string& n = src_.config.name;
  return n.empty() ? "hqekv" : n;
}

RequestLimits Engine::limits() const {
  RequestLimits l;
  l.ctx = o_.ctx;
  l.n_slots = o_.n_slots;
  l.vocab = model_->vocab_size();
  return l;
}

int64_t Engine::ReservationBytes(const std::string& spec_text, int tokens, ApiError* err) {
  std::lock_guard<std::mutex> probe_lock(probe_mu_);
  Probe* p = nullptr;
  for (auto& q : probes_)
    if (q->spec == spec_text) p = q.get();
  if (!p) {
    auto spec = policy::ParseSpec(spec_text);
    if (!spec.ok()) {
      *err = BadRequest("'kv': " + spec.message(), "kv");
      return -1;
    }
    const ModelConfig& c = src_.config;
    const KvGeometry g = model_->CacheGeometry(o_.ctx);
    auto probe = std::make_unique<Probe>();
    probe->spec = spec_text;
    // Two lengths far from the start (fixed page and residual costs would
    // flatten the slope), filled in one batch each; attention with only the
    // last query keeps the probe linear in the length (the bytes a policy
    // holds follow its budget or ratios, not the attention values).
    probe->t0 = std::max(1, std::min(o_.ctx / 4, 64));
    probe->t1 = std::max(probe->t0 + 1, o_.ctx / 2 - 1);
    probe->t2 = std::max(probe->t1 + 1, o_.ctx - 1);
    Xoshiro256 rng(1);
    for (int pass = 0; pass < 3; ++pass) {
      auto cache =
          policy::CreateCache(*spec, g, policy::ForModel(c.name, src_.identity, c.n_layers));
      if (!cache.ok()) {
        *err = BadRequest("'kv': " + cache.message(), "kv");
        return -1;
      }
      const int n = pass == 0 ? probe->t0 : pass == 1 ? probe->t1 : probe->t2;
      const size_t kv = size_t(n) * g.n_kv_heads * g.head_dim,
                   qn = size_t(g.n_q_heads) * g.head_dim;
      std::vector<float> k(kv), v(kv), q(qn), out(qn);
      std::vector<int32_t> pos(n);
      for (int i = 0; i < n; ++i) pos[i] = i;
      for (int l = 0; l < g.n_layers; ++l) {
        for (auto* a : {&k, &v, &q})
          for (float& x : *a) x = static_cast<float>(rng.Uniform() * 2.0 - 1.0);
        Status st = (*cache)->Append(l, k.data(), v.data(), pos.data(), n);
        if (st.ok()) st = (*cache)->Attend(l, q.data(), &pos[n - 1], 1, out.data());
        if (!st.ok()) {
          *err = BadRequest("'kv': " + st.message(), "kv");
          return -1;
        }
      }
      if (Status st = (*cache)->EndBatch(n, true); !st.ok()) {
        *err = BadRequest("'kv': " + st.message(), "kv");
        return -1;
      }
      (pass == 0 ? probe->b0 : pass == 1 ? probe->b1 : probe->b2) = (*cache)->Stats().bytes.total();
    }
    // Bounded: a client cycling through specs costs probes, never memory.
    if (static_cast<int>(probes_.size()) >= kMaxProbedSpecs) probes_.pop_front();
    probes_.push_back(std::move(probe));
    p = probes_.back().get();
  }
  return p->Bytes(tokens);
}

std::shared_ptr<RequestChannel> Engine::Submit(const CompletionRequest& req, ApiError* err) {
  // A weights file rewritten in place under the server reads as other
  // weights (or SIGBUS past a truncation): refuse the work, name the file.
  if (src_.mapping) {
    if (Status st = src_.mapping->CheckUnchanged(); !st.ok()) {
      *err = ApiError{503, "server_error", st.message(), "", ""};
      return nullptr;
    }
  }
  auto job = std::make_shared<Job>();
  job->req = req;
  const Tokenizer& tok = *src_.tokenizer;
  if (req.prompt_is_tokens) {  // ids as given: no BOS added, checked against the vocabulary
    job->prompt = req.prompt_tokens;
    for (int32_t t : job->prompt) {
      if (t < 0 || t >= model_->vocab_size()) {
        *err = BadRequest("'prompt' token id " + std::to_string(t) + " is not in [0, " +
                              std::to_string(model_->vocab_size()) + ")",
                          "prompt");
        return nullptr;
      }
    }
  } else {
    std::string text = req.prompt;
    if (req.chat) text = RenderChatPrompt(req.messages);
    job->prompt = tok.Encode(text, tok.add_bos() || text.empty(), /*parse_special=*/req.chat);
  }
  if (job->prompt.empty()) {
    *err = BadRequest(req.prompt_is_tokens ? "'prompt' is an empty array of token ids"
                                           : "the prompt is empty and the model has no BOS token",
                      "prompt");
    return nullptr;
  }
  const int n_prompt = static_cast<int>(job->prompt.size());
  if (n_prompt >= o_.ctx) {
    *err = BadRequest("the prompt has " + std::to_string(n_prompt) +
                          " tokens; the context of a slot is " + std::to_string(o_.ctx) +
                          " tokens (it must leave room for one generated token)",
                      req.chat ? "messages" : "prompt", "context_length_exceeded");
    return nullptr;
  }
  job->max_new = req.max_tokens > 0 ? req.max_tokens : o_.default_max_tokens;
  job->max_new = std::min(job->max_new, o_.ctx - n_prompt);
  std::string spec = o_.kv;
  if (!req.kv.empty() && !ResolveSpec(req.kv, &spec, err)) return nullptr;
  job->spec = spec;
  job->ch = std::make_shared<RequestChannel>();
  TierLookup(*job);  // network or disk: before the lock
  // Sized before the lock: a new spec's probe does not hold up the engine.
  job->reserve = ReservationBytes(spec, n_prompt + job->max_new, err);
  if (job->reserve < 0) return nullptr;
  std::lock_guard<std::mutex> l(mu_);
  if (stop_) {
    *err = ApiError{503, "server_error", "the server is shutting down", "", ""};
    return nullptr;
  }
  if (o_.kv_budget_bytes > 0 && job->reserve > o_.kv_budget_bytes) {
    *err = BadRequest(
        "this request needs about " + std::to_string(job->reserve) + " bytes of KV cache (" + spec +
            ", " + std::to_string(n_prompt + job->max_new) +
            " positions); the server's whole budget is " + std::to_string(o_.kv_budget_bytes) +
            " bytes (use a smaller max_tokens or a more compressed 'kv')",
        "max_tokens");
    return nullptr;
  }
  if (static_cast<int>(queue_.size()) >= o_.queue_max + o_.n_slots) {
    ++m_.rejected;
    *err = ApiError{503, "server_error",
                    "all slots are busy and the queue is full (" + std::to_string(queue_.size()) +
                        " waiting); retry later",
                    "", ""};
    return nullptr;
  }
  ++m_.requests;
  queue_.push_back(job);
  cv_.notify_all();
  return job->ch;
}

// Moves queued jobs into free slots, first come first served, while their
// reservations fit the budget. A job pinned to a busy slot (id_slot) waits
// without holding up the jobs behind it; a job waiting for bytes does (the
// oldest is served first). Idle slots' kept caches are dropped when the
// bytes are needed.
void Engine::Admit() {
  for (auto it = queue_.begin(); it != queue_.end();) {
    const std::shared_ptr<Job> job = *it;
    if (job->ch->cancelled()) {
      job->ch->Finish(FinishEvent{"cancelled", {}, ""});
      it = queue_.erase(it);
      continue;
    }
    Slot* free_slot = nullptr;
    for (auto& s : slots_) {
      if (s->job) continue;
      if (job->req.id_slot >= 0 && s->id != job->req.id_slot) continue;
      if (!free_slot || (s->cache && !free_slot->cache)) free_slot = s.get();  // prefer warm
    }
    if (!free_slot) {
      if (job->req.id_slot >= 0) {  // its slot is busy: the others go first
        ++it;
        continue;
      }
      return;  // every slot is busy
    }
    int64_t idle = 0;
    for (auto& s : slots_)
      if (!s->job && s.get() != free_slot && s->cache) idle += s->cache->Stats().bytes.total();
    if (o_.kv_budget_bytes > 0 && m_.kv_reserved + idle + job->reserve > o_.kv_budget_bytes) {
      // Drop idle caches first; wait when the active reservations alone are too many.
      if (m_.kv_reserved + job->reserve > o_.kv_budget_bytes) return;
      for (auto& s : slots_)
        if (!s->job && s.get() != free_slot) s->cache.reset();
    }
    Slot& s = *free_slot;
    s.job = job;
    s.prefilled = false;
    s.generated = 0;
    s.pending = -1;
    auto sampler = Sampler::Create(job->req.sampler);  // validated by the parser
    s.sampler.emplace(std::move(*sampler));
    s.stop.emplace(job->req.stop);
    m_.kv_reserved += job->reserve;
    ++m_.slots_busy;
    m_.kv_reserved_peak = std::max(m_.kv_reserved_peak, m_.kv_reserved);
    m_.slots_busy_peak = std::max(m_.slots_busy_peak, m_.slots_busy);
    m_.prompt_tokens += static_cast<int64_t>(job->prompt.size());
    it = queue_.erase(it);
  }
}

void Engine::Release(Slot& s, const std::string& reason, const std::string& error,
                     const std::string& stop_word) {
  FinishEvent f;
  f.reason = reason;
  f.error = error;
  f.usage.prompt_tokens = static_cast<int>(s.job->prompt.size());
  f.usage.completion_tokens = s.generated;
  f.usage.cached_tokens = s.reused;
  f.usage.kv_store_bytes = s.job->tier_bytes;
  f.stop_word = stop_word;
  f.id_slot = s.id;
  using Ms = std::chrono::duration<double, std::milli>;
  if (s.prefilled) {
    f.usage.prompt_ms =
        s.reused >= f.usage.prompt_tokens ? 0.0 : Ms(s.job->prefilled - s.job->started).count();
    f.usage.predicted_ms = Ms(Clock::now() - s.job->prefilled).count();
  }
  if (s.cache) {
    const KvStats st = s.cache->Stats();
    f.usage.kv_bytes = st.bytes.total();
    f.usage.kv_true_bits = st.true_bits();
  }
  if (reason == "cancelled" || reason == "error") {  // nothing worth keeping
    s.cache.reset();
    s.history.clear();
    s.has_logits = false;
  } else {  // the last sampled token never ran: the cache holds history[0, cached)
    s.history.resize(static_cast<size_t>(s.cached));
  }
  {  // Counted before the client hears of the end: what it reads next is current.
    std::lock_guard<std::mutex> l(mu_);
    m_.kv_reserved -= s.job->reserve;
    m_.generated_tokens += s.generated;
    --m_.slots_busy;
  }
  s.job->ch->Finish(std::move(f));
  s.job.reset();
}

// Creates the slot's cache for the job's policy, or keeps the slot's cache
// when the request names this slot (id_slot) and the cached tokens are a
// prefix of its prompt (a restored state: only the rest is run).
bool Engine::Prefill(Slot& s) {
  Job& job = *s.job;
  job.started = Clock::now();
  size_t reuse = 0;
  if (job.req.id_slot == s.id && s.cache && s.spec == job.spec && !s.history.empty() &&
      s.history.size() <= job.prompt.size() &&
      std::equal(s.history.begin(), s.history.end(), job.prompt.begin())) {
    reuse = s.history.size();
    if (reuse == job.prompt.size() && !s.has_logits) reuse = 0;
    // A shorter cached prefix continues with the rest of the prompt; the
    // whole prompt cached answers from the saved logits with no forward.
  }
  bool from_tier = false;
  if (tier_ && job.tier_tokens > reuse) {
    if (const size_t t = TierRestore(s); t > 0) {
      reuse = t;
      from_tier = true;
    }
  }
  if (reuse == 0) {
    auto spec = policy::ParseSpec(job.spec);
    const ModelConfig& c = src_.config;
    Result<std::unique_ptr<KvCache>> cache =
        spec.ok() ? policy::CreateCache(*spec, model_->CacheGeometry(o_.ctx),
                                        policy::ForModel(c.name, src_.identity, c.n_layers))
                  : Result<std::unique_ptr<KvCache>>(spec.error());
    if (!cache.ok()) {
      Release(s, "error", "kv: " + cache.message());
      return false;
    }
    s.cache = std::move(*cache);
    s.spec = job.spec;
    s.history.clear();
  }
  s.logits.resize(model_->vocab_size());
  const int n = static_cast<int>(job.prompt.size() - reuse);
  if (n > 0) {
    std::vector<int32_t> pos(n);
    for (int i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(reuse + i);
    const Status st = tier_ ? TierForward(s, reuse, /*publish=*/reuse == 0 || from_tier)
                            : model_->Forward(job.prompt.data() + reuse, pos.data(), n, *s.cache,
                                              Logits::kLast, s.logits.data(), /*is_prefill=*/true);
    if (!st.ok()) {
      Release(s, "error", st.message());
      return false;
    }
    std::lock_guard<std::mutex> l(mu_);
    m_.prompt_tokens_evaluated += n;
  }
  s.history = job.prompt;
  s.cached = static_cast<int>(job.prompt.size());
  s.reused = static_cast<int>(reuse);
  s.has_logits = true;
  s.prefilled = true;
  job.prefilled = Clock::now();
  return true;
}

void Engine::Emit(Slot& s) {
  Job& job = *s.job;
  const Tokenizer& tok = *src_.tokenizer;
  const int V = model_->vocab_size();
  StepOptions so;
  so.is_eog = [&tok](int32_t id) { return tok.IsEndOfGeneration(id); };
  so.stop_at_eog = !job.req.ignore_eos;
  const StepResult r = SampleNext(*s.sampler, s.logits, s.history, so);
  const int32_t t = r.token;
  if (r.end == StepEnd::kEndOfGeneration) {
    TokenEvent e;
    e.text = s.stop->Flush();
    if (!e.text.empty()) job.ch->Push(std::move(e));
    Release(s, "stop");
    return;
  }
  TokenEvent e;
  e.piece = tok.DecodePiece(s.history.back(), t);
  e.id = t;
  if (job.req.logprobs) {
    // Log-softmax of the model's logits (before sampling filters).
    const double lse = lm::LogSumExp(s.logits.data(), V);
    e.logprob = static_cast<float>(s.logits[t] - lse);
    const int k = std::min(job.req.top_logprobs, V);
    const std::vector<int32_t> ids = lm::TopTokens(s.logits.data(), V, k);
    for (int i = 0; i < k; ++i)
      e.top.emplace_back(tok.DecodePiece(s.history.back(), ids[i]),
                         static_cast<float>(s.logits[ids[i]] - lse));
  }
  s.history.push_back(t);
  ++s.generated;
  const bool hit_stop = s.stop->Add(e.piece);
  e.text = hit_stop ? s.stop->Flush() : s.stop->Release();
  job.ch->Push(std::move(e));
  if (hit_stop) return Release(s, "stop", "", /*stop_word=*/s.stop->matched());
  if (s.generated >= job.max_new || static_cast<int>(s.history.size()) >= o_.ctx) {
    TokenEvent tail;
    tail.text = s.stop->Flush();
    if (!tail.text.empty()) job.ch->Push(std::move(tail));
    return Release(s, "length");
  }
  s.pending = t;
}

void Engine::Step() {
  std::lock_guard<std::mutex> step_lock(step_mu_);
  for (auto& sp : slots_) {
    Slot& s = *sp;
    if (s.job && s.job->ch->cancelled()) Release(s, "cancelled");
  }
  for (auto& sp : slots_) {
    Slot& s = *sp;
    if (s.job && !s.prefilled && Prefill(s)) Emit(s);
  }
  std::vector<SeqBatch> batch;
  std::vector<Slot*> rows;
  std::vector<int32_t> pos(slots_.size());
  for (auto& sp : slots_) {
    Slot& s = *sp;
    if (!s.job || s.pending < 0) continue;
    pos[rows.size()] = static_cast<int32_t>(s.history.size() - 1);
    batch.push_back(
        SeqBatch{&s.pending, &pos[rows.size()], 1, s.cache.get(), s.logits.data(), false});
    rows.push_back(&s);
  }
  if (!batch.empty()) {
    const auto t0 = Clock::now();
    const Status st = model_->ForwardMany(batch.data(), static_cast<int>(batch.size()));
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    {
      std::lock_guard<std::mutex> l(mu_);
      m_.decode_seconds += dt;
      m_.decode_steps += 1;
      m_.decode_rows += static_cast<int64_t>(rows.size());
    }
    for (Slot* s : rows) {
      s->pending = -1;
      if (!st.ok()) {
        Release(*s, "error", st.message());
        continue;
      }
      s->has_logits = true;
      ++s->cached;
      Emit(*s);
    }
  }
  AccountHeld();
}

void Engine::AccountHeld() {
  int64_t held = 0, kept = 0;
  for (auto& sp : slots_) {
    if (!sp->cache) continue;
    const KvStats st = sp->cache->Stats();
    held += st.bytes.total();
    kept += st.kept_elements;
  }
  std::lock_guard<std::mutex> l(mu_);
  m_.kv_bytes_held = held;
  m_.kv_kept_elements = kept;
  m_.kv_bytes_peak = std::max(m_.kv_bytes_peak, held);
}

EngineCounters Engine::Counters() const {
  std::lock_guard<std::mutex> l(mu_);
  return m_;
}

bool Engine::ResolveSpec(const std::string& kv, std::string* spec, ApiError* err) const {
  auto s = policy::ParseSpec(kv);
  if (!s.ok()) {
    *err = BadRequest("'kv': " + s.message(), "kv");
    return false;
  }
  if (s->Given("profile")) {
    // A name in the operator's profile directory, never a client's path: the
    // error must not tell whether some file exists elsewhere.
    const std::string name = s->Text("profile");
    bool ok = !o_.profile_dir.empty() && !name.empty() && name.size() <= 128 && name[0] != '.';
    for (char ch : name)
      ok = ok &&
           (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-');
    if (!ok) {
      *err = BadRequest(o_.profile_dir.empty()
                            ? "'kv': this server takes no profile= from requests (start it "
                              "with --profile-dir DIR to offer the profiles in DIR by name)"
                            : "'kv': profile= must name a profile of the server's profile "
                              "directory: 1-128 letters, digits, '.', '_' or '-', not starting "
                              "with '.'",
                        "kv");
      return false;
    }
    namespace fs = std::filesystem;
    const fs::path dir(o_.profile_dir);
    std::error_code ec;
    fs::path file = dir / name;
    if (!fs::is_regular_file(file, ec)) file = dir / (name + ".json");
    if (!fs::is_regular_file(file, ec)) {
      *err = BadRequest("'kv': no profile '" + name + "' on this server", "kv");
      return false;
    }
    s->given["profile"] = file.string();
    s->values["profile"] = file.string();
  }
  *spec = s->Canonical();
  return true;
}

void Engine::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] {
        if (stop_) return true;
        if (!queue_.empty()) return true;
        for (auto& s : slots_)
          if (s->job) return true;
        return false;
      });
      if (stop_) break;
    }
    {  // Lock order step_mu_, then mu_: Admit may drop idle slots' caches,
       // which slot save / restore use under step_mu_.
      std::lock_guard<std::mutex> step_lock(step_mu_);
      std::lock_guard<std::mutex> l(mu_);
      Admit();
    }
    Step();
    // A step without active slots (all queued requests waiting for bytes):
    // wait a little instead of spinning.
    bool active = false;
    for (auto& s : slots_) active = active || s->job != nullptr;
    if (!active) {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, std::chrono::milliseconds(5));
    }
  }
  std::lock_guard<std::mutex> step_lock(step_mu_);
  for (auto& s : slots_)
    if (s->job) Release(*s, "cancelled", "the server is shutting down");
}

std::string Engine::RenderChatPrompt(const std::vector<ChatMessage>& messages) const {
  return RenderChat(chat_format_, messages, /*add_generation_prompt=*/true);
}

const char* Engine::ChatTemplateName() const { return ChatFormatName(chat_format_); }

}  // namespace hqekv::server
