// Errors, version and threads of the C API.
#include <algorithm>
#include <string>
#include <thread>

#include "capi/handles.h"
#include "core/log.h"
#include "core/parallel.h"
#include "core/threads.h"

#ifndef HQEKV_VERSION_STRING
#define HQEKV_VERSION_STRING "unknown"
#endif

namespace hqekv::capi {
namespace {
thread_local std::string last_error;
}  // namespace

// The callback of hqekv_log_set, called through core's sink.
struct LogBox {
  hqekv_log_callback callback = nullptr;
  void* user = nullptr;
};
LogBox log_box;

void LogTrampoline(hqekv::LogLevel level, const char* message, void* box) {
  const LogBox& b = *static_cast<const LogBox*>(box);
  if (b.callback) b.callback(static_cast<hqekv_log_level>(level), message, b.user);
}

hqekv_status Fail(hqekv_status status, std::string message) {
  hqekv::Log(hqekv::LogLevel::kError, message);
  try {
    last_error = std::move(message);
  } catch (...) {
    // Out of memory while recording the message: keep the status.
  }
  return status;
}

void LogBudgetNote(hqekv_context* ctx, const hqekv::KvCache& cache, int32_t seq) {
  if (!hqekv::LogEnabled()) return;
  const std::string note = cache.BudgetNote();
  bool& warned = ctx->budget_warned[seq];
  const bool was = warned;
  warned = !note.empty();
  if (note.empty() || was) return;
  hqekv::Log(hqekv::LogLevel::kWarn, "sequence " + std::to_string(seq) + ": " + note);
}

hqekv_status CopyOut(const char* fn, const std::string& s, char* buf, size_t cap, size_t* len) {
  if (!len) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": len is NULL");
  if (cap > 0 && !buf)
    return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": buf is NULL but cap > 0");
  *len = s.size();
  if (cap > 0) {
    const size_t n = s.size() < cap - 1 ? s.size() : cap - 1;
    s.copy(buf, n);
    buf[n] = '\0';
  }
  if (s.size() + 1 > cap) {
    return Fail(HQEKV_ERR_BUFFER_TOO_SMALL, std::string(fn) + ": the output needs " +
                                                std::to_string(s.size() + 1) + " bytes, cap is " +
                                                std::to_string(cap));
  }
  return HQEKV_OK;
}

hqekv_status CheckAbort(const char* fn, const hqekv_context* ctx) {
  if (ctx && ctx->abort_fn && ctx->abort_fn(ctx->abort_user) != 0)
    return Fail(HQEKV_ERR_ABORTED, std::string(fn) + ": stopped by the abort callback");
  return HQEKV_OK;
}

}  // namespace hqekv::capi

extern "C" {

const char* hqekv_last_error(void) { return hqekv::capi::last_error.c_str(); }

const char* hqekv_status_name(hqekv_status status) {
  switch (status) {
    case HQEKV_OK:
      return "HQEKV_OK";
    case HQEKV_ERR_INVALID_ARGUMENT:
      return "HQEKV_ERR_INVALID_ARGUMENT";
    case HQEKV_ERR_BUFFER_TOO_SMALL:
      return "HQEKV_ERR_BUFFER_TOO_SMALL";
    case HQEKV_ERR_LOAD:
      return "HQEKV_ERR_LOAD";
    case HQEKV_ERR_SPEC:
      return "HQEKV_ERR_SPEC";
    case HQEKV_ERR_CONTEXT_FULL:
      return "HQEKV_ERR_CONTEXT_FULL";
    case HQEKV_ERR_STATE:
      return "HQEKV_ERR_STATE";
    case HQEKV_ERR_COMPUTE:
      return "HQEKV_ERR_COMPUTE";
    case HQEKV_ERR_OUT_OF_MEMORY:
      return "HQEKV_ERR_OUT_OF_MEMORY";
    case HQEKV_ERR_INTERNAL:
      return "HQEKV_ERR_INTERNAL";
    case HQEKV_ERR_ABORTED:
      return "HQEKV_ERR_ABORTED";
  }
  return "HQEKV_ERR_UNKNOWN";
}

int hqekv_api_version(void) { return HQEKV_API_VERSION; }

void hqekv_log_set(hqekv_log_callback callback, void* user) {
  // Remove the sink first: after that no call is in flight, so the box can
  // change without a race; then install the trampoline over the new box.
  hqekv::SetLogSink(nullptr, nullptr);
  if (!callback) return;
  hqekv::capi::log_box = {callback, user};
  hqekv::SetLogSink(hqekv::capi::LogTrampoline, &hqekv::capi::log_box);
}

const char* hqekv_version(void) { return HQEKV_VERSION_STRING; }

hqekv_status hqekv_set_threads(int n_threads) {
  using hqekv::capi::Fail;
  return hqekv::capi::Guard("hqekv_set_threads", [&] {
    if (n_threads < 0) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  "hqekv_set_threads: n_threads must be >= 0, got " + std::to_string(n_threads));
    }
    if (n_threads > hqekv::MaxThreads()) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  "hqekv_set_threads: n_threads " + std::to_string(n_threads) + " is more than " +
                      std::to_string(hqekv::MaxThreads()) + " (4 x the " +
                      std::to_string(hqekv::CpuCount()) + " cores, at least 16)");
    }
    hqekv::SetNumThreads(n_threads > 0 ? n_threads : hqekv::CpuCount());
    return HQEKV_OK;
  });
}

}  // extern "C"
