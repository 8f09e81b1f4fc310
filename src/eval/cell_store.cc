#include "eval/cell_store.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/hash.h"

namespace hqekv::eval {
namespace fs = std::filesystem;

std::string CellHash(const std::string& canonical) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(Fnv1a64(canonical)));
  return buf;
}

std::optional<CellResult> CellStore::Load(const std::string& hash) const {
  if (dir_.empty()) return std::nullopt;
  std::ifstream f(dir_ + "/cells/" + hash + ".json");
  if (!f) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  auto c = CellFromJson(j);
  if (!c.ok() || c->hash != hash) return std::nullopt;
  return std::move(c).value();
}

Status CellStore::Save(const CellResult& c) const {
  if (dir_.empty()) return Status::Ok();
  std::error_code ec;
  fs::create_directories(dir_ + "/cells", ec);
  if (ec) return MakeError("cannot create '" + dir_ + "/cells': " + ec.message());
  const std::string path = dir_ + "/cells/" + c.hash + ".json";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    if (!f) return MakeError("cannot write '" + tmp + "'");
    f << ToJson(c).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!f) return MakeError("error writing '" + tmp + "'");
  }
  fs::rename(tmp, path, ec);
  if (ec) return MakeError("cannot rename '" + tmp + "': " + ec.message());
  return Status::Ok();
}

}  // namespace hqekv::eval
