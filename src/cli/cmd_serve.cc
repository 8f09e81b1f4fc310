// `hqekv serve`: the OpenAI-compatible HTTP server (src/server/,
// docs/server.md). Binds 127.0.0.1 by default; SIGTERM / SIGINT end it
// cleanly (in-flight requests are cancelled, the port is released).
#include <CLI/CLI.hpp>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "cli/kv_flags.h"
#include "cli/model_args.h"
#include "cli/registry.h"
#include "server/engine.h"
#include "server/http.h"
#include "tokenizer/chat_template.h"

namespace hqekv::cli::cmd_serve {
namespace {

struct ServeArgs {
  std::string model, tokenizer, host = "127.0.0.1", kv = "fp16", api_key, slot_save_path,
                                chat_template, profile_dir;
  int port = 8080, n_slots = 1, ctx = 0, threads = 0, queue = 64, max_tokens = 256,
      threads_http = 0, header_timeout = server::kHeaderTimeoutSeconds;
  bool no_request_log = false;
  double kv_budget_mb = 0, max_body_mb = 1;
  // The shared KV tier (docs/scale-out.md).
  std::string kv_store;
  double kv_store_mb = 1024, kv_store_entry_mb = 256;
  int kv_store_ttl = 0, kv_store_timeout_ms = 200, kv_store_block = 256;
  KvTypeFlags kv_types;  // -ctk / -ctv / --kv-cache-dtype instead of --kv
};

// Bounds of the real-valued flags (MiB): a budget of 1 TiB, a body of 1 GiB.
constexpr int kMaxKvBudgetMb = 1 << 20;
constexpr int kMaxBodyMb = 1 << 10;

int Fail(const std::string& msg) {
  std::fprintf(stderr, "hqekv serve: error: %s\n", msg.c_str());
  return 1;
}

int Serve(const ServeArgs& a) {
  // Before any thread starts (the compute pool too): the signals go to the
  // waiter below only.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error value, not a signal
  if (Status st = ApplyThreads(a.threads); !st.ok()) return Fail(st.message());
  if (a.port < 0 || a.port > 65535) return Fail("--port must be in [0, 65535]");
  // Every count is checked against its bound before a thread starts or a
  // byte is allocated (NaN fails each comparison, so each is written to
  // accept only what is inside).
  if (!(a.kv_budget_mb >= 0 && a.kv_budget_mb <= kMaxKvBudgetMb))
    return Fail("--kv-budget-mb must be in [0, " + std::to_string(kMaxKvBudgetMb) +
                "] (0 = no cap)");
  if (!(a.max_body_mb > 0 && a.max_body_mb <= kMaxBodyMb))
    return Fail("--max-body-mb must be in (0, " + std::to_string(kMaxBodyMb) + "]");
  if (a.queue < 0 || a.queue > server::kMaxQueue)
    return Fail("--queue must be in [0, " + std::to_string(server::kMaxQueue) + "]");
  if (a.max_tokens < 1 || a.max_tokens > server::kMaxDefaultTokens)
    return Fail("--max-tokens must be in [1, " + std::to_string(server::kMaxDefaultTokens) + "]");
  if (a.threads_http < 0 || a.threads_http > server::kMaxHttpThreads)
    return Fail("--threads-http must be in [0, " + std::to_string(server::kMaxHttpThreads) +
                "] (0 = max(32, slots + queue + 4))");
  if (a.header_timeout < 1 || a.header_timeout > server::kMaxHeaderTimeoutSeconds)
    return Fail("--header-timeout must be in [1, " +
                std::to_string(server::kMaxHeaderTimeoutSeconds) + "] seconds");
  if (a.n_slots < 1 || a.n_slots > server::kMaxSlots)
    return Fail("-np must be in [1, " + std::to_string(server::kMaxSlots) + "]");
  if (!a.profile_dir.empty() && !std::filesystem::is_directory(a.profile_dir))
    return Fail("--profile-dir " + a.profile_dir + " is not a directory");
  if (!(a.kv_store_mb > 0 && a.kv_store_mb <= kMaxKvBudgetMb))
    return Fail("--kv-store-mb must be in (0, " + std::to_string(kMaxKvBudgetMb) + "]");
  if (!(a.kv_store_entry_mb > 0 && a.kv_store_entry_mb <= kMaxBodyMb))
    return Fail("--kv-store-entry-mb must be in (0, " + std::to_string(kMaxBodyMb) + "]");
  if (a.kv_store_ttl < 0) return Fail("--kv-store-ttl must be >= 0 seconds (0 = none)");
  if (a.kv_store_timeout_ms < 1 || a.kv_store_timeout_ms > 60000)
    return Fail("--kv-store-timeout-ms must be in [1, 60000]");
  if (!a.slot_save_path.empty() && !std::filesystem::is_directory(a.slot_save_path))
    return Fail("--slot-save-path " + a.slot_save_path + " is not a directory");
  auto kv = a.kv_types.Resolve(a.kv);
  if (!kv.ok()) return Fail(kv.message());
  const std::string path = ModelPathOrDefault(a.model);
  auto src = LoadModel(path, a.tokenizer);
  if (!src.ok()) return Fail(src.message());
  if (Status st = CheckContext(a.ctx, (*src)->config); !st.ok()) return Fail(st.message());
  server::EngineOptions eo;
  eo.n_slots = a.n_slots;
  eo.ctx = a.ctx;
  eo.kv = *kv;
  eo.kv_budget_bytes = static_cast<int64_t>(a.kv_budget_mb * 1024 * 1024);
  eo.queue_max = a.queue;
  eo.default_max_tokens = a.max_tokens;
  eo.chat_template = a.chat_template;
  eo.slot_save_path = a.slot_save_path;
  eo.profile_dir = a.profile_dir;
  eo.kv_store = a.kv_store;
  eo.kv_store_block = a.kv_store_block;
  eo.kv_store_options.max_bytes = static_cast<int64_t>(a.kv_store_mb * 1024 * 1024);
  eo.kv_store_options.max_entry_bytes = static_cast<int64_t>(a.kv_store_entry_mb * 1024 * 1024);
  eo.kv_store_options.ttl_s = a.kv_store_ttl;
  eo.kv_store_options.timeout_ms = a.kv_store_timeout_ms;
  auto engine = server::Engine::Create(**src, eo);
  if (!engine.ok()) return Fail(engine.message());
  server::HttpOptions ho;
  ho.host = a.host;
  ho.port = a.port;
  ho.api_key = a.api_key;
  ho.max_body_bytes = static_cast<size_t>(a.max_body_mb * 1024 * 1024);
  ho.threads = a.threads_http;
  ho.log_requests = !a.no_request_log;
  ho.header_timeout_s = a.header_timeout;
  ho.model_path = path;
  std::atomic<bool> stop{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&set, &sig);
    stop = true;
  });
  const Status st = server::Serve(**engine, ho, &stop, [&](int port) {
    std::fprintf(stderr,
                 "[hqekv serve] %s | %d slots x %d positions | kv %s | listening on http://%s:%d\n",
                 (*engine)->ModelName().c_str(), eo.n_slots, (*engine)->options().ctx,
                 (*engine)->options().kv.c_str(), a.host.c_str(), port);
    if (!a.kv_store.empty())
      std::fprintf(stderr, "[hqekv serve] shared KV tier %s, blocks of %d tokens\n",
                   a.kv_store.c_str(), a.kv_store_block);
  });
  if (!st.ok()) {
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    return Fail(st.message());
  }
  waiter.join();
  std::fprintf(stderr, "[hqekv serve] stopped\n");
  return 0;
}

const CommandRegistrar kRegister(15, [](CLI::App& app, int* rc) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "OpenAI-compatible HTTP server: many sequences, a KV policy per request");
  cmd->add_option("-m,--model", a->model, kDefaultModelHelp);
  cmd->add_option("--tokenizer", a->tokenizer,
                  "llama2.c tokenizer.bin (llama2.c checkpoints only)");
  cmd->add_option("--host", a->host, "Address to bind")->capture_default_str();
  cmd->add_option("--port", a->port, "Port (0 = any free port)")->capture_default_str();
  cmd->add_option("--np,--parallel", a->n_slots, "Slots: sequences decoded together")
      ->capture_default_str();
  cmd->add_option("-c,--ctx,--ctx-size", a->ctx,
                  "Positions per slot (default: the model's, at most 4096)");
  a->kv_types.Add(cmd, cmd->add_option("--kv", a->kv,
                                       "Default KV cache policy spec (requests may name another)")
                           ->capture_default_str());
  cmd->add_option("--kv-budget-mb", a->kv_budget_mb,
                  "Cap on the true KV bytes of all slots together, MiB (0 = no cap)");
  cmd->add_option("--queue", a->queue, "Requests that may wait for a slot before 503")
      ->capture_default_str();
  cmd->add_option("--max-tokens", a->max_tokens, "Default max_tokens of a request")
      ->capture_default_str();
  cmd->add_option("--api-key", a->api_key, "Require 'Authorization: Bearer KEY'");
  cmd->add_option("--slot-save-path", a->slot_save_path,
                  "Directory of POST /slots/{id}?action=save|restore files");
  cmd->add_option("--chat-template", a->chat_template,
                  "Chat format instead of the file's template (default chatml when the file has "
                  "none): " +
                      SupportedChatFormatNames());
  cmd->add_option("--max-body-mb", a->max_body_mb, "Largest request body, MiB (larger: 413)")
      ->capture_default_str();
  cmd->add_option("--profile-dir", a->profile_dir,
                  "Directory of HqeKV profiles requests may name (\"kv\":\"hqekv:profile=NAME\"); "
                  "without it requests may not name a profile");
  cmd->add_option("-t,--threads", a->threads, "Compute threads (0 = all cores)");
  cmd->add_option("--threads-http", a->threads_http,
                  "Connections served at once; more get 503 but /health is still answered "
                  "(0 = max(32, slots + queue + 4), at most 512)");
  cmd->add_option("--kv-store", a->kv_store,
                  "Shared KV tier of compressed prompt-prefix states: dir:PATH or "
                  "redis://HOST:PORT[/prefix] (docs/scale-out.md)");
  cmd->add_option("--kv-store-block", a->kv_store_block,
                  "Tokens per block: the state after each whole block is stored")
      ->capture_default_str();
  cmd->add_option("--kv-store-mb", a->kv_store_mb,
                  "dir: bytes of entries kept, MiB (least recently used removed)")
      ->capture_default_str();
  cmd->add_option("--kv-store-entry-mb", a->kv_store_entry_mb, "Largest entry stored or read, MiB")
      ->capture_default_str();
  cmd->add_option("--kv-store-ttl", a->kv_store_ttl,
                  "redis: seconds an entry lives (EXPIRE; 0 = none, the store's eviction)")
      ->capture_default_str();
  cmd->add_option("--kv-store-timeout-ms", a->kv_store_timeout_ms,
                  "redis: bound on connect, read and write; past it the prompt is computed")
      ->capture_default_str();
  cmd->add_option("--header-timeout", a->header_timeout,
                  "seconds a client has to send a whole request header, from connecting or "
                  "from its previous answer (the body gets 3x); then the connection is closed");
  cmd->add_flag("--no-request-log", a->no_request_log,
                "Do not log one JSON line per request on stderr");
  cmd->callback([a, rc] { *rc = Serve(*a); });
});

}  // namespace
}  // namespace hqekv::cli::cmd_serve
