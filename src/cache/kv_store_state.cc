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

constexpr char kTag[8] = {'K', 'V', 'S', 'T', 'O', 'R', 'E', '1'};

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
  if (r.kind > static_cast<uint8_t>(quant::Kind::kQ5_1) ||
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
  static_assert(sizeof(ChunkRec) == 56, "chunk records are saved as they are: no padding");
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
  if (!r.GetArray(tag, sizeof(tag)) || std::string_view(tag, 8) != std::string_view(kTag, 8))
    return MakeError("KV store state: missing or unknown store tag");
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
  if (!r.Get(&n_formats) || !r.Get(&cap) || n_formats > 256 || n_formats > cap || cap > 512)
    return MakeError(where + "bad format table");
  L.formats.reserve(cap);
  for (uint64_t i = 0; i < n_formats; ++i) {
    FormatRec rec;
    Format f;
    if (!r.Get(&rec) || !FromRec(rec, &f)) return MakeError(where + "bad format table");
    L.formats.push_back(f);
  }
  const uint64_t res_slack = 2 * static_cast<uint64_t>(cfg_.residual_reserve + G + 1) * D + 64;
  int64_t newest = -1;  // largest position seen in any stream
  for (Stream& s : L.streams) {
    if (!r.GetVector(&s.chunks, CapLimit<ChunkRec>(r, 64)) ||
        !r.GetVector(&s.res_k, CapLimit<f16_t>(r, res_slack)) ||
        !r.GetVector(&s.res_v, CapLimit<f16_t>(r, res_slack)) ||
        !r.GetVector(&s.res_pos, CapLimit<int32_t>(r, res_slack / D)) || !r.Get(&s.kept_in_chunks))
      return MakeError(where + "truncated or oversized stream");
    if (s.res_k.size() != s.res_pos.size() * D || s.res_v.size() != s.res_k.size())
      return MakeError(where + "residual sizes disagree");
    int64_t kept = 0, last = -1;  // last: the previous position in walk order
    for (const ChunkRec& ch : s.chunks) {
      // T is checked before it sizes a shift (a corrupt T must not shift by >= 64).
      if (ch.T < 1 || ch.T > G || ch.T > 64) return MakeError(where + "bad chunk record");
      const uint64_t slots = ch.T == 64 ? ~uint64_t{0} : (uint64_t{1} << ch.T) - 1;
      if (ch.k_fmt >= L.formats.size() || ch.v_fmt >= L.formats.size() || ch.explicit_pos > 1 ||
          (ch.kept & ~slots) || ch.pos0 <= last)
        return MakeError(where + "bad chunk record");
      const Format& kf = L.Fmt(ch.k_fmt);
      const Format& vf = L.Fmt(ch.v_fmt);
      if (!quant::Validate(kf, ch.T, D).ok() || !quant::Validate(vf, ch.T, D).ok())
        return MakeError(where + "a chunk's format cannot hold it");
      if (ch.kept == 0) {  // tombstone: no storage
        if (ch.k.codes.valid() || ch.v.codes.valid() || ch.explicit_pos)
          return MakeError(where + "an evicted chunk holds storage");
        last = ch.pos0;
        continue;
      }
      for (const auto& [p, f] : {std::pair{&ch.k, &kf}, std::pair{&ch.v, &vf}}) {
        const size_t meta = quant::MetaBytes(*f, ch.T, D);
        const bool meta_ok = meta == 0                        ? !p->meta.valid()
                             : meta <= BlockRef::kInlineBytes ? p->meta.is_inline()
                                                              : L.pool.Holds(p->meta, meta);
        if (!meta_ok || !L.pool.Holds(p->codes, quant::CodeBytes(*f, ch.T, D)))
          return MakeError(where + "a chunk's block lies outside the pool");
      }
      if (ch.explicit_pos) {
        if (!L.pool.Holds(ch.pos, static_cast<size_t>(ch.T) * sizeof(int32_t)))
          return MakeError(where + "a chunk's position list lies outside the pool");
        const auto* ps = reinterpret_cast<const int32_t*>(L.pool.Data(ch.pos));
        if (ps[0] != ch.pos0) return MakeError(where + "positions out of order");
        for (int t = 1; t < ch.T; ++t) {
          if (ps[t] <= ps[t - 1]) return MakeError(where + "positions out of order");
        }
        last = ps[ch.T - 1];
      } else {
        last = static_cast<int64_t>(ch.pos0) + ch.T - 1;
      }
      kept += __builtin_popcountll(ch.kept);
    }
    for (int32_t p : s.res_pos) {
      if (p <= last) return MakeError(where + "positions out of order");
      last = p;
    }
    if (kept != s.kept_in_chunks) return MakeError(where + "kept-token count disagrees");
    newest = std::max(newest, last);
  }
  uint8_t has_last = 0;
  if (!r.Get(&L.appended) || !r.Get(&has_last) || !r.Get(&L.last_pos) || has_last > 1)
    return MakeError(where + "truncated");
  L.has_last = has_last != 0;
  for (const Stream& s : L.streams) {
    if (s.kept_in_chunks + static_cast<int64_t>(s.res_pos.size()) > L.appended)
      return MakeError(where + "more tokens kept than appended");
  }
  if (newest >= 0 && (!L.has_last || newest > L.last_pos))
    return MakeError(where + "a position beyond the last appended one");
  return Status::Ok();
}

}  // namespace hqekv::cache
