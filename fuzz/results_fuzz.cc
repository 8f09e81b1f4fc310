// libFuzzer target for the cached eval cells read back from disk
// (eval/run/cell.h CellFromJson + eval/run/cell_check.h ValidateCell, as
// CellStore::Load does): any input gives a cell or an error; a cell that
// loads and validates survives a write and read round trip. (Only these two
// files are compiled in: the rest of eval pulls in the model kernels.)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "eval/run/cell.h"
#include "eval/run/cell_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 131072) return 0;
  const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  if (auto c = hqekv::eval::CellFromJson(j); c.ok()) {
    if (hqekv::eval::ValidateCell(j, *c).ok()) {
      const nlohmann::json once = hqekv::eval::ToJson(*c);
      auto back = hqekv::eval::CellFromJson(once);
      if (!back.ok()) std::abort();  // what we write, we must read
      if (hqekv::eval::ToJson(*back) != once) std::abort();
    }
  }
  return 0;
}
