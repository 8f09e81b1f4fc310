// The KvStore's private records (chunk record, stream, layer), shared by
// kv_store.cc and kv_store_state.cc (the store's state as bytes). Not for
// use outside the store.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "cache/kv_store.h"
#include "cache/page_pool.h"
#include "core/half.h"
#include "quant/format.h"

namespace hqekv::cache {

using quant::Format;

// One chunk record: 24 bytes (0.375 bit per K and V element of a 32-token
// chunk at head_dim 8, 0.047 at 64; the earlier record had 56).
// - Four 32-bit words, one per block: K codes, K metadata, V codes, V
//   metadata. Bits 0..26 of a word are the block's BlockRef (page + unit) or,
//   for a metadata plane of <= 3 bytes (fp8's one fp16 scale), the metadata
//   itself (inline: no pool unit, which would be 16-128 bytes). Bits 27..31
//   of the four words together hold the 20-bit header: T - 1 (6 bits), the
//   explicit-positions flag, K and V format indices (6 bits each), and the
//   narrow-positions flag (bit 19: the explicit list is uint16 offsets from
//   pos0, 2 bytes a slot instead of 4; set whenever the chunk spans at most
//   65536 positions).
// - The kept mask of slots 0..31 is here; slots 32..63 of a chunk longer than
//   32 tokens (config.chunk > 32) and explicit position lists (rare) live in
//   the stream's side table, keyed by pos0.
// Codes and metadata stay separate blocks of their own sizes (powers of two
// for D and G powers of two), so pages fill without gaps.
struct KvStore::ChunkRec {
  static_assert(std::endian::native == std::endian::little, "inline metadata: low bytes first");
  enum Word { kKCodes = 0, kKMeta = 1, kVCodes = 2, kVMeta = 3 };
  static constexpr uint32_t kRefMask = (uint32_t{1} << BlockRef::kBits) - 1;
  static constexpr size_t kInlineMetaBytes = 3;

  int32_t pos0 = 0;
  uint32_t kept_lo = 0;  // bit t = slot t kept (t < 32)
  uint32_t w[4] = {BlockRef::kNone, BlockRef::kNone, BlockRef::kNone, BlockRef::kNone};

  // Header fields (spread over the words' top 5 bits).
  uint32_t header() const {
    uint32_t h = 0;
    for (int i = 0; i < 4; ++i) h |= (w[i] >> BlockRef::kBits) << (5 * i);
    return h;
  }
  void set_header(uint32_t h) {
    for (int i = 0; i < 4; ++i)
      w[i] = (w[i] & kRefMask) | (((h >> (5 * i)) & 31u) << BlockRef::kBits);
  }
  void set_field(int shift, int bits, uint32_t v) {
    const uint32_t m = ((1u << bits) - 1) << shift;
    set_header((header() & ~m) | ((v << shift) & m));
  }
  int T() const { return static_cast<int>(header() & 63u) + 1; }
  void set_T(int t) { set_field(0, 6, static_cast<uint32_t>(t - 1)); }
  bool explicit_pos() const { return (header() >> 6) & 1u; }
  void set_explicit_pos(bool e) { set_field(6, 1, e ? 1 : 0); }
  bool narrow_pos() const { return (header() >> 19) & 1u; }
  void set_narrow_pos(bool e) { set_field(19, 1, e ? 1 : 0); }
  // Bytes of the explicit position list (0 without one).
  size_t position_bytes() const {
    return explicit_pos() ? static_cast<size_t>(T()) * (narrow_pos() ? 2 : 4) : 0;
  }
  uint32_t fmt(bool is_k) const { return (header() >> (is_k ? 7 : 13)) & 63u; }
  void set_fmt(bool is_k, uint32_t f) { set_field(is_k ? 7 : 13, 6, f); }
  uint32_t k_fmt() const { return fmt(true); }
  uint32_t v_fmt() const { return fmt(false); }

  BlockRef ref(int word) const { return BlockRef::FromId(w[word] & kRefMask); }
  void set_ref(int word, BlockRef b) { w[word] = (w[word] & ~kRefMask) | (b.id & kRefMask); }
  // Inline metadata: the low bytes of the word (little-endian).
  uint8_t* inline_meta(int word) { return reinterpret_cast<uint8_t*>(&w[word]); }
  const uint8_t* inline_meta(int word) const { return reinterpret_cast<const uint8_t*>(&w[word]); }
  // A live chunk always holds its K codes block; a tombstone holds nothing.
  bool live() const { return ref(kKCodes).valid(); }
};

// The rare parts of a chunk: explicit positions and the kept mask of slots
// 32..63. One entry per live chunk that has either, sorted by pos0.
struct ChunkExtra {
  int32_t pos0 = 0;
  uint32_t kept_hi = 0;  // slots 32..63 (chunks of more than 32 slots)
  BlockRef positions;    // int32[T] in a pool block, or invalid
};

struct KvStore::Stream {
  static_assert(sizeof(ChunkRec) == 24, "the byte model (policy/true_bits.cc) charges 24 bytes");
  explicit Stream(int64_t* counter)
      : chunks(CountedAllocator<ChunkRec>(counter)),
        res_k(CountedAllocator<f16_t>(counter)),
        res_v(CountedAllocator<f16_t>(counter)),
        res_pos(CountedAllocator<int32_t>(counter)),
        extras(CountedAllocator<ChunkExtra>(counter)) {}
  CountedVector<ChunkRec> chunks;
  CountedVector<f16_t> res_k, res_v;  // [n][D]
  CountedVector<int32_t> res_pos;     // [n]
  // Extras of the live chunks that have explicit positions or > 32 slots.
  CountedVector<ChunkExtra> extras;
  int64_t kept_in_chunks = 0;

  static bool HasExtra(const ChunkRec& c) { return c.explicit_pos() || c.T() > 32; }
  // The entry of chunk pos0, or nullptr.
  const ChunkExtra* FindExtra(int32_t pos0) const {
    auto it = std::lower_bound(extras.begin(), extras.end(), pos0,
                               [](const ChunkExtra& e, int32_t p) { return e.pos0 < p; });
    return it != extras.end() && it->pos0 == pos0 ? &*it : nullptr;
  }
  ChunkExtra* FindExtra(int32_t pos0) {
    return const_cast<ChunkExtra*>(static_cast<const Stream*>(this)->FindExtra(pos0));
  }
  void AddExtra(const ChunkExtra& x) {
    auto it = std::lower_bound(extras.begin(), extras.end(), x.pos0,
                               [](const ChunkExtra& e, int32_t p) { return e.pos0 < p; });
    // Grows by 1/8 (they are rare; doubling would hold spare entries).
    if (extras.size() == extras.capacity()) {
      const size_t i = it - extras.begin();
      extras.reserve(extras.size() + extras.size() / 8 + 2);
      it = extras.begin() + i;
    }
    extras.insert(it, x);
  }
  void RemoveExtra(int32_t pos0) {
    const ChunkExtra* e = FindExtra(pos0);
    if (e) extras.erase(extras.begin() + (e - extras.data()));
  }
  uint64_t Kept(const ChunkRec& c) const {
    if (c.T() <= 32 || !c.live()) return c.kept_lo;
    const ChunkExtra* e = FindExtra(c.pos0);
    return c.kept_lo | (e ? uint64_t{e->kept_hi} << 32 : 0);
  }
  // For a live chunk of > 32 slots the extra entry must exist (AddExtra).
  void SetKept(ChunkRec& c, uint64_t m) {
    c.kept_lo = static_cast<uint32_t>(m);
    if (c.T() > 32) {
      if (ChunkExtra* e = FindExtra(c.pos0)) e->kept_hi = static_cast<uint32_t>(m >> 32);
    }
  }
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

  const Format& Fmt(uint32_t i) const { return formats[i]; }
  // Metadata of <= 3 bytes lives in the record's metadata word.
  static bool MetaInline(size_t meta) { return meta > 0 && meta <= ChunkRec::kInlineMetaBytes; }
  static int CodesWord(bool is_k) { return is_k ? ChunkRec::kKCodes : ChunkRec::kVCodes; }
  static int MetaWord(bool is_k) { return is_k ? ChunkRec::kKMeta : ChunkRec::kVMeta; }
  static bool IsKWord(int word) { return word == ChunkRec::kKCodes || word == ChunkRec::kKMeta; }
  // Whether word `word` of a chunk of T tokens in format f is a pool block,
  // and its size in *bytes: the codes always; the metadata unless it is
  // absent or inline.
  static bool WordBlock(const Format& f, int word, int T, int D, size_t* bytes) {
    if (word == CodesWord(IsKWord(word))) {
      *bytes = quant::CodeBytes(f, T, D);
      return true;
    }
    *bytes = quant::MetaBytes(f, T, D);
    return *bytes > 0 && !MetaInline(*bytes);
  }
  // Allocates block `word` of chunk c (T set) in format f, recorded in c.
  // False (nothing allocated) when out of memory.
  bool AllocWord(ChunkRec* c, int word, const Format& f, int D) {
    size_t bytes = 0;
    BlockRef b;
    if (WordBlock(f, word, c->T(), D, &bytes)) {
      b = pool.Allocate(bytes);
      if (!b.valid()) return false;
    }
    c->set_ref(word, b);  // inline metadata: filled by the quantizer
    return true;
  }
  // Frees block `word` of chunk c (format f) if it holds one.
  void FreeWord(ChunkRec* c, int word, const Format& f, int D) {
    size_t bytes = 0;
    if (WordBlock(f, word, c->T(), D, &bytes)) pool.Free(c->ref(word), bytes);
    c->set_ref(word, BlockRef{});
  }
  // Allocates the K or V plane of chunk c (T set) in format f, recorded in c;
  // false (nothing allocated) when out of memory.
  bool AllocPlane(ChunkRec* c, bool is_k, const Format& f, int D) {
    if (!AllocWord(c, CodesWord(is_k), f, D)) return false;
    if (!AllocWord(c, MetaWord(is_k), f, D)) {
      FreeWord(c, CodesWord(is_k), f, D);
      return false;
    }
    return true;
  }
  void FreePlane(ChunkRec* c, bool is_k, const Format& f, int D) {
    FreeWord(c, CodesWord(is_k), f, D);
    FreeWord(c, MetaWord(is_k), f, D);
  }
  const uint8_t* Codes(const ChunkRec& c, bool is_k) const {
    return pool.Data(c.ref(CodesWord(is_k)));
  }
  // Inline metadata lives in the record itself (valid until the record moves).
  const uint8_t* Meta(const ChunkRec& c, bool is_k, int D) const {
    const size_t meta = quant::MetaBytes(Fmt(c.fmt(is_k)), c.T(), D);
    if (meta == 0) return nullptr;
    if (MetaInline(meta)) return c.inline_meta(MetaWord(is_k));
    return pool.Data(c.ref(MetaWord(is_k)));
  }
  // True when `word` of live chunk c references a pool block (of *bytes):
  // codes always, metadata unless absent or inline.
  bool WordIsBlock(const ChunkRec& c, int word, int D, size_t* bytes) const {
    return WordBlock(Fmt(c.fmt(IsKWord(word))), word, c.T(), D, bytes);
  }
  // Explicit positions of chunk c of stream s (none: pos0 + t).
  PositionList Positions(const Stream& s, const ChunkRec& c) const {
    PositionList p;
    p.pos0 = c.pos0;
    if (!c.explicit_pos()) return p;
    const ChunkExtra* e = s.FindExtra(c.pos0);
    if (!e || !e->positions.valid()) return p;
    const uint8_t* d = pool.Data(e->positions);
    if (c.narrow_pos()) {
      p.offsets = reinterpret_cast<const uint16_t*>(d);
    } else {
      p.wide = reinterpret_cast<const int32_t*>(d);
    }
    return p;
  }
  uint8_t* Codes(ChunkRec& c, bool is_k) {
    return const_cast<uint8_t*>(static_cast<const Layer*>(this)->Codes(c, is_k));
  }
  uint8_t* Meta(ChunkRec& c, bool is_k, int D) {
    return const_cast<uint8_t*>(static_cast<const Layer*>(this)->Meta(c, is_k, D));
  }
  // Index of f in the format table, adding it (at most kMaxFormats distinct
  // formats: the record keeps 6-bit indices).
  static constexpr int kMaxFormats = 64;
  int FormatIndex(const Format& f) {
    for (size_t i = 0; i < formats.size(); ++i) {
      if (SameFormat(formats[i], f)) return static_cast<int>(i);
    }
    if (formats.size() >= kMaxFormats) return -1;
    formats.push_back(f);
    return static_cast<int>(formats.size() - 1);
  }
};

// Helpers of the store's files (kv_store.cc, kv_store_compact.cc).

// f16 / f32 without rotation: a chunk in it converts to any format without
// first losing bits.
inline bool IsLossless(const quant::Format& f) {
  return !f.hadamard && (f.kind == quant::Kind::kF16 || f.kind == quant::Kind::kF32);
}

// True when T ascending positions span at most 65536 (uint16 offsets from the
// first hold them: a narrow list, 2 bytes a slot instead of 4).
inline bool NarrowSpan(const int32_t* pos, int T) {
  return ExplicitListBytes(T, static_cast<int64_t>(pos[T - 1]) - pos[0]) ==
         2 * static_cast<size_t>(T);
}

// Writes an explicit list of T ascending positions to dst: uint16 offsets
// from the first (narrow) or int32 positions.
inline void WritePositions(bool narrow, const int32_t* pos, int T, uint8_t* dst) {
  if (!narrow) {
    std::memcpy(dst, pos, static_cast<size_t>(T) * sizeof(int32_t));
    return;
  }
  for (int t = 0; t < T; ++t) {
    const uint16_t off = static_cast<uint16_t>(pos[t] - pos[0]);
    std::memcpy(dst + 2 * static_cast<size_t>(t), &off, sizeof(off));
  }
}

}  // namespace hqekv::cache
