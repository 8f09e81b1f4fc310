#include "core/file.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace hqekv {

Result<std::string> ReadTextFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return MakeError("file '" + path + "' does not exist");
  if (std::filesystem::is_directory(path, ec)) return MakeError("'" + path + "' is a directory, not a text file");
  std::ifstream f(path, std::ios::binary);
  if (!f) return MakeError("cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return MakeError("error reading '" + path + "'");
  return ss.str();
}

std::string DefaultModelPath(std::string_view source_dir) {
  if (const char* env = std::getenv("HQEKV_MODEL"); env && *env) return env;
  const std::string rel = "models/stories260K.gguf";
  std::error_code ec;
  std::vector<std::filesystem::path> candidates;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / ".." / rel);
    candidates.push_back(exe.parent_path() / ".." / ".." / rel);
  }
  if (!source_dir.empty()) candidates.push_back(std::filesystem::path(source_dir) / rel);
  candidates.push_back(rel);
  for (const auto& c : candidates) {
    if (std::filesystem::is_regular_file(c, ec)) return std::filesystem::weakly_canonical(c, ec).string();
  }
  return rel;
}

}  // namespace hqekv
