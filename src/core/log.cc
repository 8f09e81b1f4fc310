#include "core/log.h"

#include <atomic>
#include <mutex>
#include <string>

namespace hqekv {
namespace {

// One lock serialises the sink's calls and its replacement, so a sink being
// removed is never called after SetLogSink returns.
std::mutex& SinkMutex() {
  static std::mutex m;
  return m;
}
LogSink g_sink = nullptr;
void* g_sink_user = nullptr;
std::atomic<bool> g_sink_set{false};

}  // namespace

void SetLogSink(LogSink sink, void* user) {
  std::lock_guard<std::mutex> lock(SinkMutex());
  g_sink = sink;
  g_sink_user = user;
  g_sink_set.store(sink != nullptr, std::memory_order_release);
}

bool LogEnabled() { return g_sink_set.load(std::memory_order_acquire); }

void Log(LogLevel level, std::string_view message) {
  if (!LogEnabled()) return;
  std::string text;
  try {
    text.assign(message);
  } catch (...) {
    return;  // out of memory while logging: drop the message, not the call
  }
  std::lock_guard<std::mutex> lock(SinkMutex());
  if (g_sink) g_sink(level, text.c_str(), g_sink_user);
}

}  // namespace hqekv
