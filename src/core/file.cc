#include "core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <mutex>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

namespace hqekv {
namespace {

std::string Quote(const std::string& path) { return "'" + path + "'"; }

std::string Reason(int err) { return std::strerror(err); }

// What a non-regular file is, for the error message.
const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The checks shared by the path (stat) and the open descriptor (fstat).
Status CheckStat(const struct stat& st, const std::string& path, uint64_t max_bytes) {
  if (!S_ISREG(st.st_mode)) {
    const char* kind = KindOf(st.st_mode);
    if (std::strcmp(kind, "not a regular file") == 0)
      return MakeError(Quote(path) + " is not a regular file");
    return MakeError(Quote(path) + " is " + kind + ", not a regular file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    return MakeError(Quote(path) + " is " + std::to_string(size) +
                     " bytes, more than the limit of " + std::to_string(max_bytes) + " bytes");
  }
  return Status::Ok();
}

// write(2) until all n bytes are taken, retrying on EINTR and short writes.
int WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

}  // namespace

Result<RegularFile> RegularFile::Open(const std::string& path, uint64_t max_bytes) {
  if (path.empty()) return MakeError("empty file name");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT) return MakeError("file " + Quote(path) + " does not exist");
    return MakeError("cannot open " + Quote(path) + ": " + Reason(e));
  }
  HQEKV_RETURN_IF_ERROR(CheckStat(st, path, max_bytes));
  // O_NONBLOCK: if the path was swapped for a FIFO since the stat, the open
  // returns at once instead of waiting for a writer; fstat then refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return MakeError("cannot open " + Quote(path) + ": " + Reason(errno));
  RegularFile f(fd, 0, max_bytes, path);
  if (::fstat(fd, &st) != 0) return MakeError("cannot stat " + Quote(path) + ": " + Reason(errno));
  HQEKV_RETURN_IF_ERROR(CheckStat(st, path, max_bytes));
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  f.size_ = static_cast<uint64_t>(st.st_size);
  return f;
}

RegularFile::RegularFile(RegularFile&& o) noexcept
    : fd_(o.fd_), size_(o.size_), max_bytes_(o.max_bytes_), path_(std::move(o.path_)) {
  o.fd_ = -1;
}

RegularFile& RegularFile::operator=(RegularFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    size_ = o.size_;
    max_bytes_ = o.max_bytes_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::string> RegularFile::ReadAll() {
  std::string out;
  // Files of /proc report size 0 and still have content: read to EOF, bounded.
  out.reserve(static_cast<size_t>(size_));
  std::vector<char> buf(size_t{1} << 16);
  for (;;) {
    const ssize_t r = ::read(fd_, buf.data(), buf.size());
    if (r < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      if (e == EISDIR) return MakeError(Quote(path_) + " is a directory, not a regular file");
      return MakeError("error reading " + Quote(path_) + ": " + Reason(e));
    }
    if (r == 0) break;
    if (out.size() + static_cast<uint64_t>(r) > max_bytes_) {
      return MakeError(Quote(path_) + " grew past the limit of " + std::to_string(max_bytes_) +
                       " bytes while being read");
    }
    out.append(buf.data(), static_cast<size_t>(r));
  }
  return out;
}

Result<size_t> RegularFile::ReadAt(uint64_t offset, void* buf, size_t n) const {
  size_t got = 0;
  while (got < n) {
    const ssize_t r =
        ::pread(fd_, static_cast<char*>(buf) + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return MakeError("error reading " + Quote(path_) + ": " + Reason(errno));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

Result<std::string> ReadFileChecked(const std::string& path, uint64_t max_bytes) {
  HQEKV_ASSIGN_OR_RETURN(RegularFile f, RegularFile::Open(path, max_bytes));
  return f.ReadAll();
}

namespace {

// Temporary files of open writers, for the signal handler: fixed slots (no
// allocation in the handler), each free (0), being filled (1) or live (2).
constexpr int kTempSlots = 64;
constexpr size_t kTempPathMax = 4096;
struct TempSlot {
  std::atomic<int> state{0};
  char path[kTempPathMax];
};
TempSlot g_temp_slots[kTempSlots];

// Async-signal-safe: unlink(2) and raise(2) only. Restores the default action
// and re-raises, so the process ends as the signal would have ended it.
extern "C" void RemoveTempsAndDie(int sig) {
  for (TempSlot& t : g_temp_slots) {
    if (t.state.load(std::memory_order_acquire) == 2) ::unlink(t.path);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void InstallTempCleanup() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
      struct sigaction sa {};
      sa.sa_handler = RemoveTempsAndDie;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

// A slot for `tmp` (-1 when all are taken or the path is too long: that file
// is then only removed by the writer's destructor).
int RegisterTemp(const std::string& tmp) {
  InstallTempCleanup();
  if (tmp.size() >= kTempPathMax) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = 0;
    if (g_temp_slots[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_temp_slots[i].path, tmp.c_str(), tmp.size() + 1);
      g_temp_slots[i].state.store(2, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void UnregisterTemp(int slot) {
  if (slot >= 0) g_temp_slots[slot].state.store(0, std::memory_order_release);
}

}  // namespace

namespace {

// The last name of a chain of symbolic links starting at `path` that does not
// exist yet (a dangling link): shell `>` creates that file, so the writer
// does too. At most 40 hops (Linux's MAXSYMLINKS), then ELOOP.
Result<std::string> DanglingTarget(const std::string& path) {
  namespace fs = std::filesystem;
  std::string p = path;
  for (int hop = 0; hop < 40; ++hop) {
    struct stat lst {};
    if (::lstat(p.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) return p;
    std::error_code ec;
    const fs::path link = fs::read_symlink(p, ec);
    if (ec) return MakeError("cannot write " + Quote(path) + ": " + ec.message());
    p = link.is_absolute() ? link.string() : (fs::path(p).parent_path() / link).string();
  }
  return MakeError("cannot write " + Quote(path) + ": " + Reason(ELOOP));
}

}  // namespace

Result<AtomicFileWriter> AtomicFileWriter::Create(const std::string& path) {
  if (path.empty()) return MakeError("empty output file name");
  namespace fs = std::filesystem;
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;  // follows symbolic links
  if (exists && S_ISDIR(st.st_mode))
    return MakeError("cannot write " + Quote(path) + ": it is a directory");
  if (exists && !S_ISREG(st.st_mode)) {
    // A device, FIFO or socket (directly or behind a link): written through,
    // as shell `>` does; there is no old content a rename could keep.
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return MakeError("cannot write " + Quote(path) + ": " + Reason(errno));
    return AtomicFileWriter(fd, path, std::string(), -1);
  }
  // The file the rename replaces: a link's final target, so the link stays.
  std::string target_path = path;
  if (exists) {
    std::error_code ec;
    const fs::path canon = fs::canonical(path, ec);
    if (ec) return MakeError("cannot write " + Quote(path) + ": " + ec.message());
    target_path = canon.string();
  } else {
    HQEKV_ASSIGN_OR_RETURN(target_path, DanglingTarget(path));
  }
  const fs::path target(target_path);
  const std::string name = target.filename().string();
  if (name.empty() || name == "." || name == "..") {
    return MakeError("cannot write " + Quote(path) + ": not a file name");
  }
  // Same directory as the target: rename(2) is atomic only within one file system.
  static std::atomic<uint64_t> counter{0};
  const fs::path dir = target.parent_path();
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string tmp_name = "." + name + ".tmp." + std::to_string(::getpid()) + "." +
                                 std::to_string(counter.fetch_add(1));
    const std::string tmp = (dir.empty() ? fs::path(tmp_name) : dir / tmp_name).string();
    // 0666 less the umask, as a plain create would; an existing target's bits below.
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd < 0) {
      if (errno == EEXIST) continue;
      return MakeError("cannot write " + Quote(path) + ": cannot create a temporary file in " +
                       Quote(dir.empty() ? std::string(".") : dir.string()) + ": " + Reason(errno));
    }
    if (exists) ::fchmod(fd, st.st_mode & 07777);
    AtomicFileWriter w(fd, path, tmp, RegisterTemp(tmp));
    w.target_ = target_path;
    return w;
  }
  return MakeError("cannot write " + Quote(path) + ": no free temporary file name");
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& o) noexcept
    : fd_(o.fd_),
      path_(std::move(o.path_)),
      tmp_(std::move(o.tmp_)),
      target_(std::move(o.target_)),
      done_(o.done_),
      slot_(o.slot_) {
  o.fd_ = -1;
  o.done_ = true;
  o.slot_ = -1;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!done_) {
    if (fd_ >= 0) ::close(fd_);
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
  }
  UnregisterTemp(slot_);
}

Status AtomicFileWriter::Fail(const std::string& what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  const bool through = tmp_.empty();
  if (!through) ::unlink(tmp_.c_str());
  done_ = true;
  UnregisterTemp(slot_);
  slot_ = -1;
  if (through)  // a device or FIFO: the bytes already written are gone
    return MakeError("error writing " + Quote(path_) + ": " + what + ": " + Reason(err));
  return MakeError("error writing " + Quote(path_) + ": " + what + ": " + Reason(err) + " (" +
                   Quote(path_) + " is unchanged)");
}

Status AtomicFileWriter::Write(const void* data, size_t n) {
  if (done_ || fd_ < 0)
    return MakeError("error writing " + Quote(path_) + ": the writer is closed");
  if (const int e = WriteAll(fd_, static_cast<const char*>(data), n); e != 0)
    return Fail("write", e);
  return Status::Ok();
}

Status AtomicFileWriter::Commit() {
  if (done_ || fd_ < 0)
    return MakeError("error writing " + Quote(path_) + ": the writer is closed");
  const bool through = tmp_.empty();
  // fsync before rename: otherwise a crash can leave the new name on empty data.
  // Pipes, sockets and most devices cannot be synced (EINVAL, EROFS).
  if (::fsync(fd_) != 0 && errno != EINVAL && !(through && errno == EROFS))
    return Fail("fsync", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int e = errno;
    return Fail("close", e);
  }
  if (through) {
    done_ = true;
    return Status::Ok();
  }
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) {
    const int e = errno;
    return Fail("rename from " + Quote(tmp_), e);
  }
  done_ = true;
  UnregisterTemp(slot_);
  slot_ = -1;
  // Make the rename itself durable; best effort (some file systems refuse it).
  const std::filesystem::path dir = std::filesystem::path(target_).parent_path();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, std::string_view bytes) {
  HQEKV_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Create(path));
  HQEKV_RETURN_IF_ERROR(w.Write(bytes));
  return w.Commit();
}

Status CheckWritable(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (struct stat st{};
      ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    // A device or FIFO is written through later: opening it now could block
    // (a FIFO without a reader) or consume it, so only the permission is asked.
    if (::access(path.c_str(), W_OK) != 0)
      return MakeError("cannot write " + Quote(path) + ": " + Reason(errno));
    return Status::Ok();
  }
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty() || fs::is_directory(parent, ec)) {
    HQEKV_ASSIGN_OR_RETURN(AtomicFileWriter probe, AtomicFileWriter::Create(path));
    return Status::Ok();  // the probe's destructor removes its temporary file
  }
  fs::path up = parent;
  while (!up.empty() && !fs::exists(up, ec)) {
    if (up == up.parent_path()) break;
    up = up.parent_path();
  }
  if (up.empty()) up = ".";
  if (!fs::is_directory(up, ec)) {
    return MakeError("cannot write " + Quote(path) + ": " + Quote(up.string()) +
                     " is not a directory");
  }
  if (::access(up.c_str(), W_OK | X_OK) != 0) {
    return MakeError("cannot write " + Quote(path) + ": cannot create directories in " +
                     Quote(up.string()) + ": " + Reason(errno));
  }
  return Status::Ok();
}

Status CheckStdout() {
  errno = 0;
  const bool flush_failed = std::fflush(stdout) != 0;
  const int e = errno;
  if (flush_failed || std::ferror(stdout)) {
    return MakeError(std::string("cannot write standard output: ") +
                     (e != 0 ? Reason(e) : "write error"));
  }
  return Status::Ok();
}

std::string FindBundled(std::string_view rel_view, std::string_view source_dir) {
  const std::filesystem::path rel{std::string(rel_view)};
  std::error_code ec;
  std::vector<std::filesystem::path> candidates;
  if (const char* env = std::getenv("HQEKV_DATA_DIR"); env && *env)
    candidates.push_back(std::filesystem::path(env) / rel);
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path bin = exe.parent_path();
    candidates.push_back(bin / ".." / "share" / "hqekv" / rel);
    candidates.push_back(bin / ".." / rel);
    candidates.push_back(bin / ".." / ".." / rel);
  }
  if (!source_dir.empty()) candidates.push_back(std::filesystem::path(source_dir) / rel);
  candidates.push_back(rel);
  for (const auto& c : candidates) {
    if (std::filesystem::exists(c, ec)) return std::filesystem::weakly_canonical(c, ec).string();
  }
  return rel.string();
}

std::string DefaultModelPath(std::string_view source_dir, std::string_view bundled) {
  if (const char* env = std::getenv("HQEKV_MODEL"); env && *env) return env;
  return FindBundled(bundled, source_dir);
}

}  // namespace hqekv
