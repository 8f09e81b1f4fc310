// dir:PATH — one file per entry, PATH/<key>.kv, written atomically (a reader
// never sees half an entry; replicas on one host, or on a shared file
// system, may share the directory). Bounded by bytes: after each write the
// oldest entries by mtime go until the rest fit max_bytes; a hit touches its
// file's mtime, so the order is least recently used.
#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "core/file.h"
#include "kvtier/backends.h"

namespace hqekv::kvtier {
namespace {

namespace fs = std::filesystem;

class DirTier final : public KvTier {
 public:
  DirTier(std::string path, const TierOptions& o) : KvTier(o), dir_(std::move(path)) {}
  std::string Describe() const override { return "dir:" + dir_.string(); }

 protected:
  Result<std::optional<std::string>> DoGet(const std::string& key) override {
    const fs::path p = dir_ / (key + ".kv");
    std::error_code ec;
    const auto st = fs::status(p, ec);
    if (ec || st.type() == fs::file_type::not_found) return std::optional<std::string>();
    if (st.type() != fs::file_type::regular) return MakeError(p.string() + " is not a file");
    const auto size = fs::file_size(p, ec);
    if (ec) return std::optional<std::string>();  // removed meanwhile
    if (static_cast<int64_t>(size) > o_.max_entry_bytes) return std::optional<std::string>();
    auto bytes = ReadFileChecked(p.string(), static_cast<uint64_t>(o_.max_entry_bytes));
    if (!bytes.ok()) {
      if (!fs::exists(p, ec)) return std::optional<std::string>();  // evicted meanwhile
      return bytes.error();
    }
    fs::last_write_time(p, fs::file_time_type::clock::now(), ec);  // least recently used order
    return std::optional<std::string>(std::move(*bytes));
  }

  Status DoPut(const std::string& key, std::string_view bytes) override {
    if (static_cast<int64_t>(bytes.size()) > o_.max_bytes)
      return MakeError(Describe() + ": an entry of " + std::to_string(bytes.size()) +
                       " bytes is more than the store's " + std::to_string(o_.max_bytes));
    HQEKV_RETURN_IF_ERROR(WriteFileAtomic((dir_ / (key + ".kv")).string(), bytes));
    Trim();
    return Status::Ok();
  }

 private:
  // Removes the least recently used entries until the rest fit max_bytes.
  void Trim() {
    struct Item {
      fs::path path;
      fs::file_time_type mtime;
      int64_t size;
    };
    std::vector<Item> items;
    int64_t total = 0;
    std::error_code ec;
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.size() < 4 || name.compare(name.size() - 3, 3, ".kv") != 0) continue;
      if (!ValidKey(name.substr(0, name.size() - 3))) continue;
      std::error_code e2;
      const auto size = it->file_size(e2);
      const auto mtime = it->last_write_time(e2);
      if (e2) continue;
      items.push_back({it->path(), mtime, static_cast<int64_t>(size)});
      total += static_cast<int64_t>(size);
    }
    if (total <= o_.max_bytes) return;
    std::sort(items.begin(), items.end(),
              [](const Item& a, const Item& b) { return a.mtime < b.mtime; });
    for (const Item& i : items) {
      if (total <= o_.max_bytes) break;
      std::error_code e3;
      if (fs::remove(i.path, e3)) total -= i.size;
    }
  }

  fs::path dir_;
};

}  // namespace

Result<std::unique_ptr<KvTier>> OpenDirTier(const std::string& path, const TierOptions& o) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (!fs::is_directory(path, ec))
    return MakeError("--kv-store dir:" + path + ": not a directory and cannot be made one");
  return std::unique_ptr<KvTier>(new DirTier(path, o));
}

}  // namespace hqekv::kvtier
