// io/mmap_file.h: a mapped file truncated in place under the process. Reading
// past the new end raises SIGBUS; the process must end with a message naming
// the file (not a bare "Bus error"), and CheckUnchanged must say so before.
#include "io/mmap_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

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

}  // namespace
}  // namespace hqekv
