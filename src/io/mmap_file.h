// Read-only memory mapping of a whole file. Tensor data pointers of a loaded
// model point into it, so it must outlive them (ModelSource owns it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace hqekv {

class MappedFile {
 public:
  // Maps `path` read-only (MAP_PRIVATE). An empty file maps to size() == 0.
  // Errors name the path and the failing system call.
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace hqekv
