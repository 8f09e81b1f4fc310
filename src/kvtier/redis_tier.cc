// redis://HOST:PORT[/prefix] — Redis or Valkey through hiredis (Debian
// libhiredis-dev). One connection, calls serialized on it, made lazily and
// again after a failure; every connect, read and write is bounded by
// timeout_ms. A read asks GETRANGE 0..max_entry_bytes, so a huge value
// cannot make this process allocate more than the entry limit (+1 byte: a
// longer value is a miss). A full store (maxmemory with noeviction) answers
// SET with an error: the entry is not stored, the request goes on.
#include <mutex>

#include "kvtier/backends.h"

#ifdef HQEKV_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#include <sys/time.h>
#endif

namespace hqekv::kvtier {

#ifdef HQEKV_HAVE_HIREDIS
namespace {

class RedisTier final : public KvTier {
 public:
  RedisTier(std::string host, int port, std::string prefix, const TierOptions& o)
      : KvTier(o), host_(std::move(host)), port_(port), prefix_(std::move(prefix)) {}
  ~RedisTier() override {
    if (ctx_) redisFree(ctx_);
  }
  std::string Describe() const override {
    return "redis://" + host_ + ":" + std::to_string(port_) + "/" + prefix_;
  }

 protected:
  Result<std::optional<std::string>> DoGet(const std::string& key) override {
    std::lock_guard<std::mutex> l(mu_);
    HQEKV_RETURN_IF_ERROR(Connect());
    const std::string k = prefix_ + ":" + key;
    auto* r = static_cast<redisReply*>(redisCommand(ctx_, "GETRANGE %b 0 %lld", k.data(), k.size(),
                                                    static_cast<long long>(o_.max_entry_bytes)));
    if (!r) return Broken("GETRANGE");
    std::optional<std::string> out;
    Status st = Status::Ok();
    if (r->type == REDIS_REPLY_STRING) {
      if (r->len > 0 && static_cast<int64_t>(r->len) <= o_.max_entry_bytes)
        out.emplace(r->str, r->len);
    } else if (r->type == REDIS_REPLY_ERROR) {
      st = MakeError(Describe() + ": GETRANGE: " + std::string(r->str, r->len));
    }
    freeReplyObject(r);
    if (!st.ok()) return st.error();
    return out;
  }

  Status DoPut(const std::string& key, std::string_view bytes) override {
    std::lock_guard<std::mutex> l(mu_);
    HQEKV_RETURN_IF_ERROR(Connect());
    const std::string k = prefix_ + ":" + key;
    redisReply* r =
        o_.ttl_s > 0
            ? static_cast<redisReply*>(redisCommand(ctx_, "SET %b %b EX %d", k.data(), k.size(),
                                                    bytes.data(), bytes.size(), o_.ttl_s))
            : static_cast<redisReply*>(
                  redisCommand(ctx_, "SET %b %b", k.data(), k.size(), bytes.data(), bytes.size()));
    if (!r) return Broken("SET");
    Status st = Status::Ok();
    if (r->type == REDIS_REPLY_ERROR)
      st = MakeError(Describe() + ": SET: " + std::string(r->str, r->len));
    freeReplyObject(r);
    return st;
  }

 private:
  Status Connect() {
    if (ctx_) return Status::Ok();
    timeval tv{o_.timeout_ms / 1000, (o_.timeout_ms % 1000) * 1000};
    ctx_ = redisConnectWithTimeout(host_.c_str(), port_, tv);
    if (!ctx_) return MakeError(Describe() + ": cannot allocate a connection");
    if (ctx_->err) {
      const std::string why = ctx_->errstr;
      redisFree(ctx_);
      ctx_ = nullptr;
      MarkDown();
      return MakeError(Describe() + ": cannot connect: " + why);
    }
    if (redisSetTimeout(ctx_, tv) != REDIS_OK) {
      redisFree(ctx_);
      ctx_ = nullptr;
      return MakeError(Describe() + ": cannot set the socket timeout");
    }
    return Status::Ok();
  }
  // A call without a reply: the connection is unusable (closed, timed out).
  Error Broken(const char* what) {
    const std::string why = ctx_->err ? ctx_->errstr : "no reply";
    redisFree(ctx_);
    ctx_ = nullptr;
    MarkDown();
    return MakeError(Describe() + ": " + what + ": " + why);
  }

  std::string host_;
  int port_;
  std::string prefix_;
  std::mutex mu_;
  redisContext* ctx_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<KvTier>> OpenRedisTier(const std::string& host, int port,
                                              const std::string& prefix, const TierOptions& o) {
  return std::unique_ptr<KvTier>(new RedisTier(host, port, prefix, o));
}
#else
Result<std::unique_ptr<KvTier>> OpenRedisTier(const std::string& host, int port,
                                              const std::string& prefix, const TierOptions& o) {
  return MakeError("--kv-store redis://" + host + ":" + std::to_string(port) +
                   ": this hqekv was built without hiredis (install libhiredis-dev, "
                   "scripts/install-deps.sh, and configure again)");
}
#endif

}  // namespace hqekv::kvtier
