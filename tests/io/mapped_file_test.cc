// io/mmap_file.h: a mapped file truncated in place under the process. Reading
// past the new end raises SIGBUS; the process must end with a message naming
// the file (not a bare "Bus error"), and CheckUnchanged must say so before.
// A private copy (model weights) holds the bytes apart from the file.
#include "io/mmap_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "../temp_path.h"

namespace hqekv {
namespace {

std::string TwoPages(const std::string& name) {
  const std::string p = hqekv::test::TempPath(name);
  std::ofstream(p, std::ios::binary) << std::string(2 * 4096 + 100, 'x');
  return p;
}

TEST(MappedFileChange, CheckUnchangedSeesAnInPlaceTruncation) {
  const std::string p = TwoPages("mapped_check");
  auto f = MappedFile::Open(p);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_TRUE((*f)->CheckUnchanged().ok());
  ASSERT_EQ(truncate(p.c_str(), 10), 0);
  const Status st = (*f)->CheckUnchanged();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(p), std::string::npos) << st.message();
}

TEST(MappedFileChangeDeathTest, ReadingPastATruncationEndsNamingTheFile) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string p = TwoPages("mapped_sigbus");
  EXPECT_DEATH(
      {
        auto f = MappedFile::Open(p);
        if (!f.ok()) return;
        if (truncate(p.c_str(), 10) != 0) return;
        volatile uint8_t x = (*f)->data()[2 * 4096 + 10];
        (void)x;
      },
      "the file '.*mapped_sigbus' was truncated or rewritten in place");
}

// Is `addr` inside a mapping of `path` (/proc/self/maps names the file)?
bool MappedFromFile(const void* addr, const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  while (std::getline(maps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2) continue;
    if (a >= lo && a < hi)
      return line.find(std::filesystem::path(path).filename().string()) != std::string::npos;
  }
  return false;
}

// Model weights: a private copy with the file's bytes, unaffected by a
// truncation of the file (no SIGBUS), still reported by CheckUnchanged;
// $HQEKV_MMAP=1 maps the file instead.
TEST(MappedFilePrivateCopy, HoldsTheBytesOutsideTheFileAndSurvivesATruncation) {
  const std::string p = hqekv::test::TempPath("private_copy");
  std::string bytes(3 * 4096 + 7, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 + 7);
  std::ofstream(p, std::ios::binary) << bytes;
  auto f = MappedFile::Open(p, Residence::kPrivateCopy);
  ASSERT_TRUE(f.ok()) << f.message();
  ASSERT_EQ((*f)->size(), bytes.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*f)->data()), bytes.size()), bytes);
  EXPECT_FALSE(MappedFromFile((*f)->data(), p));
  ASSERT_EQ(truncate(p.c_str(), 10), 0);
  EXPECT_EQ(static_cast<uint8_t>((*f)->data()[3 * 4096 + 5]),
            static_cast<uint8_t>(bytes[3 * 4096 + 5]));
  EXPECT_FALSE((*f)->CheckUnchanged().ok());

  std::ofstream(p, std::ios::binary) << bytes;
  auto mapped = MappedFile::Open(p);
  ASSERT_TRUE(mapped.ok()) << mapped.message();
  EXPECT_TRUE(MappedFromFile((*mapped)->data(), p));
  ::setenv("HQEKV_MMAP", "1", 1);
  auto forced = MappedFile::Open(p, Residence::kPrivateCopy);
  ::unsetenv("HQEKV_MMAP");
  ASSERT_TRUE(forced.ok()) << forced.message();
  EXPECT_TRUE(MappedFromFile((*forced)->data(), p));
  auto empty_path = hqekv::test::TempPath("private_copy_empty");
  std::ofstream(empty_path, std::ios::binary).flush();
  auto empty = MappedFile::Open(empty_path, Residence::kPrivateCopy);
  ASSERT_TRUE(empty.ok()) << empty.message();
  EXPECT_EQ((*empty)->size(), 0u);
}

}  // namespace
}  // namespace hqekv
