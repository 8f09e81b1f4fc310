// Helpers shared by the model-running subcommands (run, ppl, inspect, eval,
// calibrate): which model to load, the thread count. Header-only: the CLI is
// one executable. Reading text files: core/file.h.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>

#include "core/file.h"
#include "core/parallel.h"
#include "core/status.h"
#include "io/model_file.h"

namespace hqekv::cli {

// The model a subcommand loads: -m when given, else the default-model rule of
// core/file.h (DefaultModelPath; `kDefaultModelHelp` is its --help text),
// searching the source tree this binary was built from too.
inline std::string ModelPathOrDefault(const std::string& model_arg) {
  if (!model_arg.empty()) return model_arg;
#ifdef HQEKV_SOURCE_DIR
  return DefaultModelPath(HQEKV_SOURCE_DIR);
#else
  return DefaultModelPath("");
#endif
}

inline int CpuCount() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Most threads -t accepts: 4 x the cores (at least 16). More only adds
// contention, and a typo like `-t 10000` would start 10,000 threads.
inline int MaxThreads() { return std::max(16, 4 * CpuCount()); }

// -t: 0 = all cores, else 1..MaxThreads(); errors name the flag and the limit.
inline Status CheckThreads(int threads) {
  if (threads < 0)
    return MakeError("-t must be >= 0 (0 = all cores), got " + std::to_string(threads));
  if (threads > MaxThreads()) {
    return MakeError("-t " + std::to_string(threads) + " is more than " +
                     std::to_string(MaxThreads()) + " threads (4 x the " +
                     std::to_string(CpuCount()) + " cores of this machine)");
  }
  return Status::Ok();
}

// Checks -t, then sets the thread pool size (0 = all cores).
inline Status ApplyThreads(int threads) {
  HQEKV_RETURN_IF_ERROR(CheckThreads(threads));
  SetNumThreads(threads > 0 ? threads : CpuCount());
  return Status::Ok();
}

// Physical memory of this machine, bytes (0 when unknown).
inline uint64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

// --ctx (`flag` names it in errors) checked before anything is allocated for
// it: positive, at most the model's context length (`c.max_ctx`, when the
// model declares one) and an fp16 K+V cache of that many tokens must fit in
// this machine's memory. `ctx` 0 is not checked (the caller's default).
inline Status CheckContext(int64_t ctx, const ModelConfig& c, const char* flag = "--ctx") {
  const std::string f = flag;
  if (ctx < 0) return MakeError(f + " must be > 0, got " + std::to_string(ctx));
  if (ctx == 0) return Status::Ok();
  if (c.max_ctx > 0 && ctx > c.max_ctx) {
    return MakeError(f + " " + std::to_string(ctx) +
                     " is more than the model's context length of " + std::to_string(c.max_ctx) +
                     " tokens");
  }
  // [n_layers][K,V][ctx][n_kv_heads * head_dim] fp16 (2 bytes), in double: no overflow.
  const double fp16_bytes = 2.0 * 2.0 * c.n_layers * static_cast<double>(c.n_kv_heads) *
                            c.head_dim * static_cast<double>(ctx);
  const uint64_t ram = PhysicalMemoryBytes();
  if (ram > 0 && fp16_bytes > static_cast<double>(ram)) {
    return MakeError(f + " " + std::to_string(ctx) + " needs " +
                     std::to_string(fp16_bytes / (1 << 30)) +
                     " GiB for an fp16 KV cache, more than the " + std::to_string(ram >> 30) +
                     " GiB of memory of this machine");
  }
  return Status::Ok();
}

}  // namespace hqekv::cli
