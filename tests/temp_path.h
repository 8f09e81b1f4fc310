// A scratch path under GoogleTest's TempDir() that no other test process can
// share: CTest runs each test in its own process (two tests of one fixture
// run at once under -j), and several build trees may test on one machine, so
// a fixed name would let one test delete or rewrite another's file.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace hqekv::test {

// TempDir()/<pid>_<prefix>; callers may append to it.
inline std::string TempPath(const std::string& prefix) {
  return ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_" + prefix;
}

}  // namespace hqekv::test
