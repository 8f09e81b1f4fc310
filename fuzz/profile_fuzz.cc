// libFuzzer target for calibration profile JSON (policy/profile.h): any input
// gives a profile or an error, and a profile that loads survives a write and
// read round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "policy/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto p = hqekv::policy::ProfileFromJson(text, "fuzz.json");
  if (!p.ok()) return 0;
  const std::string once = hqekv::policy::ProfileToJson(*p);
  auto back = hqekv::policy::ProfileFromJson(once, "fuzz-roundtrip.json");
  if (!back.ok()) std::abort();  // what we write, we must read
  if (hqekv::policy::ProfileToJson(*back) != once) std::abort();
  return 0;
}
