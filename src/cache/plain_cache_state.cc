// PlainKvCache::SaveState / LoadState: the pages as they are in memory.
#include <cstring>
#include <string>

#include "cache/plain_cache.h"

namespace hqekv {
namespace {

template <class T>
void Put(std::string* out, const T* p, size_t n) {
  out->append(reinterpret_cast<const char*>(p), n * sizeof(T));
}

// Reads n values of T at *off, advancing it; false when the bytes run out.
template <class T>
bool Get(std::string_view in, size_t* off, T* p, size_t n) {
  if (n > (in.size() - *off) / sizeof(T)) return false;
  std::memcpy(p, in.data() + *off, n * sizeof(T));
  *off += n * sizeof(T);
  return true;
}

template <class T>
void PutPages(std::string* out, const cache::CountedVector<cache::CountedVector<T>>& pages) {
  for (const auto& page : pages) Put(out, page.data(), page.size());
}

template <class T>
bool GetPages(std::string_view in, size_t* off, size_t n_pages, size_t page_elems,
              cache::CountedVector<cache::CountedVector<T>>& pages) {
  for (size_t p = 0; p < n_pages; ++p) {
    pages.emplace_back(pages.get_allocator());
    pages.back().resize(page_elems);
    if (!Get(in, off, pages.back().data(), page_elems)) return false;
  }
  return true;
}

}  // namespace

Status PlainKvCache::SaveState(std::string* out) const {
  out->clear();
  for (const auto& Lp : layers_) {
    const Layer& L = *Lp;
    const int64_t n = static_cast<int64_t>(L.pos.size());
    Put(out, &n, 1);
    Put(out, L.pos.data(), L.pos.size());
    if (prec_ == PlainPrecision::kF16) {
      PutPages(out, L.k16);
      PutPages(out, L.v16);
    } else {
      PutPages(out, L.k32);
      PutPages(out, L.v32);
    }
  }
  return Status::Ok();
}

Status PlainKvCache::LoadState(std::string_view in) {
  const size_t page_elems = static_cast<size_t>(kPageTokens) * g_.n_kv_heads * g_.head_dim;
  std::vector<std::unique_ptr<Layer>> layers;
  size_t off = 0;
  for (int l = 0; l < g_.n_layers; ++l) {
    auto L = std::make_unique<Layer>();
    const std::string where = "KV state of " + Describe() + ", layer " + std::to_string(l);
    int64_t n = 0;
    if (!Get(in, &off, &n, 1) || n < 0 || n > g_.max_ctx)
      return MakeError(where + ": bad or missing token count");
    const size_t pages = static_cast<size_t>((n + kPageTokens - 1) / kPageTokens);
    L->pos.reserve(pages * kPageTokens);
    L->pos.resize(static_cast<size_t>(n));
    if (!Get(in, &off, L->pos.data(), L->pos.size())) return MakeError(where + ": truncated");
    for (int64_t i = 0; i < n; ++i) {
      if (L->pos[i] < 0 || L->pos[i] >= g_.max_ctx || (i > 0 && L->pos[i] <= L->pos[i - 1]))
        return MakeError(where + ": positions not increasing within the context");
    }
    const bool ok = prec_ == PlainPrecision::kF16
                        ? GetPages(in, &off, pages, page_elems, L->k16) &&
                              GetPages(in, &off, pages, page_elems, L->v16)
                        : GetPages(in, &off, pages, page_elems, L->k32) &&
                              GetPages(in, &off, pages, page_elems, L->v32);
    if (!ok) return MakeError(where + ": truncated");
    layers.push_back(std::move(L));
  }
  if (off != in.size()) return MakeError("KV state of " + Describe() + ": trailing bytes");
  layers_ = std::move(layers);
  return Status::Ok();
}

}  // namespace hqekv
