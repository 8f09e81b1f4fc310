// Position lists for the cache tests.
#pragma once

#include <cstdint>
#include <vector>

namespace hqekv::cache::test_util {

// a, a + step, ... below b.
inline std::vector<int32_t> Range(int a, int b, int step = 1) {
  std::vector<int32_t> r;
  for (int i = a; i < b; i += step) r.push_back(i);
  return r;
}

}  // namespace hqekv::cache::test_util
