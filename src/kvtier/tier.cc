#include "kvtier/tier.h"

#include <cctype>
#include <chrono>

#include "kvtier/backends.h"

namespace hqekv::kvtier {
namespace {
int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

bool ValidKey(const std::string& key) {
  if (key.empty() || key.size() > 64) return false;
  for (char c : key)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool KvTier::BackingOff() {
  std::lock_guard<std::mutex> l(mu_);
  return SteadyNowNs() < backoff_until_ns_;
}

void KvTier::MarkDown() {
  std::lock_guard<std::mutex> l(mu_);
  backoff_until_ns_ = SteadyNowNs() + int64_t{o_.backoff_ms} * 1000000;
}

Result<std::optional<std::string>> KvTier::Get(const std::string& key) {
  if (!ValidKey(key)) return MakeError("KV tier key '" + key + "' is not 1-64 hex digits");
  if (BackingOff()) {
    std::lock_guard<std::mutex> l(mu_);
    ++s_.errors;
    return MakeError(Describe() + ": failed recently; not asked again yet");
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto r = DoGet(key);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> l(mu_);
  s_.fetch_seconds += dt;
  ++s_.fetches;
  if (!r.ok())
    ++s_.errors;
  else if (!r->has_value())
    ++s_.misses;
  else {
    ++s_.hits;
    s_.bytes_in += static_cast<int64_t>((*r)->size());
  }
  return r;
}

Status KvTier::Put(const std::string& key, std::string_view bytes) {
  if (!ValidKey(key)) return MakeError("KV tier key '" + key + "' is not 1-64 hex digits");
  Status st = Status::Ok();
  if (static_cast<int64_t>(bytes.size()) > o_.max_entry_bytes)
    st = MakeError("KV tier entry of " + std::to_string(bytes.size()) +
                   " bytes is over the entry limit of " + std::to_string(o_.max_entry_bytes));
  else if (BackingOff())
    st = MakeError(Describe() + ": failed recently; not asked again yet");
  else {
    st = DoPut(key, bytes);
  }
  std::lock_guard<std::mutex> l(mu_);
  ++s_.puts;
  if (st.ok())
    s_.bytes_out += static_cast<int64_t>(bytes.size());
  else
    ++s_.put_errors;
  return st;
}

void KvTier::NoteRejected() {
  std::lock_guard<std::mutex> l(mu_);
  ++s_.rejected;
}

TierStats KvTier::Stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return s_;
}

Result<std::unique_ptr<KvTier>> OpenKvTier(const std::string& url, const TierOptions& o) {
  if (o.max_bytes < 1 || o.max_entry_bytes < 1 || o.ttl_s < 0 || o.timeout_ms < 1 ||
      o.backoff_ms < 0)
    return MakeError("--kv-store " + url + ": byte limits and the timeout must be positive");
  if (url.rfind("dir:", 0) == 0) {
    const std::string path = url.substr(4);
    if (path.empty()) return MakeError("--kv-store dir:PATH needs a path");
    return OpenDirTier(path, o);
  }
  if (url.rfind("redis://", 0) == 0) {
    std::string rest = url.substr(8), prefix = "hqekv";
    if (const size_t slash = rest.find('/'); slash != std::string::npos) {
      prefix = rest.substr(slash + 1);
      rest = rest.substr(0, slash);
    }
    bool prefix_ok = !prefix.empty() && prefix.size() <= 64;
    for (char c : prefix)
      prefix_ok = prefix_ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                                c == '-' || c == '.' || c == ':');
    if (!prefix_ok)
      return MakeError("--kv-store " + url +
                       ": the key prefix must be 1-64 letters, digits, '_', '-', '.' or ':'");
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return MakeError("--kv-store " + url + ": expected redis://HOST:PORT[/prefix]");
    const std::string host = rest.substr(0, colon), port_text = rest.substr(colon + 1);
    int port = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9' || port > 65535) {
        port = -1;
        break;
      }
      port = port * 10 + (c - '0');
    }
    if (port_text.empty() || port < 1 || port > 65535)
      return MakeError("--kv-store " + url + ": the port must be in [1, 65535]");
    return OpenRedisTier(host, port, prefix, o);
  }
  return MakeError("--kv-store " + url + ": expected dir:PATH or redis://HOST:PORT[/prefix]");
}

}  // namespace hqekv::kvtier
