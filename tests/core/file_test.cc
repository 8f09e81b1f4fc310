#include "core/file.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "../temp_path.h"
#include "../within_time.h"

namespace hqekv {
namespace {

TEST(ReadTextFile, ClearErrorsNameThePath) {
  auto missing = ReadTextFile("/nonexistent/text.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message(), "file '/nonexistent/text.txt' does not exist");
  auto dir = ReadTextFile(testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.message().find("is a directory"), std::string::npos);
  EXPECT_NE(dir.message().find(testing::TempDir()), std::string::npos);
}

TEST(ReadTextFile, ReadsBytesAndEmptyFiles) {
  const std::string empty = hqekv::test::TempPath("core_file_empty.txt");
  { std::ofstream(empty).flush(); }
  auto e = ReadTextFile(empty);
  ASSERT_TRUE(e.ok()) << e.message();
  EXPECT_EQ(*e, "");
  const std::string bin = hqekv::test::TempPath("core_file_bytes.txt");
  const std::string bytes("a\0b\r\n\xff", 6);
  { std::ofstream(bin, std::ios::binary) << bytes; }
  auto b = ReadTextFile(bin);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, bytes);
  auto wiki = ReadTextFile(std::string(HQEKV_SOURCE_DIR) + "/data/text/wiki.valid.raw");
  ASSERT_TRUE(wiki.ok());
  EXPECT_GT(wiki->size(), 100000u);
}

TEST(DefaultModelPath, EnvironmentFirstThenBundledModel) {
  const char* old = std::getenv("HQEKV_MODEL");
  const std::string saved = old ? old : "";
  setenv("HQEKV_MODEL", "/some/model.gguf", 1);
  EXPECT_EQ(DefaultModelPath(HQEKV_SOURCE_DIR), "/some/model.gguf");
  setenv("HQEKV_MODEL", "", 1);  // empty = unset
  const std::string bundled = DefaultModelPath(HQEKV_SOURCE_DIR);
  EXPECT_NE(bundled.find("models/stories260K.gguf"), std::string::npos);
  EXPECT_TRUE(ReadTextFile(bundled).ok()) << bundled;  // found: the source tree has it
  // A subcommand's own default (eval's refmodel-4l) is found the same way.
  const std::string own = DefaultModelPath(HQEKV_SOURCE_DIR, "models/refmodel-4l.gguf");
  EXPECT_NE(own.find("models/refmodel-4l.gguf"), std::string::npos) << own;
  setenv("HQEKV_MODEL", "/some/model.gguf", 1);
  EXPECT_EQ(DefaultModelPath(HQEKV_SOURCE_DIR, "models/refmodel-4l.gguf"), "/some/model.gguf");
  if (old) {
    setenv("HQEKV_MODEL", saved.c_str(), 1);
  } else {
    unsetenv("HQEKV_MODEL");
  }
}

// A fresh directory under the test temp dir.
std::string FreshDir(const std::string& name) {
  const std::string d = testing::TempDir() + "/" + name + "." + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(ReadFileChecked, FifoIsRefusedWithoutBlocking) {
  const std::string fifo = FreshDir("core_fifo") + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = testing_util::WithinSeconds(5, "ReadTextFile(FIFO)", [&] { return ReadTextFile(fifo); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "'" + fifo + "' is a FIFO, not a regular file");
  auto open = testing_util::WithinSeconds(5, "RegularFile::Open(FIFO)", [&] {
    return RegularFile::Open(fifo, kMaxMappedFileBytes).ok();
  });
  EXPECT_FALSE(open);
}

TEST(ReadFileChecked, DevicesAreRefusedNotReadForever) {
  for (const char* dev : {"/dev/zero", "/dev/urandom", "/dev/null"}) {
    auto r = testing_util::WithinSeconds(5, std::string("ReadTextFile(") + dev + ")",
                                         [&] { return ReadTextFile(dev); });
    ASSERT_FALSE(r.ok()) << dev;
    EXPECT_EQ(r.message(), std::string("'") + dev + "' is a character device, not a regular file");
  }
}

TEST(ReadFileChecked, SizeLimitIsCheckedBeforeReading) {
  const std::string p = FreshDir("core_limit") + "/big.txt";
  { std::ofstream(p) << std::string(1000, 'x'); }
  auto r = ReadFileChecked(p, 999);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("1000 bytes, more than the limit of 999 bytes"), std::string::npos)
      << r.message();
  EXPECT_NE(r.message().find(p), std::string::npos);
  auto ok = ReadFileChecked(p, 1000);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(ok->size(), 1000u);
}

TEST(ReadFileChecked, ProcFilesOfSizeZeroStillRead) {
  auto r = ReadFileChecked("/proc/self/status", 1 << 20);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_NE(r->find("Name:"), std::string::npos);
}

TEST(ReadFileChecked, SymlinkToRegularFileIsFollowedToFifoIsRefused) {
  const std::string d = FreshDir("core_links");
  { std::ofstream(d + "/real.txt") << "hello"; }
  ASSERT_EQ(::mkfifo((d + "/pipe").c_str(), 0600), 0);
  std::filesystem::create_symlink(d + "/real.txt", d + "/to_real");
  std::filesystem::create_symlink(d + "/pipe", d + "/to_pipe");
  auto good = ReadTextFile(d + "/to_real");
  ASSERT_TRUE(good.ok()) << good.message();
  EXPECT_EQ(*good, "hello");
  auto bad = testing_util::WithinSeconds(5, "ReadTextFile(link to FIFO)",
                                         [&] { return ReadTextFile(d + "/to_pipe"); });
  EXPECT_FALSE(bad.ok());
}

TEST(WriteFileAtomic, ReplacesContentAndLeavesNoTemporary) {
  const std::string d = FreshDir("core_atomic");
  const std::string p = d + "/out.json";
  ASSERT_TRUE(WriteFileAtomic(p, "first").ok());
  ASSERT_TRUE(WriteFileAtomic(p, "second, longer").ok());
  EXPECT_EQ(Slurp(p), "second, longer");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(d)) ++entries;
  EXPECT_EQ(entries, 1);  // no .out.json.tmp.* left behind
}

TEST(WriteFileAtomic, KeepsPermissionBitsOfTheOldFile) {
  const std::string p = FreshDir("core_atomic_mode") + "/out.txt";
  ASSERT_TRUE(WriteFileAtomic(p, "a").ok());
  ASSERT_EQ(::chmod(p.c_str(), 0640), 0);
  ASSERT_TRUE(WriteFileAtomic(p, "b").ok());
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

// A full disk, simulated by the file size limit (RLIMIT_FSIZE: write fails
// with EFBIG once the file would pass it): the old file must survive whole.
TEST(WriteFileAtomic, FailedWriteKeepsTheOldFileAndNamesThePath) {
  const std::string d = FreshDir("core_atomic_full");
  const std::string p = d + "/profile.json";
  const std::string old_content = "{\"old\": \"good profile\"}";
  ASSERT_TRUE(WriteFileAtomic(p, old_content).ok());
  std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit tiny = saved;
  tiny.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tiny), 0);
  const Status st = WriteFileAtomic(p, std::string(1 << 20, 'n'));
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'" + p + "'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("unchanged"), std::string::npos) << st.message();
  EXPECT_EQ(Slurp(p), old_content);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(d)) ++entries;
  EXPECT_EQ(entries, 1);  // the temporary file was removed
}

// The streaming writer: a writer dropped before Commit changes nothing.
TEST(AtomicFileWriter, AbandonedWriterLeavesTheTargetAlone) {
  const std::string d = FreshDir("core_atomic_abandon");
  const std::string p = d + "/model.gguf";
  ASSERT_TRUE(WriteFileAtomic(p, "old").ok());
  {
    auto w = AtomicFileWriter::Create(p);
    ASSERT_TRUE(w.ok()) << w.message();
    ASSERT_TRUE(w->Write("new bytes").ok());
  }
  EXPECT_EQ(Slurp(p), "old");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(d)) ++entries;
  EXPECT_EQ(entries, 1);
}

// rename fails (the target is a non-empty directory; also a missing parent):
// an error naming the path, nothing else touched.
TEST(WriteFileAtomic, UnwritableTargetsGiveErrorsNamingThePath) {
  const std::string d = FreshDir("core_atomic_bad");
  std::filesystem::create_directories(d + "/sub/inner");
  const Status dir = WriteFileAtomic(d + "/sub", "x");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.message().find("'" + d + "/sub'"), std::string::npos) << dir.message();
  EXPECT_TRUE(std::filesystem::is_directory(d + "/sub/inner"));
  const Status missing = WriteFileAtomic(d + "/no/such/dir/out.json", "x");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find(d + "/no/such/dir/out.json"), std::string::npos)
      << missing.message();
  const Status proc = WriteFileAtomic("/proc/x.json", "x");
  EXPECT_FALSE(proc.ok());
}

// The output-path rule, one row per kind of existing target: what the path is
// afterwards and where the bytes went.
TEST(OutputPathRule, RegularFilesReplacedLinksFollowedDevicesAndFifosWrittenThrough) {
  const std::string d = FreshDir("core_output_rule");
  // A link to a regular file: the target gets the bytes, the link stays a link.
  ASSERT_TRUE(WriteFileAtomic(d + "/real.txt", "old").ok());
  ASSERT_EQ(::symlink("real.txt", (d + "/link").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomic(d + "/link", "new").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(d + "/link"));
  EXPECT_EQ(Slurp(d + "/real.txt"), "new");
  // A dangling link: its target is created, the link stays.
  ASSERT_EQ(::symlink("made.txt", (d + "/dangling").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomic(d + "/dangling", "made").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(d + "/dangling"));
  EXPECT_EQ(Slurp(d + "/made.txt"), "made");
  // A link to a character device: written through; the device stays a device.
  ASSERT_EQ(::symlink("/dev/null", (d + "/to_null").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomic(d + "/to_null", "gone").ok());
  EXPECT_TRUE(std::filesystem::is_symlink(d + "/to_null"));
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
  // The device itself, by name: still a device, not a regular file.
  ASSERT_TRUE(WriteFileAtomic("/dev/null", "gone").ok());
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
  // A FIFO: a reader gets every byte; the FIFO stays a FIFO.
  const std::string fifo = d + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = Slurp(fifo); });
  const Status w = testing_util::WithinSeconds(10, "WriteFileAtomic(FIFO)",
                                               [&] { return WriteFileAtomic(fifo, "through"); });
  reader.join();
  EXPECT_TRUE(w.ok()) << w.message();
  EXPECT_EQ(got, "through");
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  // No temporary files left next to any of them.
  for (const auto& e : std::filesystem::directory_iterator(d))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  // A FIFO checked before long work is not opened (which would block).
  const Status chk =
      testing_util::WithinSeconds(5, "CheckWritable(FIFO)", [&] { return CheckWritable(fifo); });
  EXPECT_TRUE(chk.ok()) << chk.message();
}

}  // namespace
}  // namespace hqekv
