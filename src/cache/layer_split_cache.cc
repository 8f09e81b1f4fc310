#include "cache/layer_split_cache.h"

#include "cache/state_io.h"

namespace hqekv {
namespace {

constexpr char kSplitStateMagic[8] = {'H', 'Q', 'S', 'P', 'L', 'I', 'T', '1'};

}  // namespace

Result<std::unique_ptr<LayerSplitKvCache>> LayerSplitKvCache::Create(const KvGeometry& g,
                                                                     std::vector<Part> parts) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  if (parts.empty()) return MakeError("layer-split KV cache: no parts");
  std::unique_ptr<LayerSplitKvCache> c(new LayerSplitKvCache(g));
  c->part_of_.assign(g.n_layers, -1);
  c->local_of_.assign(g.n_layers, -1);
  for (size_t i = 0; i < parts.size(); ++i) {
    const Part& p = parts[i];
    if (p.layers.empty() || !p.cache)
      return MakeError("layer-split KV cache: part " + std::to_string(i) + " is empty");
    const KvGeometry& pg = p.cache->geometry();
    if (pg.n_layers != static_cast<int>(p.layers.size()) || pg.n_q_heads != g.n_q_heads ||
        pg.n_kv_heads != g.n_kv_heads || pg.head_dim != g.head_dim)
      return MakeError("layer-split KV cache: the cache of part " + std::to_string(i) +
                       " does not have the geometry of its " + std::to_string(p.layers.size()) +
                       " layers");
    for (size_t j = 0; j < p.layers.size(); ++j) {
      const int l = p.layers[j];
      if (l < 0 || l >= g.n_layers)
        return MakeError("layer-split KV cache: layer " + std::to_string(l) +
                         " is outside the model's " + std::to_string(g.n_layers) + " layers");
      if (c->part_of_[l] >= 0)
        return MakeError("layer-split KV cache: layer " + std::to_string(l) + " is in two parts");
      c->part_of_[l] = static_cast<int>(i);
      c->local_of_[l] = static_cast<int>(j);
    }
  }
  for (int l = 0; l < g.n_layers; ++l) {
    if (c->part_of_[l] < 0)
      return MakeError("layer-split KV cache: layer " + std::to_string(l) + " is in no part");
  }
  c->parts_ = std::move(parts);
  return c;
}

std::string LayerSplitKvCache::RangeText(const Part& p) const {
  // Consecutive runs as A-B, joined by '+': "0-3+8".
  std::string s;
  for (size_t i = 0; i < p.layers.size();) {
    size_t j = i;
    while (j + 1 < p.layers.size() && p.layers[j + 1] == p.layers[j] + 1) ++j;
    s += (s.empty() ? "" : "+") + std::to_string(p.layers[i]);
    if (j > i) s += "-" + std::to_string(p.layers[j]);
    i = j + 1;
  }
  return s;
}

std::string LayerSplitKvCache::Describe() const {
  std::string s = "layers ";
  for (size_t i = 0; i < parts_.size(); ++i)
    s += (i ? "," : "") + RangeText(parts_[i]) + ":" + parts_[i].cache->Describe();
  return s;
}

void LayerSplitKvCache::Reset() {
  for (Part& p : parts_) p.cache->Reset();
}

Status LayerSplitKvCache::Append(int layer, const float* k, const float* v, const int32_t* pos,
                                 int n) {
  if (layer < 0 || layer >= g_.n_layers)
    return MakeError("layer-split KV cache: bad layer " + std::to_string(layer));
  return parts_[part_of_[layer]].cache->Append(local_of_[layer], k, v, pos, n);
}

Status LayerSplitKvCache::Attend(int layer, const float* q, const int32_t* q_pos, int n,
                                 float* out) {
  if (layer < 0 || layer >= g_.n_layers)
    return MakeError("layer-split KV cache: bad layer " + std::to_string(layer));
  return parts_[part_of_[layer]].cache->Attend(local_of_[layer], q, q_pos, n, out);
}

Status LayerSplitKvCache::EndBatch(int n, bool is_prefill) {
  for (Part& p : parts_) HQEKV_RETURN_IF_ERROR(p.cache->EndBatch(n, is_prefill));
  return Status::Ok();
}

KvStats LayerSplitKvCache::Stats() const {
  KvStats out;
  out.layers.resize(g_.n_layers);
  for (const Part& p : parts_) {
    const KvStats in = p.cache->Stats();
    out.kept_elements += in.kept_elements;
    out.original_elements += in.original_elements;
    // Every byte of the part, including any it holds outside its layers.
    out.bytes += in.bytes;
    for (size_t j = 0; j < p.layers.size() && j < in.layers.size(); ++j)
      out.layers[p.layers[j]] = in.layers[j];
  }
  return out;
}

int64_t LayerSplitKvCache::LayerAllocatedBytes(int layer) const {
  if (layer < 0 || layer >= g_.n_layers) return -1;
  return parts_[part_of_[layer]].cache->LayerAllocatedBytes(local_of_[layer]);
}

std::string LayerSplitKvCache::BudgetNote() const {
  std::string s;
  for (const Part& p : parts_) {
    const std::string note = p.cache->BudgetNote();
    if (!note.empty()) s += (s.empty() ? "" : "; ") + ("layers " + RangeText(p) + ": " + note);
  }
  return s;
}

Status LayerSplitKvCache::SaveState(std::string* out) const {
  std::string s;
  cache::StateWriter w(&s);
  w.PutArray(kSplitStateMagic, sizeof kSplitStateMagic);
  w.Put<uint32_t>(static_cast<uint32_t>(parts_.size()));
  for (const Part& p : parts_) {
    std::string one;
    HQEKV_RETURN_IF_ERROR(p.cache->SaveState(&one));
    w.PutString(one);
  }
  *out = std::move(s);
  return Status::Ok();
}

Status LayerSplitKvCache::LoadState(std::string_view in) {
  auto bad = [](const std::string& why) {
    return MakeError("layer-split KV cache state: " + why + " (nothing was changed)");
  };
  cache::StateReader r(in);
  char magic[sizeof kSplitStateMagic];
  uint32_t n = 0;
  if (!r.GetArray(magic, sizeof magic) ||
      std::string_view(magic, sizeof magic) !=
          std::string_view(kSplitStateMagic, sizeof kSplitStateMagic))
    return bad("not a layer-split state");
  if (!r.Get(&n) || n != parts_.size()) return bad("the number of parts differs");
  std::vector<std::string_view> states(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t len = 0;
    if (!r.Get(&len) || !r.Bytes(static_cast<size_t>(len), &states[i])) return bad("truncated");
  }
  if (!r.done()) return bad("trailing bytes");
  std::vector<std::string> before(n);
  for (uint32_t i = 0; i < n; ++i) HQEKV_RETURN_IF_ERROR(parts_[i].cache->SaveState(&before[i]));
  for (uint32_t i = 0; i < n; ++i) {
    const Status st = parts_[i].cache->LoadState(states[i]);
    if (st.ok()) continue;
    for (uint32_t j = 0; j < i; ++j) (void)parts_[j].cache->LoadState(before[j]);
    return MakeError("layer-split KV cache state, layers " + RangeText(parts_[i]) + ": " +
                     st.message());
  }
  return Status::Ok();
}

}  // namespace hqekv
