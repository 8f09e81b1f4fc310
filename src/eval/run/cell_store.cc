#include "eval/run/cell_store.h"

#include <cstdio>
#include <filesystem>

#include "core/file.h"
#include "core/hash.h"
#include "eval/run/cell_check.h"

namespace hqekv::eval {
namespace fs = std::filesystem;

std::string CellHash(const std::string& canonical) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(Fnv1a64(canonical)));
  return buf;
}

std::optional<CellResult> CellStore::Load(const std::string& hash) const {
  if (dir_.empty()) return std::nullopt;
  // Checked open: a FIFO or device planted as a cell is skipped, not read.
  auto text = ReadFileChecked(dir_ + "/cells/" + hash + ".json", kMaxJsonFileBytes);
  if (!text.ok()) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  auto c = CellFromJson(j);
  if (!c.ok() || c->hash != hash) return std::nullopt;
  // Damaged, hand-edited or older-schema cells are recomputed (eval/run/cell_check.h).
  if (!ValidateCell(j, *c).ok()) return std::nullopt;
  return std::move(c).value();
}

Status CellStore::Save(const CellResult& c) const {
  if (dir_.empty()) return Status::Ok();
  std::error_code ec;
  fs::create_directories(dir_ + "/cells", ec);
  if (ec) return MakeError("cannot create '" + dir_ + "/cells': " + ec.message());
  const std::string path = dir_ + "/cells/" + c.hash + ".json";
  // Atomic (temp + fsync + rename): a full disk never installs a 0-byte cell.
  return WriteFileAtomic(
      path, ToJson(c).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace hqekv::eval
