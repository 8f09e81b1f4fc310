// Helpers shared by the model-running subcommands (run, ppl, inspect, eval,
// calibrate): which model to load, the thread count. Header-only: the CLI is
// one executable. Reading text files: core/file.h.
#pragma once

#include <algorithm>
#include <string>
#include <thread>

#include "core/file.h"
#include "core/parallel.h"

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

// Sets the thread pool size (0 = all cores).
inline void ApplyThreads(int threads) {
  SetNumThreads(threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace hqekv::cli
