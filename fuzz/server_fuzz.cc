// libFuzzer target for the server's request path: the JSON body parser
// (server/request.h) and, for bodies it accepts, Engine::Submit on the
// bundled model (tokenizing, chat rendering, `kv` spec resolution, the
// per-spec size probe, admission) with the request cancelled at once. Any
// body must give a 4xx/5xx error or a request that finishes; the engine must
// stay consistent (no reservation or busy slot left behind).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/model_source.h"
#include "server/engine.h"
#include "server/request.h"

namespace {

struct Fixture {
  std::unique_ptr<hqekv::ModelSource> src;
  std::unique_ptr<hqekv::server::Engine> engine;
};

Fixture& Get() {
  static Fixture* f = [] {
    auto* x = new Fixture;
    auto src = hqekv::LoadModel(std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf");
    if (!src.ok()) std::abort();
    x->src = std::move(*src);
    hqekv::server::EngineOptions o;
    o.n_slots = 2;
    o.ctx = 64;
    o.queue_max = 4;
    o.kv_budget_bytes = 1 << 20;
    auto e = hqekv::server::Engine::Create(*x->src, o);
    if (!e.ok()) std::abort();
    x->engine = std::move(*e);
    return x;
  }();
  return *f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 16384) return 0;
  Fixture& f = Get();
  // The first byte picks the route: 0 completions, 1 chat, 2 llama-server's
  // /completion, 3 completions.
  const int route = data[0] & 3;
  const auto kind = route == 1   ? hqekv::server::RequestKind::kChat
                    : route == 2 ? hqekv::server::RequestKind::kNative
                                 : hqekv::server::RequestKind::kCompletion;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  hqekv::server::CompletionRequest r;
  hqekv::server::ApiError err;
  if (!hqekv::server::ParseCompletionRequest(body, kind, f.engine->limits(), &r, &err)) {
    if (err.status < 400 || err.status > 599) std::abort();
    return 0;
  }
  auto ch = f.engine->Submit(r, &err);
  if (!ch) {
    if (err.status < 400 || err.status > 599) std::abort();
    return 0;
  }
  ch->Cancel();
  std::vector<hqekv::server::TokenEvent> ev;
  std::optional<hqekv::server::FinishEvent> fin;
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!fin && std::chrono::steady_clock::now() < limit)
    ch->Wait(std::chrono::milliseconds(5), &ev, &fin);
  if (!fin) std::abort();  // a cancelled request must end
  const auto m = f.engine->Counters();
  if (m.kv_reserved < 0 || m.slots_busy < 0) std::abort();
  return 0;
}
