// Helpers shared by the model-running subcommands (run, ppl, inspect, eval,
// calibrate): which model to load, the thread count. Header-only: the CLI is
// one executable. Reading text files: core/file.h.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>

#include "core/file.h"
#include "core/parallel.h"
#include "core/threads.h"
#include "core/status.h"
#include "io/model_file.h"

namespace hqekv::cli {

// The model a subcommand loads: -m when given, else the default-model rule of
// core/file.h (DefaultModelPath; `kDefaultModelHelp` is its --help text),
// searching the source tree this binary was built from too. `bundled`: the
// subcommand's own default model (a repository path) when not stories260K.
inline std::string ModelPathOrDefault(const std::string& model_arg,
                                      std::string_view bundled = kBundledDefaultModel) {
  if (!model_arg.empty()) return model_arg;
#ifdef HQEKV_SOURCE_DIR
  return DefaultModelPath(HQEKV_SOURCE_DIR, bundled);
#else
  return DefaultModelPath("", bundled);
#endif
}

// A bundled file (models/..., data/text/...): as given when it exists from
// the working directory, else core/file.h's FindBundled (installed
// share/hqekv/, the build tree's repository, the source tree).
inline std::string BundledPath(const std::string& rel) {
  std::error_code ec;
  if (std::filesystem::exists(rel, ec)) return rel;
#ifdef HQEKV_SOURCE_DIR
  return FindBundled(rel, HQEKV_SOURCE_DIR);
#else
  return FindBundled(rel, "");
#endif
}

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

// Bytes one context position costs at most, for the memory check of --ctx:
// its fp16 K and V in every layer (2 x 2 bytes x n_layers x kv_dim; the
// compressed policies hold less, so this is an upper bound), plus the fp32
// scratch of one batch row of the forward pass (x, h, q, att, k, v, gate,
// up) and one row of logits (ppl scores a whole window in one batch).
inline double BytesPerContextPosition(const ModelConfig& c) {
  const double kv = 2.0 * 2.0 * c.n_layers * static_cast<double>(c.kv_dim());
  const double scratch = 4.0 * (2.0 * c.d_model + 2.0 * c.q_dim() + 2.0 * c.kv_dim() +
                                2.0 * c.d_ff + static_cast<double>(c.vocab_size));
  return kv + scratch;
}

// --ctx (`flag` names it in errors) checked before anything is allocated for
// it: positive, and its KV cache and scratch (BytesPerContextPosition) must
// fit in this machine's physical memory. More than the model's trained
// context (`c.max_ctx`, llama.context_length) is allowed, as in llama.cpp,
// with a warning on stderr naming both numbers. `ctx` 0 is not checked (the
// caller's default).
inline Status CheckContext(int64_t ctx, const ModelConfig& c, const char* flag = "--ctx") {
  const std::string f = flag;
  if (ctx < 0) return MakeError(f + " must be > 0, got " + std::to_string(ctx));
  if (ctx == 0) return Status::Ok();
  const double bytes = BytesPerContextPosition(c) * static_cast<double>(ctx);  // no overflow
  const uint64_t ram = PhysicalMemoryBytes();
  if (ram > 0 && bytes > static_cast<double>(ram)) {
    char need[32];
    std::snprintf(need, sizeof need, "%.1f", bytes / (1 << 30));
    return MakeError(f + " " + std::to_string(ctx) + " needs " + need +
                     " GiB (an fp16 KV cache and the scratch of that many positions), more than "
                     "the " +
                     std::to_string(ram >> 30) + " GiB of memory of this machine");
  }
  if (c.max_ctx > 0 && ctx > c.max_ctx) {
    std::fprintf(stderr,
                 "hqekv: warning: %s %lld is more than the model's trained context of %d tokens "
                 "(%s.context_length); quality past it is not guaranteed\n",
                 flag, static_cast<long long>(ctx), c.max_ctx,
                 c.arch.empty() ? "llama" : c.arch.c_str());
  }
  return Status::Ok();
}

}  // namespace hqekv::cli
