#include "cache/kv_state.h"

#include <nlohmann/json.hpp>

#include <cstring>

#include "core/hash.h"
#include "core/finite.h"

namespace hqekv {
namespace {

constexpr char kMagic[8] = {'H', 'Q', 'E', 'K', 'V', 'K', 'V', '1'};
constexpr size_t kMaxHeader = 1 << 16;

template <class T>
void Put(std::string* out, const T* p, size_t n) {
  out->append(reinterpret_cast<const char*>(p), n * sizeof(T));
}

nlohmann::json GeometryJson(const KvGeometry& g) {
  return {{"n_layers", g.n_layers},
          {"n_q_heads", g.n_q_heads},
          {"n_kv_heads", g.n_kv_heads},
          {"head_dim", g.head_dim},
          {"max_ctx", g.max_ctx}};
}

bool SameGeometry(const KvGeometry& a, const KvGeometry& b) {
  return a.n_layers == b.n_layers && a.n_q_heads == b.n_q_heads && a.n_kv_heads == b.n_kv_heads &&
         a.head_dim == b.head_dim && a.max_ctx == b.max_ctx;
}

// Parsed file: header, and where the cache state lies.
struct Parsed {
  KvStateMeta meta;
  std::string_view state;
};

Result<Parsed> Parse(std::string_view f) {
  const size_t fixed = sizeof(kMagic) + 8;
  if (f.size() < fixed + 8 || std::memcmp(f.data(), kMagic, sizeof(kMagic)) != 0)
    return MakeError("not an hqekv KV state file (bad magic or too short)");
  uint32_t version = 0, hlen = 0;
  std::memcpy(&version, f.data() + 8, 4);
  std::memcpy(&hlen, f.data() + 12, 4);
  if (version != kKvStateVersion) {
    return MakeError("KV state file version " + std::to_string(version) + ", this build reads " +
                     std::to_string(kKvStateVersion));
  }
  uint64_t want = 0;
  std::memcpy(&want, f.data() + f.size() - 8, 8);
  if (Fnv1a64(f.data(), f.size() - 8) != want)
    return MakeError("KV state file checksum mismatch (truncated or corrupt)");
  if (hlen > kMaxHeader || fixed + hlen > f.size() - 8)
    return MakeError("KV state header too large");
  const auto h = nlohmann::json::parse(f.substr(fixed, hlen), nullptr, false);
  Parsed p;
  auto& m = p.meta;
  int64_t n_tokens = -1, n_vocab = -1;
  if (h.is_discarded() || !h.is_object() || !h.contains("geometry") || !h["geometry"].is_object())
    return MakeError("KV state header is not valid JSON");
  auto str = [&](const char* k) {
    return h.contains(k) && h[k].is_string() ? h[k].get<std::string>() : "";
  };
  auto num = [](const nlohmann::json& j, const char* k) -> int64_t {
    return j.contains(k) && j[k].is_number_integer() ? j[k].get<int64_t>() : -1;
  };
  m.model_identity = str("model_identity");
  m.spec = str("spec");
  const auto& g = h["geometry"];
  m.geometry =
      KvGeometry{int(num(g, "n_layers")), int(num(g, "n_q_heads")), int(num(g, "n_kv_heads")),
                 int(num(g, "head_dim")), int(num(g, "max_ctx"))};
  n_tokens = num(h, "n_tokens");
  n_vocab = num(h, "n_vocab");
  if (m.spec.empty() || n_tokens < 0 || n_vocab < 0 || !CheckGeometry(m.geometry).ok())
    return MakeError("KV state header misses a field or has a bad value");
  size_t off = fixed + hlen;
  const size_t body = f.size() - 8 - off;
  if (static_cast<uint64_t>(n_tokens) * 4 + static_cast<uint64_t>(n_vocab) * 4 > body)
    return MakeError("KV state file shorter than its header says");
  m.tokens.resize(static_cast<size_t>(n_tokens));
  std::memcpy(m.tokens.data(), f.data() + off, m.tokens.size() * 4);
  off += m.tokens.size() * 4;
  m.logits.resize(static_cast<size_t>(n_vocab));
  std::memcpy(m.logits.data(), f.data() + off, m.logits.size() * 4);
  off += m.logits.size() * 4;
  p.state = f.substr(off, f.size() - 8 - off);
  return p;
}

}  // namespace

Result<std::string> EncodeKvState(const KvCache& cache, const KvStateMeta& meta) {
  std::string state;
  HQEKV_RETURN_IF_ERROR(cache.SaveState(&state));
  const nlohmann::json h = {{"format", "hqekv-kv-state"},
                            {"model_identity", meta.model_identity},
                            {"spec", meta.spec},
                            {"geometry", GeometryJson(meta.geometry)},
                            {"n_tokens", meta.tokens.size()},
                            {"n_vocab", meta.logits.size()}};
  const std::string header = h.dump();
  std::string out(kMagic, sizeof(kMagic));
  const uint32_t version = kKvStateVersion, hlen = static_cast<uint32_t>(header.size());
  Put(&out, &version, 1);
  Put(&out, &hlen, 1);
  out += header;
  Put(&out, meta.tokens.data(), meta.tokens.size());
  Put(&out, meta.logits.data(), meta.logits.size());
  out += state;
  const uint64_t sum = Fnv1a64(out.data(), out.size());
  Put(&out, &sum, 1);
  return out;
}

Result<KvStateMeta> ReadKvStateHeader(std::string_view file) {
  HQEKV_ASSIGN_OR_RETURN(Parsed p, Parse(file));
  return p.meta;
}

Result<KvStateMeta> LoadKvState(std::string_view file, const KvStateMeta& expect, KvCache& cache) {
  HQEKV_ASSIGN_OR_RETURN(Parsed p, Parse(file));
  if (p.meta.model_identity != expect.model_identity)
    return MakeError("KV state file was made with another model (identity " +
                     p.meta.model_identity + ", this model is " + expect.model_identity + ")");
  if (!expect.spec.empty() && p.meta.spec != expect.spec)
    return MakeError("KV state file was made with KV policy '" + p.meta.spec +
                     "', this cache is '" + expect.spec + "'");
  if (!SameGeometry(p.meta.geometry, expect.geometry) ||
      !SameGeometry(p.meta.geometry, cache.geometry()))
    return MakeError(
        "KV state file has another cache geometry (layers, heads, head size, context)");
  if (static_cast<int64_t>(p.meta.tokens.size()) >= p.meta.geometry.max_ctx ||
      p.meta.tokens.empty())
    return MakeError("KV state file holds no tokens or more than its context");
  // The checksum only proves the bytes are the ones written: the contents
  // must also agree with each other (a file rewritten with a recomputed
  // checksum is still refused).
  const int64_t n_vocab = static_cast<int64_t>(p.meta.logits.size());
  for (size_t i = 0; i < p.meta.tokens.size(); ++i) {
    if (p.meta.tokens[i] < 0 || p.meta.tokens[i] >= n_vocab)
      return MakeError("KV state file: token " + std::to_string(i) + " is id " +
                       std::to_string(p.meta.tokens[i]) + ", outside its vocabulary of " +
                       std::to_string(n_vocab));
  }
  if (const size_t at = FirstNonFinite(p.meta.logits.data(), p.meta.logits.size());
      at < p.meta.logits.size())
    return MakeError("KV state file: logit " + std::to_string(at) + " is not finite");
  HQEKV_RETURN_IF_ERROR(cache.LoadState(p.state));
  // Every token of the sequence was appended to the cache once (eviction
  // drops kept cells, never the count of appended ones).
  const KvGeometry& g = p.meta.geometry;
  const int64_t per_token = int64_t{2} * g.n_layers * g.n_kv_heads * g.head_dim;
  const int64_t original = cache.Stats().original_elements;
  if (original != static_cast<int64_t>(p.meta.tokens.size()) * per_token) {
    cache.Reset();
    return MakeError("KV state file: its cache holds " + std::to_string(original / per_token) +
                     " positions, its token list " + std::to_string(p.meta.tokens.size()));
  }
  return p.meta;
}

}  // namespace hqekv
