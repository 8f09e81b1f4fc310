// The KvStore's private records (chunk record, stream, layer), shared by
// kv_store.cc and kv_store_state.cc (the store's state as bytes). Not for
// use outside the store.
#pragma once

#include <cstdint>

#include "cache/kv_store.h"
#include "cache/page_pool.h"
#include "core/half.h"
#include "quant/format.h"

namespace hqekv::cache {

using quant::Format;

// K (or V) of one chunk: the codes and the metadata in two separate pool
// blocks (two planes, as quant/ lays them out). With D and G powers of two
// both sizes are powers of two, so pages are filled without gaps.
struct Planes {
  BlockRef codes, meta;  // meta invalid when the format has none
};

// One chunk record: 56 bytes.
struct KvStore::ChunkRec {
  int32_t pos0 = 0;
  uint8_t T = 0;
  uint8_t k_fmt = 0, v_fmt = 0;  // indices into Layer::formats
  uint8_t explicit_pos = 0;      // 1: `pos` holds int32[T] positions
  uint64_t kept = 0;
  Planes k, v;
  BlockRef pos;
};

struct KvStore::Stream {
  explicit Stream(int64_t* counter)
      : chunks(CountedAllocator<ChunkRec>(counter)),
        res_k(CountedAllocator<f16_t>(counter)),
        res_v(CountedAllocator<f16_t>(counter)),
        res_pos(CountedAllocator<int32_t>(counter)) {}
  CountedVector<ChunkRec> chunks;
  CountedVector<f16_t> res_k, res_v;  // [n][D]
  CountedVector<int32_t> res_pos;     // [n]
  int64_t kept_in_chunks = 0;
};

struct KvStore::Layer {
  Layer(const KvStoreConfig& cfg, size_t page_bytes)
      : pool(page_bytes, cfg.max_cached_pages, &counter),
        formats(CountedAllocator<Format>(&counter)),
        streams(CountedAllocator<Stream>(&counter)) {
    streams.reserve(cfg.n_kv_heads);
    for (int h = 0; h < cfg.n_kv_heads; ++h) streams.emplace_back(&counter);
  }
  int64_t counter = 0;  // bytes allocated through the pool and the arrays below
  PagePool pool;
  CountedVector<Format> formats;
  CountedVector<Stream> streams;
  int64_t appended = 0;
  bool has_last = false;
  int32_t last_pos = 0;

  const Format& Fmt(uint8_t i) const { return formats[i]; }
  // Allocates the planes of a T-token chunk in format f; false (nothing
  // allocated) when out of memory.
  bool AllocPlanes(const Format& f, int T, int D, Planes* p) {
    const size_t code = quant::CodeBytes(f, T, D), meta = quant::MetaBytes(f, T, D);
    p->codes = pool.Allocate(code);
    if (meta == 0) {
      p->meta = BlockRef{};
    } else if (meta <= BlockRef::kInlineBytes) {
      p->meta = BlockRef{BlockRef::kInline, 0};
    } else {
      p->meta = pool.Allocate(meta);
    }
    if (p->codes.valid() && (meta == 0 || p->meta.valid())) return true;
    FreePlanes(f, T, D, p);
    return false;
  }
  void FreePlanes(const Format& f, int T, int D, Planes* p) {
    pool.Free(p->codes, quant::CodeBytes(f, T, D));
    if (!p->meta.is_inline()) pool.Free(p->meta, quant::MetaBytes(f, T, D));
    *p = Planes{};
  }
  // Inline metadata lives in the record itself (valid until the record moves).
  uint8_t* Codes(const Planes& p) { return pool.Data(p.codes); }
  uint8_t* Meta(const Planes& p) {
    if (p.meta.is_inline())
      return const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(&p.meta.offset));
    return p.meta.valid() ? pool.Data(p.meta) : nullptr;
  }
  const uint8_t* Codes(const Planes& p) const { return pool.Data(p.codes); }
  const uint8_t* Meta(const Planes& p) const {
    if (p.meta.is_inline()) return reinterpret_cast<const uint8_t*>(&p.meta.offset);
    return p.meta.valid() ? pool.Data(p.meta) : nullptr;
  }
  // Index of f in the format table, adding it (at most 256 distinct formats).
  int FormatIndex(const Format& f) {
    for (size_t i = 0; i < formats.size(); ++i) {
      if (SameFormat(formats[i], f)) return static_cast<int>(i);
    }
    if (formats.size() >= 256) return -1;
    formats.push_back(f);
    return static_cast<int>(formats.size() - 1);
  }
};

}  // namespace hqekv::cache
