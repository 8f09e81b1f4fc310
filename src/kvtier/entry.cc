#include "kvtier/entry.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/hash.h"

namespace hqekv::kvtier {
namespace {

constexpr char kTierMagic[8] = {'H', 'Q', 'E', 'K', 'V', 'T', 'R', '1'};
constexpr size_t kMaxTierHeader = 1 << 16;
// The second chain's starting value: any constant other than the FNV offset basis.
constexpr uint64_t kSecondChainSeed = 0x9E3779B97F4A7C15ull;

std::string HexKey(uint64_t a, uint64_t b) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return buf;
}

template <class T>
void PutRaw(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

}  // namespace

std::vector<std::string> PrefixKeys(const EntryIdentity& id, const int32_t* tokens, size_t n,
                                    int block) {
  std::vector<std::string> keys;
  if (block < 1 || block > kMaxBlockTokens) return keys;
  std::string seed = id.model_identity;
  seed.push_back('\0');
  seed += id.spec;
  seed.push_back('\0');
  seed += std::to_string(kTierEntryVersion) + "/" + std::to_string(block);
  uint64_t a = Fnv1a64(seed), b = Fnv1a64(seed, kSecondChainSeed);
  for (size_t k = 1; k * size_t(block) <= n; ++k) {
    const int32_t* p = tokens + (k - 1) * size_t(block);
    a = Fnv1a64(p, sizeof(int32_t) * size_t(block), a);
    b = Fnv1a64(p, sizeof(int32_t) * size_t(block), b);
    keys.push_back(HexKey(a, b));
  }
  return keys;
}

Result<std::string> EncodeEntry(const KvCache& cache, const KvStateMeta& meta,
                                const std::string& key) {
  HQEKV_ASSIGN_OR_RETURN(std::string state, EncodeKvState(cache, meta));
  const nlohmann::json h = {{"model_identity", meta.model_identity},
                            {"spec", meta.spec},
                            {"n_tokens", meta.tokens.size()},
                            {"key", key}};
  const std::string header = h.dump();
  std::string out(kTierMagic, sizeof(kTierMagic));
  out.reserve(state.size() + header.size() + 32);
  PutRaw(&out, kTierEntryVersion);
  PutRaw(&out, static_cast<uint32_t>(header.size()));
  out += header;
  PutRaw(&out, Fnv1a64(out.data(), out.size()));
  out += state;
  return out;
}

Result<std::string_view> UnwrapEntry(std::string_view f, const EntryIdentity& expect,
                                     const std::string& key, size_t n_tokens) {
  const size_t fixed = sizeof(kTierMagic) + 8;
  if (f.size() < fixed || std::memcmp(f.data(), kTierMagic, sizeof(kTierMagic)) != 0)
    return MakeError("not a KV tier entry (bad magic or too short)");
  uint32_t version = 0, hlen = 0;
  std::memcpy(&version, f.data() + 8, 4);
  std::memcpy(&hlen, f.data() + 12, 4);
  if (version != kTierEntryVersion)
    return MakeError("KV tier entry version " + std::to_string(version) + ", this build reads " +
                     std::to_string(kTierEntryVersion));
  if (hlen > kMaxTierHeader || fixed + hlen + 8 > f.size())
    return MakeError("KV tier entry header too large (truncated or corrupt)");
  uint64_t want = 0;
  std::memcpy(&want, f.data() + fixed + hlen, 8);
  if (Fnv1a64(f.data(), fixed + hlen) != want)
    return MakeError("KV tier entry header checksum mismatch (truncated or corrupt)");
  const auto h = nlohmann::json::parse(f.substr(fixed, hlen), nullptr, false);
  if (h.is_discarded() || !h.is_object()) return MakeError("KV tier entry header is not JSON");
  auto str = [&](const char* k) {
    return h.contains(k) && h[k].is_string() ? h[k].get<std::string>() : std::string();
  };
  const int64_t n = h.contains("n_tokens") && h["n_tokens"].is_number_integer()
                        ? h["n_tokens"].get<int64_t>()
                        : -1;
  if (str("model_identity") != expect.model_identity)
    return MakeError("KV tier entry of another model (" + str("model_identity") + ")");
  if (str("spec") != expect.spec)
    return MakeError("KV tier entry of another KV spec ('" + str("spec") + "')");
  if (str("key") != key) return MakeError("KV tier entry stored under another key");
  if (n != static_cast<int64_t>(n_tokens))
    return MakeError("KV tier entry holds " + std::to_string(n) + " tokens, expected " +
                     std::to_string(n_tokens));
  return f.substr(fixed + hlen + 8);  // checked by LoadKvState (its own checksum)
}

Result<KvStateMeta> LoadEntry(std::string_view entry, const EntryIdentity& expect,
                              const KvGeometry& geometry, const std::string& key,
                              const int32_t* prompt, size_t n_tokens, KvCache& cache) {
  HQEKV_ASSIGN_OR_RETURN(std::string_view state, UnwrapEntry(entry, expect, key, n_tokens));
  KvStateMeta want;
  want.model_identity = expect.model_identity;
  want.spec = expect.spec;
  want.geometry = geometry;
  HQEKV_ASSIGN_OR_RETURN(KvStateMeta meta, LoadKvState(state, want, cache));
  if (meta.tokens.size() != n_tokens || !std::equal(meta.tokens.begin(), meta.tokens.end(), prompt))
    return MakeError("KV tier entry holds another token sequence (a key collision)");
  return meta;
}

}  // namespace hqekv::kvtier
