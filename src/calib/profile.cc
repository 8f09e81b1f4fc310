#include "calib/profile.h"

#include <cstdint>
#include <cstdio>

#include "core/hash.h"

namespace hqekv::calib {

std::string TextHash(const std::string& bytes) {
  const uint64_t h = Fnv1a64(bytes);
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace hqekv::calib
