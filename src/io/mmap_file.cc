#include "io/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/file.h"

namespace hqekv {
namespace {

// The mappings a SIGBUS handler can name: a fixed table (no allocation in
// the handler); slots are claimed with a CAS and cleared at unmap.
struct MappingSlot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<size_t> size{0};
  char path[512] = {};
};
constexpr int kMappingSlots = 64;
MappingSlot g_mappings[kMappingSlots];
std::atomic<bool> g_sigbus_installed{false};
struct sigaction g_old_sigbus;

void WriteAll(const char* s, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void OnSigbus(int sig, siginfo_t* info, void* ctx) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (auto& m : g_mappings) {
    const uintptr_t b = m.begin.load();
    if (b != 0 && addr >= b && addr < b + m.size.load()) {
      static const char a[] = "hqekv: fatal: the file '";
      static const char z[] =
          "' was truncated or rewritten in place while this process had it mapped; "
          "restart, and replace model files by renaming a new file over the old one\n";
      WriteAll(a, sizeof(a) - 1);
      WriteAll(m.path, strnlen(m.path, sizeof(m.path)));
      WriteAll(z, sizeof(z) - 1);
      break;
    }
  }
  // Not ours, or reported: the previous action (by default: end the process
  // with SIGBUS when the faulting access runs again).
  if (g_old_sigbus.sa_flags & SA_SIGINFO) {
    if (g_old_sigbus.sa_sigaction) return g_old_sigbus.sa_sigaction(sig, info, ctx);
  } else if (g_old_sigbus.sa_handler != SIG_DFL && g_old_sigbus.sa_handler != SIG_IGN) {
    return g_old_sigbus.sa_handler(sig);
  }
  signal(SIGBUS, SIG_DFL);
}

void Register(const uint8_t* data, size_t size, const std::string& path) {
  if (!g_sigbus_installed.exchange(true)) {
    struct sigaction sa {};
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_old_sigbus);
  }
  for (auto& m : g_mappings) {
    uintptr_t expected = 0;
    // Claim with a placeholder, fill the path, then publish the range.
    if (m.size.load() != 0 || !m.begin.compare_exchange_strong(expected, 1)) continue;
    std::strncpy(m.path, path.c_str(), sizeof(m.path) - 1);
    m.path[sizeof(m.path) - 1] = '\0';
    m.begin.store(reinterpret_cast<uintptr_t>(data));  // an empty range until the size
    m.size.store(size);
    return;
  }
  // More than kMappingSlots files mapped at once: this one is not named.
}

void Unregister(const uint8_t* data) {
  for (auto& m : g_mappings) {
    if (m.begin.load() == reinterpret_cast<uintptr_t>(data)) {
      m.begin.store(0);
      m.size.store(0);
      return;
    }
  }
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// `size` bytes of `fd` read into fresh anonymous memory (huge pages
// advised), then made read-only. MAP_FAILED on an error, with errno set.
void* ReadIntoPrivateMemory(int fd, size_t size, std::string* failed_call) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    *failed_call = "mmap";
    return MAP_FAILED;
  }
  (void)::madvise(p, size, MADV_HUGEPAGE);  // advice only: fine when refused
  auto* out = static_cast<uint8_t*>(p);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n == 0 ? EIO : errno;  // 0: the file shrank while read
      ::munmap(p, size);
      *failed_call = "read";
      errno = e;
      return MAP_FAILED;
    }
    done += static_cast<size_t>(n);
  }
  if (::mprotect(p, size, PROT_READ) != 0) {
    const int e = errno;
    ::munmap(p, size);
    *failed_call = "mprotect";
    errno = e;
    return MAP_FAILED;
  }
  return p;
}

}  // namespace

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path, Residence residence) {
  // Regular files only (a FIFO would block the open, /dev/zero map without end).
  HQEKV_ASSIGN_OR_RETURN(RegularFile file, RegularFile::Open(path, kMaxMappedFileBytes));
  const int fd = file.fd();
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(file.size());
  if (const char* env = std::getenv("HQEKV_MMAP"); env && std::string(env) == "1") {
    residence = Residence::kMapped;
  }
  if (f->size_ > 0 && residence == Residence::kPrivateCopy) {
    std::string call;
    void* p = ReadIntoPrivateMemory(fd, f->size_, &call);
    if (p == MAP_FAILED) {
      const int e = errno;
      return MakeError("cannot load '" + path + "' into memory (" + call +
                       "): " + std::strerror(e));
    }
    f->data_ = static_cast<const uint8_t*>(p);  // no SIGBUS can come from it
  } else if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      return MakeError("cannot mmap '" + path + "': " + std::strerror(e));
    }
    f->data_ = static_cast<const uint8_t*>(p);
    Register(f->data_, f->size_, path);
  }
  struct stat st {};
  f->fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);  // `file` closes its own
  if (f->fd_ >= 0 && ::fstat(f->fd_, &st) == 0) f->mtime_ns_ = MtimeNs(st);
  return f;
}

Status MappedFile::CheckUnchanged() const {
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return Status::Ok();  // nothing to compare
  if (static_cast<size_t>(st.st_size) == size_ && MtimeNs(st) == mtime_ns_) return Status::Ok();
  return MakeError("the file '" + path_ + "' was modified in place while in use (" +
                   std::to_string(size_) + " bytes when loaded, " + std::to_string(st.st_size) +
                   " now); restart to load it again (replace a model by renaming a new file "
                   "over the old one: a running process keeps the old one)");
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) {
    Unregister(data_);
    ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace hqekv
