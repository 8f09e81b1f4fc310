// Reading and writing user-named files, and where the default model is found.
//
// Every file the program reads goes through OpenRegularFile (or ReadTextFile /
// ReadFileChecked on top of it): the path must name a regular file no larger
// than a limit, so a FIFO, a device (/dev/zero) or a directory is refused with
// a message naming the path instead of hanging or reading without end.
// Every file the program writes goes through AtomicFileWriter (or
// WriteFileAtomic): bytes go to a temporary file in the same directory, which
// is flushed, fsynced, closed and only then renamed over the target, so a
// failed write (full disk, I/O error) leaves what was there before intact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace hqekv {

// Size limits (bytes) of files read whole into memory.
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{1} << 30;  // texts, prompts: 1 GiB
inline constexpr uint64_t kMaxJsonFileBytes = uint64_t{256}
                                              << 20;  // profiles, cells, results: 256 MiB
// Limit of files mapped, not read (model weights): 4 TiB, only a sanity bound.
inline constexpr uint64_t kMaxMappedFileBytes = uint64_t{1} << 42;

// A read-only descriptor of a regular file, closed on destruction (move-only).
class RegularFile {
 public:
  // Checks, before opening, that `path` names a regular file (following
  // symbolic links) of at most `max_bytes`; opens it non-blocking (a FIFO
  // swapped in after the check cannot block the open) and checks the opened
  // descriptor again. Errors name the path: "file 'P' does not exist",
  // "'P' is a directory, not a regular file", "'P' is a FIFO, not a regular
  // file", "'P' is N bytes, more than the limit of M bytes", "cannot open 'P': ...".
  static Result<RegularFile> Open(const std::string& path, uint64_t max_bytes);

  RegularFile(RegularFile&& o) noexcept;
  RegularFile& operator=(RegularFile&& o) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // bytes, as fstat saw them at open
  const std::string& path() const { return path_; }

  // The whole content, at most the limit given to Open (a file that grew past
  // it since is refused, not truncated). Reads from the current offset.
  Result<std::string> ReadAll();

  // Up to `n` bytes at `offset` (pread: the file offset is not moved) into
  // `buf`; fewer only at the end of the file. Errors name the path.
  Result<size_t> ReadAt(uint64_t offset, void* buf, size_t n) const;

 private:
  RegularFile(int fd, uint64_t size, uint64_t max_bytes, std::string path)
      : fd_(fd), size_(size), max_bytes_(max_bytes), path_(std::move(path)) {}
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t max_bytes_ = 0;
  std::string path_;
};

// The whole file as bytes (an empty file gives ""), through RegularFile::Open
// with `max_bytes`; errors name the path (see RegularFile::Open).
Result<std::string> ReadFileChecked(const std::string& path, uint64_t max_bytes);

// ReadFileChecked with the text limit: texts, prompts.
inline Result<std::string> ReadTextFile(const std::string& path) {
  return ReadFileChecked(path, kMaxTextFileBytes);
}

// Writes a file, by one rule for every output path (docs/reliability.md):
// - a regular file or a missing name: atomically. Create makes a temporary
//   file next to it (".NAME.tmp.PID.N" in the same directory, so the rename
//   cannot cross file systems), Write appends to it, Commit flushes it to disk
//   (fsync), closes it and renames it over the target (then fsyncs the
//   directory);
// - a symbolic link: followed, as shell `>` does. The link stays a link; its
//   final target is what the rules here apply to (a dangling link's target is
//   created, atomically);
// - a character or block device, FIFO or socket: written through, opened as
//   shell `>` opens it (O_TRUNC, which devices ignore; a FIFO waits for its
//   reader). There is no old content to keep, so a failed write is not undone;
// - a directory: refused. Any failing step is
// an error naming `path` and the system's reason; a writer destroyed without
// a successful Commit removes its temporary file, and `path` keeps whatever it
// held. An existing target keeps its permission bits. A SIGINT, SIGTERM or
// SIGHUP that would kill the process (default disposition) while a writer is
// open first removes every open temporary file (a handler installed at the
// first Create, for signals still at their default), then kills the process
// as the signal would have. Concurrent writers of one path (threads or
// processes) each write their own temporary file; the last rename wins and
// the target is always one complete version.
class AtomicFileWriter {
 public:
  static Result<AtomicFileWriter> Create(const std::string& path);

  AtomicFileWriter(AtomicFileWriter&& o) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&& o) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  Status Write(const void* data, size_t n);
  Status Write(std::string_view bytes) { return Write(bytes.data(), bytes.size()); }
  Status Commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }  // "" when writing through

 private:
  AtomicFileWriter(int fd, std::string path, std::string tmp, int slot)
      : fd_(fd), path_(std::move(path)), tmp_(std::move(tmp)), slot_(slot) {}
  Status Fail(const std::string& what, int err);  // removes the temporary file
  int fd_ = -1;
  std::string path_, tmp_;  // tmp_ is empty when writing through a device or FIFO
  std::string target_;      // what the rename replaces: path_ with its links resolved
  bool done_ = false;       // committed or failed: nothing left to clean up
  int slot_ = -1;           // entry in the signal handler's list of open temporary files
};

// `bytes` as the whole new content of `path`, atomically (AtomicFileWriter).
Status WriteFileAtomic(const std::string& path, std::string_view bytes);

// Checks, before long work, that `path` could be written later: not a
// directory, and a temporary file can be created next to it (tried and
// removed); when its directory does not exist yet, the nearest existing
// ancestor must be a writable directory (the writer creates the rest).
// Errors name the path, e.g. "cannot write '/proc/x.json': ...".
Status CheckWritable(const std::string& path);

// Checks that standard output took every byte written to it: flushes stdout
// and tests its error flag (a full disk, /dev/full, a closed pipe with SIGPIPE
// ignored). The error says "cannot write standard output: REASON".
Status CheckStdout();

// A bundled file or folder (a model under models/, a text under data/text/),
// given by its path relative to the repository root: the first that exists
// of $HQEKV_DATA_DIR/REL, the installed copy next to the running executable
// (PREFIX/bin/hqekv -> PREFIX/share/hqekv/REL, where `cmake --install` puts
// them), the executable's ../REL and ../../REL (a build tree inside the
// repository), `source_dir`/REL (the source tree the binary was built from;
// "" skips it), and REL in the working directory. None: REL itself (opening
// it then reports it missing).
std::string FindBundled(std::string_view rel, std::string_view source_dir);

// The bundled model a subcommand loads when given neither -m nor $HQEKV_MODEL.
inline constexpr const char* kBundledDefaultModel = "models/stories260K.gguf";

// The model used when a subcommand gets no -m: $HQEKV_MODEL when set and not
// empty; else FindBundled(bundled, source_dir). `bundled` is the repository
// path of the subcommand's own default (eval: models/refmodel-4l.gguf).
std::string DefaultModelPath(std::string_view source_dir,
                             std::string_view bundled = kBundledDefaultModel);

// The rule above in one line, for every subcommand's --help of -m.
inline constexpr const char* kDefaultModelHelp =
    "model file, GGUF or llama2.c .bin (default: $HQEKV_MODEL, else the bundled "
    "models/stories260K.gguf)";

}  // namespace hqekv
