#include "io/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/file.h"

namespace hqekv {

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  // Regular files only (a FIFO would block the open, /dev/zero map without end).
  HQEKV_ASSIGN_OR_RETURN(RegularFile file, RegularFile::Open(path, kMaxMappedFileBytes));
  const int fd = file.fd();
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(file.size());
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      return MakeError("cannot mmap '" + path + "': " + std::strerror(e));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  // `file` closes the descriptor; the mapping stays valid without it.
  return f;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace hqekv
