// The slot operations of the server engine (docs/server.md "Slots"):
// erase, list, save and restore a slot's KV state, and the Prometheus text.
// Split from engine.cc, which holds admission, prefill and the decode loop.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "cache/kv_state.h"
#include "core/file.h"
#include "policy/factory.h"
#include "server/engine.h"
#include "server/engine_state.h"

namespace hqekv::server {

namespace {
// Save, restore and erase need an idle slot.
ApiError SlotBusyError(int id) {
  return ApiError{409, "invalid_request_error", "slot " + std::to_string(id) + " is busy", "", ""};
}
}  // namespace

bool Engine::EraseSlot(int id, int* n_erased, ApiError* err) {
  if (id < 0 || id >= o_.n_slots) {
    *err = ApiError{404, "invalid_request_error", "no slot " + std::to_string(id), "", ""};
    return false;
  }
  std::lock_guard<std::mutex> step_lock(step_mu_);
  Slot& s = *slots_[id];
  if (s.job) {
    *err = SlotBusyError(id);
    return false;
  }
  *n_erased = s.cache ? static_cast<int>(s.history.size()) : 0;
  s.cache.reset();
  s.spec.clear();
  s.history.clear();
  s.has_logits = false;
  s.cached = 0;
  AccountHeld();
  return true;
}

std::vector<Engine::SlotInfo> Engine::Slots() {
  std::lock_guard<std::mutex> step_lock(step_mu_);
  std::vector<SlotInfo> out;
  for (auto& sp : slots_) {
    const Slot& s = *sp;
    SlotInfo i;
    i.id = s.id;
    i.busy = s.job != nullptr;
    if (s.cache) {
      i.spec = s.spec;
      i.n_cached = s.cached;
      i.kv_bytes = s.cache->Stats().bytes.total();
    }
    if (s.job) {
      i.n_prompt = static_cast<int>(s.job->prompt.size());
      i.n_generated = s.generated;
    }
    out.push_back(std::move(i));
  }
  return out;
}

std::string Engine::MetricsText() const {
  std::lock_guard<std::mutex> l(mu_);
  std::ostringstream o;
  auto metric = [&](const char* name, const char* type, const char* help, double v) {
    o << "# HELP hqekv_" << name << " " << help << "\n# TYPE hqekv_" << name << " " << type
      << "\nhqekv_" << name << " " << v << "\n";
  };
  metric("requests_total", "counter", "Requests accepted.", double(m_.requests));
  metric("requests_rejected_total", "counter", "Requests refused with 503 (queue full).",
         double(m_.rejected));
  metric("prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
         double(m_.prompt_tokens));
  metric("prompt_tokens_evaluated_total", "counter",
         "Prompt tokens run through a prefill (cached and restored slot tokens are not).",
         double(m_.prompt_tokens_evaluated));
  metric("tokens_predicted_total", "counter", "Tokens generated (counted when a request ends).",
         double(m_.generated_tokens));
  metric("decode_seconds_total", "counter", "Wall time of batched decode steps.",
         m_.decode_seconds);
  metric("predicted_tokens_seconds", "gauge", "Decode throughput, tokens/s (all slots).",
         m_.decode_seconds > 0 ? m_.decode_rows / m_.decode_seconds : 0.0);
  metric("kv_bytes_held", "gauge", "True bytes held by every slot's KV cache.",
         double(m_.kv_bytes_held));
  metric("kv_bytes_peak", "gauge", "Largest kv_bytes_held seen after a step.",
         double(m_.kv_bytes_peak));
  metric("kv_bytes_reserved", "gauge", "KV bytes reserved by the requests being served.",
         double(m_.kv_reserved));
  metric("kv_bytes_reserved_peak", "gauge",
         "Largest kv_bytes_reserved seen (at most kv_budget_bytes when there is a cap).",
         double(m_.kv_reserved_peak));
  metric("kv_budget_bytes", "gauge", "--kv-budget-mb in bytes (0 = no cap).",
         double(o_.kv_budget_bytes));
  metric("kv_true_bits", "gauge", "True bits per kept K/V element over every slot.",
         m_.kv_kept_elements ? 8.0 * m_.kv_bytes_held / m_.kv_kept_elements : 0.0);
  metric("slots_busy", "gauge", "Slots serving a request.", double(m_.slots_busy));
  metric("slots_total", "gauge", "Slots (-np).", double(o_.n_slots));
  metric("queue_length", "gauge", "Requests waiting for a slot or KV bytes.",
         double(queue_.size()));
  if (tier_) o << TierMetricsText();
  return o.str();
}

// A save file name from a request: letters, digits, '.', '_', '-' only (no
// directory part, no "..", not hidden), inside --slot-save-path.
bool Engine::SlotFile(int id, const std::string& filename, std::string* path, ApiError* err) {
  if (o_.slot_save_path.empty()) {
    *err =
        ApiError{501, "not_supported_error",
                 "slot save/restore is off (start the server with --slot-save-path DIR)", "", ""};
    return false;
  }
  if (id < 0 || id >= o_.n_slots) {
    *err = ApiError{404, "invalid_request_error", "no slot " + std::to_string(id), "", ""};
    return false;
  }
  bool ok = !filename.empty() && filename.size() <= 128 && filename[0] != '.';
  for (char ch : filename)
    ok =
        ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-');
  if (!ok) {
    *err = BadRequest(
        "'filename' must be 1-128 letters, digits, '.', '_' or '-' and not start "
        "with '.' (no directories)",
        "filename");
    return false;
  }
  *path = (std::filesystem::path(o_.slot_save_path) / filename).string();
  return true;
}

bool Engine::SaveSlot(int id, const std::string& filename, std::string* info, ApiError* err) {
  std::string path;
  if (!SlotFile(id, filename, &path, err)) return false;
  std::lock_guard<std::mutex> step_lock(step_mu_);
  Slot& s = *slots_[id];
  if (s.job) {
    *err = SlotBusyError(id);
    return false;
  }
  if (!s.cache || s.history.empty() || !s.has_logits) {
    *err = BadRequest("slot " + std::to_string(id) + " holds no finished prompt to save");
    return false;
  }
  KvStateMeta meta;
  meta.model_identity = src_.identity;
  meta.spec = s.spec;
  meta.geometry = s.cache->geometry();
  meta.tokens = s.history;
  meta.logits = s.logits;
  auto bytes = EncodeKvState(*s.cache, meta);
  Status st = bytes.ok() ? WriteFileAtomic(path, *bytes) : Status(bytes.error());
  if (!st.ok()) {
    *err = ApiError{bytes.ok() ? 500 : 400, bytes.ok() ? "server_error" : "invalid_request_error",
                    st.message(), "", ""};
    return false;
  }
  std::ostringstream o;
  o << "{\"id_slot\":" << id << ",\"filename\":\"" << filename
    << "\",\"n_saved\":" << s.history.size() << ",\"file_bytes\":" << bytes->size()
    << ",\"kv_bytes\":" << s.cache->Stats().bytes.total() << "}";
  *info = o.str();
  return true;
}

bool Engine::RestoreSlot(int id, const std::string& filename, std::string* info, ApiError* err) {
  std::string path;
  if (!SlotFile(id, filename, &path, err)) return false;
  // A state holds at most the budget's bytes of cache, plus its header,
  // tokens and logits: a bigger file is not read at all.
  const uint64_t max_file =
      o_.kv_budget_bytes > 0
          ? uint64_t(o_.kv_budget_bytes) + 4 * uint64_t(o_.ctx + model_->vocab_size()) + (1 << 20)
          : uint64_t(1) << 34;
  auto file = ReadFileChecked(path, max_file);
  if (!file.ok()) {
    *err = ApiError{404, "invalid_request_error", file.message(), "filename", ""};
    return false;
  }
  auto header = ReadKvStateHeader(*file);
  if (!header.ok()) {
    *err = BadRequest(header.message(), "filename");
    return false;
  }
  const ModelConfig& c = src_.config;
  auto spec = policy::ParseSpec(header->spec);
  Result<std::unique_ptr<KvCache>> cache =
      spec.ok() ? policy::CreateCache(*spec, model_->CacheGeometry(o_.ctx),
                                      policy::ForModel(c.name, src_.identity, c.n_layers))
                : Result<std::unique_ptr<KvCache>>(spec.error());
  KvStateMeta meta;
  Status st = cache.ok() ? Status::Ok() : Status(cache.error());
  if (st.ok()) {
    KvStateMeta expect;
    expect.model_identity = src_.identity;
    expect.geometry = (*cache)->geometry();
    auto m = LoadKvState(*file, expect, **cache);
    if (m.ok())
      meta = std::move(*m);
    else
      st = m.error();
  }
  if (st.ok() && meta.logits.size() != static_cast<size_t>(model_->vocab_size()))
    st = MakeError("the file's logits do not match this model's vocabulary");
  if (!st.ok()) {
    *err = BadRequest(path + ": " + st.message(), "filename");
    return false;
  }
  const int64_t bytes = (*cache)->Stats().bytes.total();
  if (o_.kv_budget_bytes > 0 && bytes > o_.kv_budget_bytes) {
    *err = BadRequest(path + ": the state holds " + std::to_string(bytes) +
                          " bytes of KV cache; the server's whole budget is " +
                          std::to_string(o_.kv_budget_bytes) + " bytes",
                      "filename");
    return false;
  }
  std::lock_guard<std::mutex> step_lock(step_mu_);
  Slot& s = *slots_[id];
  if (s.job) {
    *err = SlotBusyError(id);
    return false;
  }
  if (o_.kv_budget_bytes > 0) {
    // The restored cache is an idle slot's: it counts against the budget
    // like one, and other idle slots' caches make room for it first.
    std::lock_guard<std::mutex> l(mu_);
    auto idle = [&] {
      int64_t b = 0;
      for (auto& o : slots_)
        if (!o->job && o.get() != &s && o->cache) b += o->cache->Stats().bytes.total();
      return b;
    };
    if (m_.kv_reserved + idle() + bytes > o_.kv_budget_bytes) {
      for (auto& o : slots_) {
        if (o->job || o.get() == &s) continue;
        o->cache.reset();
        o->history.clear();
        o->has_logits = false;
      }
    }
    if (m_.kv_reserved + bytes > o_.kv_budget_bytes) {
      *err = ApiError{503, "server_error",
                      "the requests being served hold the KV budget; retry later", "", ""};
      return false;
    }
  }
  s.cache = std::move(*cache);
  s.spec = header->spec;
  s.history = meta.tokens;
  s.cached = static_cast<int>(meta.tokens.size());
  s.logits = meta.logits;
  s.has_logits = true;
  std::ostringstream o;
  AccountHeld();
  o << "{\"id_slot\":" << id << ",\"filename\":\"" << filename
    << "\",\"n_restored\":" << s.history.size() << ",\"file_bytes\":" << file->size()
    << ",\"kv_bytes\":" << s.cache->Stats().bytes.total() << "}";
  *info = o.str();
  return true;
}

}  // namespace hqekv::server
