// PlainKvCache::SaveState / LoadState: the pages as they are in memory.
#include <cstring>
#include <string>

#include "cache/plain_cache.h"
#include "cache/state_io.h"

namespace hqekv {
namespace {

using cache::StateReader;
using cache::StateWriter;

template <class T>
void PutPages(StateWriter& w, const cache::CountedVector<cache::CountedVector<T>>& pages) {
  for (const auto& page : pages) w.PutArray(page.data(), page.size());
}

template <class T>
bool GetPages(StateReader& r, size_t n_pages, size_t page_elems,
              cache::CountedVector<cache::CountedVector<T>>& pages) {
  for (size_t p = 0; p < n_pages; ++p) {
    pages.emplace_back(pages.get_allocator());
    pages.back().resize(page_elems);
    if (!r.GetArray(pages.back().data(), page_elems)) return false;
  }
  return true;
}

}  // namespace

Status PlainKvCache::SaveState(std::string* out) const {
  out->clear();
  StateWriter w(out);
  for (const auto& Lp : layers_) {
    const Layer& L = *Lp;
    const int64_t n = static_cast<int64_t>(L.pos.size());
    w.Put(n);
    w.PutArray(L.pos.data(), L.pos.size());
    if (prec_ == PlainPrecision::kF16) {
      PutPages(w, L.k16);
      PutPages(w, L.v16);
    } else {
      PutPages(w, L.k32);
      PutPages(w, L.v32);
    }
  }
  return Status::Ok();
}

Status PlainKvCache::LoadState(std::string_view in) {
  const size_t page_elems = static_cast<size_t>(kPageTokens) * g_.n_kv_heads * g_.head_dim;
  std::vector<std::unique_ptr<Layer>> layers;
  StateReader r(in);
  for (int l = 0; l < g_.n_layers; ++l) {
    auto L = std::make_unique<Layer>();
    const std::string where = "KV state of " + Describe() + ", layer " + std::to_string(l);
    int64_t n = 0;
    if (!r.Get(&n) || n < 0 || n > g_.max_ctx)
      return MakeError(where + ": bad or missing token count");
    const size_t pages = static_cast<size_t>((n + kPageTokens - 1) / kPageTokens);
    L->pos.reserve(pages * kPageTokens);
    L->pos.resize(static_cast<size_t>(n));
    if (!r.GetArray(L->pos.data(), L->pos.size())) return MakeError(where + ": truncated");
    for (int64_t i = 0; i < n; ++i) {
      if (L->pos[i] < 0 || L->pos[i] >= g_.max_ctx || (i > 0 && L->pos[i] <= L->pos[i - 1]))
        return MakeError(where + ": positions not increasing within the context");
    }
    const bool ok =
        prec_ == PlainPrecision::kF16
            ? GetPages(r, pages, page_elems, L->k16) && GetPages(r, pages, page_elems, L->v16)
            : GetPages(r, pages, page_elems, L->k32) && GetPages(r, pages, page_elems, L->v32);
    if (!ok) return MakeError(where + ": truncated");
    layers.push_back(std::move(L));
  }
  if (!r.done()) return MakeError("KV state of " + Describe() + ": trailing bytes");
  layers_ = std::move(layers);
  return Status::Ok();
}

}  // namespace hqekv
