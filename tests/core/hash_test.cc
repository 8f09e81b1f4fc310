#include "core/hash.h"

#include <gtest/gtest.h>

#include <string>

namespace hqekv {
namespace {

TEST(Fnv1a64, KnownTestVectors) {
  // From the FNV reference test suite (Fowler/Noll/Vo, 64-bit FNV-1a).
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(Fnv1a64, PiecewiseEqualsWhole) {
  const std::string s = "the quick brown fox";
  EXPECT_EQ(Fnv1a64(s.substr(7), Fnv1a64(s.substr(0, 7))), Fnv1a64(s));
  const uint64_t x = 0x0123456789abcdefull;
  EXPECT_EQ(Fnv1a64(&x, sizeof x),
            Fnv1a64(std::string(reinterpret_cast<const char*>(&x), sizeof x)));
}

}  // namespace
}  // namespace hqekv
