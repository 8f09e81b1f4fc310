// Helpers shared by the model-running subcommands (run, ppl, gen-synthetic):
// where the bundled model is, reading a text file, loading a model with a
// clear error. Header-only: the CLI is one executable.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "core/parallel.h"
#include "model/model_source.h"

namespace hqekv::cli {

// The bundled default model: $HQEKV_MODEL, else models/stories260K.gguf next
// to the executable's build tree (../models, ../../models), in the source
// tree this binary was built from, or in the working directory.
inline std::string DefaultModelPath() {
  if (const char* env = std::getenv("HQEKV_MODEL"); env && *env) return env;
  const std::string rel = "models/stories260K.gguf";
  std::error_code ec;
  std::vector<std::filesystem::path> candidates;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / ".." / rel);
    candidates.push_back(exe.parent_path() / ".." / ".." / rel);
  }
#ifdef HQEKV_SOURCE_DIR
  candidates.push_back(std::filesystem::path(HQEKV_SOURCE_DIR) / rel);
#endif
  candidates.push_back(rel);
  for (const auto& c : candidates) {
    if (std::filesystem::is_regular_file(c, ec)) return std::filesystem::weakly_canonical(c, ec).string();
  }
  return rel;  // LoadModel reports it missing
}

// Reads a whole file; false (with *err set) when it cannot be read.
inline bool ReadTextFile(const std::string& path, std::string* out, std::string* err) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    *err = "file '" + path + "' does not exist";
    return false;
  }
  if (std::filesystem::is_directory(path, ec)) {
    *err = "'" + path + "' is a directory, not a text file";
    return false;
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *err = "cannot open '" + path + "'";
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

// Sets the thread pool size (0 = all cores).
inline void ApplyThreads(int threads) {
  SetNumThreads(threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace hqekv::cli
