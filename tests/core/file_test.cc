#include "core/file.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

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
  const std::string empty = testing::TempDir() + "/core_file_empty.txt";
  { std::ofstream(empty).flush(); }
  auto e = ReadTextFile(empty);
  ASSERT_TRUE(e.ok()) << e.message();
  EXPECT_EQ(*e, "");
  const std::string bin = testing::TempDir() + "/core_file_bytes.txt";
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
  if (old) {
    setenv("HQEKV_MODEL", saved.c_str(), 1);
  } else {
    unsetenv("HQEKV_MODEL");
  }
}

}  // namespace
}  // namespace hqekv
