#include "calib/profile.h"

#include <cstdint>
#include <cstdio>

namespace hqekv::calib {

std::string TextHash(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace hqekv::calib
