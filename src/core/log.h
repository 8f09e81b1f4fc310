// A process-wide log sink for messages the library wants a person to see
// (what was loaded, why a budget cannot be met, why a call failed). The
// library never prints by itself: without a sink, messages are dropped. The
// C API's hqekv_log_set installs the sink; the CLI reports through its own
// channels.
#pragma once

#include <string_view>

namespace hqekv {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// message is NUL-terminated and valid only during the call. The sink may be
// called from any thread (one call at a time) and must not call SetLogSink.
using LogSink = void (*)(LogLevel level, const char* message, void* user);

// Installs the sink (nullptr: drop every message). Thread-safe; a call in
// flight finishes before this returns.
void SetLogSink(LogSink sink, void* user);

// True when a sink is installed (to skip building a message nobody reads).
bool LogEnabled();

// Sends message to the sink, if any.
void Log(LogLevel level, std::string_view message);

}  // namespace hqekv
