// Read-only memory mapping of a whole file. Tensor data pointers of a loaded
// model point into it, so it must outlive them (ModelSource owns it).
//
// A file rewritten in place while mapped (same inode: `cp new old`, a
// truncate, an editor saving over it) changes what the mapping reads, even
// MAP_PRIVATE (clean pages come from the page cache), and a truncation makes
// a read past the new end raise SIGBUS. Replacing a file by renaming a new
// one over it is safe (the mapping keeps the old inode). So: CheckUnchanged
// compares the open descriptor's size and modification time with those at
// Open (a long-running process calls it before each unit of work and
// refuses it), and a SIGBUS inside any mapping ends the process with a
// message naming the file instead of a bare "Bus error".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace hqekv {

// Where the bytes of an opened file live.
enum class Residence {
  // The file's pages, mapped (MAP_PRIVATE): shared with the page cache.
  kMapped,
  // A private copy read into anonymous memory advised for huge pages, then
  // made read-only. Model weights use it: on a shared machine a 1-thread
  // Q4_K decode read its weights from the mapped file 4-8x slower per CPU
  // second than from a private copy (docs/performance.md, "Weights in private
  // memory"); llama.cpp's CPU backend also repacks weights into its own
  // buffers. $HQEKV_MMAP=1 keeps the mapping instead.
  kPrivateCopy,
};

class MappedFile {
 public:
  // Opens `path` read-only as `residence` says. An empty file gives size()
  // == 0. Errors name the path and the failing system call.
  static Result<std::unique_ptr<MappedFile>> Open(const std::string& path,
                                                  Residence residence = Residence::kMapped);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // An error naming the file when it was modified or truncated in place
  // since Open (its size or modification time changed).
  Status CheckUnchanged() const;

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  int fd_ = -1;  // kept open: fstat sees in-place changes, a rename does not matter
  int64_t mtime_ns_ = 0;
};

}  // namespace hqekv
