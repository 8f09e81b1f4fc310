// KvStore::SaveState / LoadState: the store's bytes as held in memory (page
// pools, chunk records, residuals), so that a KV cache saved to a file
// (cache/kv_state.h) and loaded again holds the same bytes and continues
// bit-identically. Loading checks everything a later read or mutation relies
// on (block references inside live pages, formats valid for their chunks,
// counts, ascending positions): a bad input is an error, never a crash.
#include <string>

#include "cache/kv_store.h"
#include "cache/kv_store_records.h"
#include "cache/state_io.h"

namespace hqekv::cache {
namespace {

// The last byte is the store's format version: 2 = 24-byte chunk records
// (32-bit block refs, one per plane, explicit positions in a side table);
// 3 = the same with uint16 position offsets where a chunk spans <= 65536.
constexpr char kTag[8] = {'K', 'V', 'S', 'T', 'O', 'R', 'E', '3'};

// A quant::Format field by field (the struct has padding).
struct FormatRec {
  uint8_t kind, bits, grouping, hadamard;
  int32_t group;
};
static_assert(sizeof(FormatRec) == 8);

FormatRec ToRec(const quant::Format& f) {
  return FormatRec{static_cast<uint8_t>(f.kind), static_cast<uint8_t>(f.bits),
                   static_cast<uint8_t>(f.grouping), static_cast<uint8_t>(f.hadamard), f.group};
}

bool FromRec(const FormatRec& r, quant::Format* f) {
  // Any kind below kCount (a new kind is accepted without an edit here).
  if (r.kind >= static_cast<uint8_t>(quant::Kind::kCount) ||
      r.grouping > static_cast<uint8_t>(quant::Grouping::kPerChannel) || r.hadamard > 1)
    return false;
  f->kind = static_cast<quant::Kind>(r.kind);
  f->bits = r.bits;
  f->grouping = static_cast<quant::Grouping>(r.grouping);
  f->group = r.group;
  f->hadamard = r.hadamard != 0;
  return true;
}

// Capacity bound for an array read from r: twice what the input could
// hold, plus `slack` elements (growth reserves are not in the input).
template <class T>
uint64_t CapLimit(const StateReader& r, uint64_t slack) {
  return 2 * (r.remaining() / sizeof(T)) + slack;
}

}  // namespace

void KvStore::SaveState(StateWriter& w) const {
  static_assert(sizeof(ChunkRec) == 24, "chunk records are saved as they are: no padding");
  static_assert(sizeof(ChunkExtra) == 12);
  w.PutArray(kTag, sizeof(kTag));
  for (int v : {cfg_.n_layers, cfg_.n_kv_heads, cfg_.head_dim, cfg_.chunk, cfg_.max_cached_pages,
                cfg_.residual_reserve})
    w.Put<int32_t>(v);
  w.Put<uint64_t>(cfg_.page_bytes);
  for (const auto& Lp : layers_) {
    const Layer& L = *Lp;
    L.pool.SaveState(w);
    w.Put<uint64_t>(L.formats.size());
    w.Put<uint64_t>(L.formats.capacity());
    for (const Format& f : L.formats) w.Put(ToRec(f));
    for (const Stream& s : L.streams) {
      w.PutVector(s.chunks);
      w.PutVector(s.extras);
      w.PutVector(s.res_k);
      w.PutVector(s.res_v);
      w.PutVector(s.res_pos);
      w.Put(s.kept_in_chunks);
    }
    w.Put(L.appended);
    w.Put<uint8_t>(L.has_last ? 1 : 0);
    w.Put(L.last_pos);
  }
}

Result<std::unique_ptr<KvStore>> KvStore::LoadState(const KvStoreConfig& config, StateReader& r) {
  HQEKV_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> s, Create(config));
  const KvStoreConfig& c = s->cfg_;
  char tag[sizeof(kTag)];
  if (!r.GetArray(tag, sizeof(tag)) || std::string_view(tag, 7) != std::string_view(kTag, 7))
    return MakeError("KV store state: missing or unknown store tag");
  if (tag[7] != kTag[7]) {
    return MakeError(std::string("KV store state: store format version ") + tag[7] +
                     ", this build reads version " + kTag[7] +
                     " (24-byte chunk records, 16-bit position lists); save the cache again"
                     " with this build");
  }
  int32_t v[6];
  uint64_t page_bytes = 0;
  if (!r.GetArray(v, 6) || !r.Get(&page_bytes)) return MakeError("KV store state: truncated");
  if (v[0] != c.n_layers || v[1] != c.n_kv_heads || v[2] != c.head_dim || v[3] != c.chunk ||
      v[4] != c.max_cached_pages || v[5] != c.residual_reserve || page_bytes != c.page_bytes) {
    return MakeError("KV store state: saved with another store layout (layers " +
                     std::to_string(v[0]) + ", KV heads " + std::to_string(v[1]) + ", head size " +
                     std::to_string(v[2]) + ", page " + std::to_string(page_bytes) +
                     " bytes; this cache: " + std::to_string(c.n_layers) + ", " +
                     std::to_string(c.n_kv_heads) + ", " + std::to_string(c.head_dim) + ", " +
                     std::to_string(c.page_bytes) + ")");
  }
  for (int l = 0; l < c.n_layers; ++l) HQEKV_RETURN_IF_ERROR(s->LoadLayer(l, r));
  return s;
}

Status KvStore::LoadLayer(int l, StateReader& r) {
  Layer& L = *layers_[l];
  const int D = cfg_.head_dim, G = cfg_.chunk;
  const std::string where = "KV store state, layer " + std::to_string(l) + ": ";
  std::string why;
  if (!L.pool.LoadState(r, &why)) return MakeError(where + why);
  uint64_t n_formats = 0, cap = 0;
  if (!r.Get(&n_formats) || !r.Get(&cap) || n_formats > Layer::kMaxFormats || n_formats > cap ||
      cap > 512)
    return MakeError(where + "bad format table");
  L.formats.reserve(cap);
  for (uint64_t i = 0; i < n_formats; ++i) {
    FormatRec rec;
    Format f;
    if (!r.Get(&rec) || !FromRec(rec, &f)) return MakeError(where + "bad format table");
    L.formats.push_back(f);
  }
  const uint64_t res_slack =
      2 * static_cast<uint64_t>(cfg_.residual_reserve + G + 1) * res_units_ + 64;
  int64_t newest = -1;  // largest position seen in any stream
  // Every unit of the pool must belong to exactly one referenced block.
  std::vector<uint64_t> seen(L.pool.page_slots(), 0);
  int64_t requested = 0, blocks = 0;  // what the references add up to
  for (Stream& s : L.streams) {
    if (!r.GetVector(&s.chunks, CapLimit<ChunkRec>(r, 64)) ||
        !r.GetVector(&s.extras, CapLimit<ChunkExtra>(r, 64)) ||
        !r.GetVector(&s.res_k, CapLimit<f16_t>(r, res_slack)) ||
        !r.GetVector(&s.res_v, CapLimit<f16_t>(r, res_slack)) ||
        !r.GetVector(&s.res_pos, CapLimit<int32_t>(r, res_slack / res_units_)) ||
        !r.Get(&s.kept_in_chunks))
      return MakeError(where + "truncated or oversized stream");
    if (s.res_k.size() != s.res_pos.size() * res_units_ || s.res_v.size() != s.res_k.size())
      return MakeError(where + "residual sizes disagree");
    for (size_t i = 1; i < s.extras.size(); ++i) {
      if (s.extras[i].pos0 <= s.extras[i - 1].pos0)
        return MakeError(where + "chunk side table out of order");
    }
    int64_t kept = 0, last = -1;  // last: the previous position in walk order
    size_t n_extras = 0;
    for (const ChunkRec& ch : s.chunks) {
      const int T = ch.T();  // 1..64 by construction (6 bits + 1)
      if (T > G || ch.k_fmt() >= L.formats.size() || ch.v_fmt() >= L.formats.size() ||
          ch.pos0 <= last)
        return MakeError(where + "bad chunk record");
      const Format& kf = L.Fmt(ch.k_fmt());
      const Format& vf = L.Fmt(ch.v_fmt());
      if (!quant::Validate(kf, T, D).ok() || !quant::Validate(vf, T, D).ok())
        return MakeError(where + "a chunk's format cannot hold it");
      if (!ch.live()) {  // tombstone: no storage, no side-table entry
        for (int w = 0; w < 4; ++w) {
          if (ch.ref(w).valid()) return MakeError(where + "an evicted chunk holds storage");
        }
        if (ch.kept_lo || ch.explicit_pos() || ch.narrow_pos())
          return MakeError(where + "an evicted chunk holds storage");
        last = ch.pos0;
        continue;
      }
      // Every block word references a live block; the units of every block
      // are marked once (no block shared, none lost: see OccupancyMatches).
      for (int w = 0; w < 4; ++w) {
        size_t bytes = 0;
        if (L.WordIsBlock(ch, w, D, &bytes)) {
          if (!L.pool.Holds(ch.ref(w), bytes) || !L.pool.MarkUnits(ch.ref(w), bytes, &seen))
            return MakeError(where + "a chunk's block lies outside the pool or overlaps another");
          requested += static_cast<int64_t>(bytes);
          ++blocks;
        } else if (bytes == 0 && ch.ref(w).valid()) {  // no metadata: no block
          return MakeError(where + "bad chunk record");
        }
      }
      const ChunkExtra* e = nullptr;
      if (Stream::HasExtra(ch)) {
        e = s.FindExtra(ch.pos0);
        if (!e) return MakeError(where + "a chunk's side-table entry is missing");
        ++n_extras;
      }
      uint64_t kept_mask = ch.kept_lo;
      if (T > 32) kept_mask |= uint64_t{e->kept_hi} << 32;
      const uint64_t slots = T == 64 ? ~uint64_t{0} : (uint64_t{1} << T) - 1;
      if (kept_mask == 0 || (kept_mask & ~slots) || (e && T <= 32 && e->kept_hi))
        return MakeError(where + "bad chunk record");
      if ((e && e->positions.valid() != ch.explicit_pos()) ||
          (ch.narrow_pos() && !ch.explicit_pos()))
        return MakeError(where + "bad chunk record");
      if (ch.explicit_pos()) {
        const size_t bytes = ch.position_bytes();
        if (!L.pool.Holds(e->positions, bytes) || !L.pool.MarkUnits(e->positions, bytes, &seen))
          return MakeError(where + "a chunk's position list lies outside the pool");
        requested += static_cast<int64_t>(bytes);
        ++blocks;
        const PositionList ps = L.Positions(s, ch);
        if (ps[0] != ch.pos0) return MakeError(where + "positions out of order");
        for (int t = 1; t < T; ++t) {
          if (ps[t] <= ps[t - 1]) return MakeError(where + "positions out of order");
        }
        last = ps[T - 1];
      } else {
        last = static_cast<int64_t>(ch.pos0) + T - 1;
      }
      kept += __builtin_popcountll(kept_mask);
    }
    if (n_extras != s.extras.size())
      return MakeError(where + "a side-table entry belongs to no chunk");
    for (int32_t p : s.res_pos) {
      if (p <= last) return MakeError(where + "positions out of order");
      last = p;
    }
    if (kept != s.kept_in_chunks) return MakeError(where + "kept-token count disagrees");
    newest = std::max(newest, last);
  }
  if (!L.pool.OccupancyMatches(seen) || requested != L.pool.requested_bytes() ||
      blocks != L.pool.live_blocks())
    return MakeError(where + "pool blocks that no chunk references");
  uint8_t has_last = 0;
  if (!r.Get(&L.appended) || !r.Get(&has_last) || !r.Get(&L.last_pos) || has_last > 1)
    return MakeError(where + "truncated");
  L.has_last = has_last != 0;
  // Positions are distinct int32 values: at most 2^32 tokens were appended
  // (a larger count would overflow the element counts of Stats()).
  if (L.appended < 0 || L.appended > (int64_t{1} << 32) || (L.appended > 0) != L.has_last)
    return MakeError(where + "appended-token count out of range");
  for (const Stream& s : L.streams) {
    if (s.kept_in_chunks + static_cast<int64_t>(s.res_pos.size()) > L.appended)
      return MakeError(where + "more tokens kept than appended");
  }
  if (newest >= 0 && (!L.has_last || newest > L.last_pos))
    return MakeError(where + "a position beyond the last appended one");
  return Status::Ok();
}

}  // namespace hqekv::cache
