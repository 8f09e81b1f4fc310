#include "cache/kv_store.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "cache/kv_store_records.h"
#include "quant/format_traits.h"

namespace hqekv::cache {

using quant::Format;

bool SameFormat(const Format& a, const Format& b) {
  if (a.kind != b.kind || a.bits != b.bits || a.hadamard != b.hadamard) return false;
  if (quant::IsGroupedKind(a.kind)) {
    if (a.grouping != b.grouping) return false;
    if (a.grouping == quant::Grouping::kPerToken && a.group != b.group) return false;
  }
  return true;
}

namespace {

std::string At(int layer, int head) {
  return "layer " + std::to_string(layer) + ", head " + std::to_string(head);
}

}  // namespace

KvStore::KvStore(const KvStoreConfig& cfg)
    : cfg_(cfg), res_units_(ResidualRowBytes(cfg.residual_format, cfg.head_dim) / 2) {}

bool ResidualFormatOk(const quant::Format& f, int D) {
  using quant::Kind;
  if (f.kind == Kind::kF16) return !f.hadamard;
  // Per-token kinds only, so that a row is complete without its
  // neighbours: llama.cpp's block types (blocks of d_block values along D)
  // and int8 (one scale per token).
  const bool per_token = quant::Traits(f.kind).d_block > 0 || f.kind == Kind::kInt8;
  // Rows are kept in fp16-sized units: every such row is an even byte count.
  return per_token && quant::Validate(f, 1, D).ok() && ResidualRowBytes(f, D) % 2 == 0;
}

Status CheckResidualFormat(const quant::Format& f, int D) {
  if (ResidualFormatOk(f, D)) return Status::Ok();
  return MakeError(quant::FormatName(f) + " cannot hold residual rows of head_dim " +
                   std::to_string(D) +
                   " (f16, or a per-token q8_0/q5_1/q5_0/q4_1/q4_0/iq4_nl/int8 that fits it)");
}

size_t ResidualRowBytes(const quant::Format& f, int D) {
  return quant::CodeBytes(f, 1, D) + quant::MetaBytes(f, 1, D);
}

void ResidualView::Row(int i, bool is_k, int D, float* out) const {
  if (!quantized()) {
    const f16_t* r = (is_k ? k : v) + static_cast<size_t>(i) * D;
    for (int d = 0; d < D; ++d) out[d] = F16ToF32(r[d]);
    return;
  }
  const uint8_t* r = (is_k ? k_rows : v_rows) + static_cast<size_t>(i) * row_bytes;
  quant::DequantizeChunk(format, r, r + quant::CodeBytes(format, 1, D), 1, D, out);
}
KvStore::~KvStore() = default;

Result<std::unique_ptr<KvStore>> KvStore::Create(const KvStoreConfig& config) {
  if (config.n_layers <= 0 || config.n_kv_heads <= 0 || config.head_dim <= 0) {
    return MakeError("KvStore: n_layers, n_kv_heads and head_dim must be positive (got " +
                     std::to_string(config.n_layers) + ", " + std::to_string(config.n_kv_heads) +
                     ", " + std::to_string(config.head_dim) + ")");
  }
  if (config.chunk < 1 || config.chunk > 64) {
    return MakeError("KvStore: chunk must be in 1..64 tokens (got " + std::to_string(config.chunk) +
                     ")");
  }
  if (config.page_bytes != 0 && config.page_bytes < 256) {
    return MakeError("KvStore: page_bytes must be 0 (automatic) or >= 256 (got " +
                     std::to_string(config.page_bytes) + ")");
  }
  if (config.residual_reserve < -1) {
    return MakeError("KvStore: residual_reserve must be -1 (= chunk) or >= 0 tokens (got " +
                     std::to_string(config.residual_reserve) + ")");
  }
  if (Status st = CheckResidualFormat(config.residual_format, config.head_dim); !st.ok()) {
    return MakeError("KvStore: residual format " + st.message());
  }
  KvStoreConfig cfg = config;
  if (cfg.residual_reserve < 0) cfg.residual_reserve = cfg.chunk;
  if (cfg.page_bytes == 0) cfg.page_bytes = AutoPageBytes(cfg.chunk, cfg.head_dim);
  std::unique_ptr<KvStore> s(new KvStore(cfg));
  s->Reset();
  return s;
}

size_t KvStore::AutoPageBytes(int chunk, int head_dim) {
  // One fp16 K chunk: its 64 units are then as small as the smallest
  // metadata plane of the common formats, so every block packs tightly.
  const size_t want = static_cast<size_t>(chunk) * head_dim * 2;
  size_t p = 1024;
  while (p < want && p < (size_t{256} << 10)) p *= 2;
  return p;
}

void KvStore::Reset() {
  layers_.clear();
  layers_.reserve(cfg_.n_layers);
  for (int l = 0; l < cfg_.n_layers; ++l) {
    layers_.push_back(std::make_unique<Layer>(cfg_, cfg_.page_bytes));
  }
}

Status KvStore::CheckLayerHead(int layer, int head, const char* op) const {
  if (layer < 0 || layer >= cfg_.n_layers) {
    return MakeError(std::string("KvStore::") + op + ": layer " + std::to_string(layer) +
                     " out of range [0, " + std::to_string(cfg_.n_layers) + ")");
  }
  if (head != kAllHeads && (head < 0 || head >= cfg_.n_kv_heads)) {
    return MakeError(std::string("KvStore::") + op + ": KV head " + std::to_string(head) +
                     " out of range [0, " + std::to_string(cfg_.n_kv_heads) + ")");
  }
  return Status::Ok();
}

// ---- append ----------------------------------------------------------------

namespace {
// Grows a residual array geometrically (1/8) so that a policy that keeps many
// tokens in the residual neither copies quadratically nor wastes 2x.
// min_step 0: exactly `need` (no slack; a copy of the residual per append).
template <class T>
void GrowFor(CountedVector<T>& v, size_t need, size_t min_step) {
  if (need <= v.capacity()) return;
  if (min_step == 0) {
    v.reserve(need);
    return;
  }
  v.reserve(std::max(need, v.capacity() + std::max(min_step, v.capacity() / 8)));
}

// Gives back residual capacity after tokens leave the residual (sealed or
// evicted): keeps room for `reserve` more tokens (G by default), so that
// steady decoding with periodic sealing does not reallocate at every step.
// exact: any capacity beyond `keep` is given back (the store always asks
// for exact; 2x slack otherwise).
template <class T>
void ShrinkFor(CountedVector<T>& v, size_t keep, bool exact) {
  if (exact ? v.capacity() <= keep : v.capacity() <= 2 * keep) return;
  CountedVector<T> fresh(v.get_allocator());
  fresh.reserve(keep);
  fresh.assign(v.begin(), v.end());
  v.swap(fresh);
}
}  // namespace

void KvStore::ShrinkResidual(Stream& s) const {
  const size_t keep = s.res_pos.size() + cfg_.residual_reserve;
  // Exactly the reserve: the byte model of a budget (policy/true_bits.h)
  // counts the residual as its tokens + the reserve after a seal; the copy
  // (at most a few chunks of fp16 rows, once per seal) is cheap.
  const bool exact = true;
  ShrinkFor(s.res_pos, keep, exact);
  ShrinkFor(s.res_k, keep * res_units_, exact);
  ShrinkFor(s.res_v, keep * res_units_, exact);
}

Status KvStore::Append(int layer, const float* k, const float* v, const int32_t* pos, int n) {
  HQEKV_RETURN_IF_ERROR(CheckLayerHead(layer, 0, "Append"));
  if (n < 0) return MakeError("KvStore::Append: negative token count " + std::to_string(n));
  if (n == 0) return Status::Ok();
  if (!k || !v || !pos) return MakeError("KvStore::Append: null k, v or pos");
  Layer& L = *layers_[layer];
  for (int i = 0; i < n; ++i) {
    const bool ok = (i == 0) ? (!L.has_last || pos[0] > L.last_pos) : pos[i] > pos[i - 1];
    if (!ok) {
      return MakeError("KvStore::Append: layer " + std::to_string(layer) + ": position " +
                       std::to_string(pos[i]) + " (token " + std::to_string(i) +
                       ") is not greater than the previous position");
    }
  }
  const int H = cfg_.n_kv_heads, D = cfg_.head_dim;
  for (int h = 0; h < H; ++h) {
    Stream& s = L.streams[h];
    const size_t old = s.res_pos.size();
    const size_t step = std::max(0, cfg_.residual_reserve);
    GrowFor(s.res_pos, old + n, step);
    const size_t U = res_units_;
    GrowFor(s.res_k, (old + n) * U, step * U);
    GrowFor(s.res_v, (old + n) * U, step * U);
    s.res_pos.insert(s.res_pos.end(), pos, pos + n);
    s.res_k.resize((old + n) * U);
    s.res_v.resize((old + n) * U);
    f16_t* kd = s.res_k.data() + old * U;
    f16_t* vd = s.res_v.data() + old * U;
    const Format& rf = cfg_.residual_format;
    const size_t code_bytes = quant::CodeBytes(rf, 1, D);
    for (int i = 0; i < n; ++i) {
      const float* kr = k + (static_cast<size_t>(i) * H + h) * D;
      const float* vr = v + (static_cast<size_t>(i) * H + h) * D;
      if (rf.kind != quant::Kind::kF16) {
        // Quantized now, before the batch that brought the token attends.
        for (auto [src, row] : {std::pair{kr, kd}, std::pair{vr, vd}}) {
          uint8_t* b = reinterpret_cast<uint8_t*>(row + static_cast<size_t>(i) * U);
          quant::QuantizeChunk(rf, src, 1, D, b, b + code_bytes);
        }
        continue;
      }
      for (int d = 0; d < D; ++d) kd[static_cast<size_t>(i) * D + d] = F32ToF16(kr[d]);
      for (int d = 0; d < D; ++d) vd[static_cast<size_t>(i) * D + d] = F32ToF16(vr[d]);
    }
  }
  L.appended += n;
  L.has_last = true;
  L.last_pos = pos[n - 1];
  return Status::Ok();
}

// ---- seal ------------------------------------------------------------------

Status KvStore::Seal(int layer, int head, int n, const Format& kf, const Format& vf) {
  HQEKV_RETURN_IF_ERROR(CheckLayerHead(layer, head, "Seal"));
  Layer& L = *layers_[layer];
  const int h0 = head == kAllHeads ? 0 : head;
  const int h1 = head == kAllHeads ? cfg_.n_kv_heads : head + 1;
  for (int h = h0; h < h1; ++h) {
    const int avail = static_cast<int>(L.streams[h].res_pos.size());
    if (n < 0 || n > avail) {
      return MakeError("KvStore::Seal: " + At(layer, h) + ": cannot seal " + std::to_string(n) +
                       " tokens, the residual holds " + std::to_string(avail));
    }
  }
  if (n == 0) return Status::Ok();
  // Every chunk is T = G tokens except possibly the last.
  for (int T : {std::min(n, cfg_.chunk), n % cfg_.chunk}) {
    if (T == 0) continue;
    for (const Format* f : {&kf, &vf}) {
      Status st = quant::Validate(*f, T, cfg_.head_dim);
      if (!st.ok()) {
        return MakeError("KvStore::Seal: " + std::string(f == &kf ? "K" : "V") + " format " +
                         quant::FormatName(*f) + " cannot hold a chunk of " + std::to_string(T) +
                         " tokens x " + std::to_string(cfg_.head_dim) + ": " + st.message());
      }
    }
  }
  for (int h = h0; h < h1; ++h) HQEKV_RETURN_IF_ERROR(SealOne(L, L.streams[h], n, kf, vf));
  return Status::Ok();
}

// Allocates K and V planes (formats kf, vf) of chunk c (pos0, T and the
// explicit flag set) and, when c is explicit, its position list block; *extra
// is its side-table entry (kept_hi from `kept`), which the caller adds when
// Stream::HasExtra(*c). Sets c's kept mask. False, nothing allocated, on OOM.
bool KvStore::AllocChunk(Layer& L, const Format& kf, const Format& vf, ChunkRec* c, uint64_t kept,
                         ChunkExtra* extra) {
  const int D = cfg_.head_dim, T = c->T();
  if (!L.AllocPlane(c, true, kf, D)) return false;
  if (!L.AllocPlane(c, false, vf, D)) {
    L.FreePlane(c, true, kf, D);
    return false;
  }
  *extra = ChunkExtra{};
  extra->pos0 = c->pos0;
  if (c->explicit_pos()) {
    extra->positions = L.pool.Allocate(c->position_bytes());
    if (!extra->positions.valid()) {
      L.FreePlane(c, true, kf, D);
      L.FreePlane(c, false, vf, D);
      return false;
    }
  }
  c->kept_lo = static_cast<uint32_t>(kept);
  extra->kept_hi = T > 32 ? static_cast<uint32_t>(kept >> 32) : 0;
  return true;
}

// Frees every block of chunk c of stream s (planes, positions, extra entry).
void KvStore::FreeChunk(Layer& L, Stream& s, ChunkRec* c) {
  const int D = cfg_.head_dim;
  if (Stream::HasExtra(*c)) {
    if (const ChunkExtra* e = s.FindExtra(c->pos0)) {
      if (e->positions.valid()) L.pool.Free(e->positions, c->position_bytes());
      s.RemoveExtra(c->pos0);
    }
  }
  L.FreePlane(c, true, L.Fmt(c->k_fmt()), D);
  L.FreePlane(c, false, L.Fmt(c->v_fmt()), D);
  c->set_explicit_pos(false);
  c->set_narrow_pos(false);
  c->kept_lo = 0;
}

Status KvStore::SealOne(Layer& L, Stream& s, int n, const Format& kf, const Format& vf) {
  const int D = cfg_.head_dim, G = cfg_.chunk;
  const int kfi = L.FormatIndex(kf), vfi = L.FormatIndex(vf);
  if (kfi < 0 || vfi < 0) {
    return MakeError("KvStore::Seal: more than " + std::to_string(Layer::kMaxFormats) +
                     " distinct formats in one layer");
  }
  std::vector<float> kbuf(static_cast<size_t>(G) * D), vbuf(kbuf.size());
  const int nc = (n + G - 1) / G;
  // Records grow by 1/8 (push_back's doubling would hold up to 24 bytes of
  // spare records per chunk, 0.375 bit per element at D = 8).
  GrowFor(s.chunks, s.chunks.size() + nc, 4);
  // The seal's records first (every chunk is T = G tokens except possibly
  // the last), then their blocks one word at a time: every K codes block,
  // every K metadata block, then V. A multi-chunk seal (a prompt) so lays
  // each plane of the stream in consecutive units of consecutive pages, the
  // order decode attention reads it in (K pass, then V pass). Chunk by chunk
  // the K and V blocks alternated, and a decode step over int8 / fp8 / q8_0
  // at 32K took 1.20 / 1.30 / 1.31x as long (bench_attention DecodeAttention,
  // stream-major block placement).
  std::vector<ChunkRec> recs(nc);
  std::vector<ChunkExtra> extras(nc);
  for (int i = 0, at = 0; i < nc; at += recs[i].T(), ++i) {
    const int T = std::min(G, n - at);
    const int32_t* pos = s.res_pos.data() + at;
    bool contiguous = true;
    for (int t = 1; t < T; ++t) contiguous = contiguous && pos[t] == pos[0] + t;
    ChunkRec& c = recs[i];
    c.pos0 = pos[0];
    c.set_T(T);
    c.set_fmt(true, static_cast<uint32_t>(kfi));
    c.set_fmt(false, static_cast<uint32_t>(vfi));
    c.set_explicit_pos(!contiguous);
    c.set_narrow_pos(!contiguous && NarrowSpan(pos, T));
    const uint64_t kept = T == 64 ? ~uint64_t{0} : ((uint64_t{1} << T) - 1);
    c.kept_lo = static_cast<uint32_t>(kept);
    extras[i].pos0 = c.pos0;
    extras[i].kept_hi = T > 32 ? static_cast<uint32_t>(kept >> 32) : 0;
  }
  bool ok = true;
  for (int w = 0; w < 4 && ok; ++w) {
    const Format& f = Layer::IsKWord(w) ? kf : vf;
    for (int i = 0; i < nc && ok; ++i) ok = L.AllocWord(&recs[i], w, f, D);
  }
  for (int i = 0; i < nc && ok; ++i) {
    if (!recs[i].explicit_pos()) continue;
    extras[i].positions = L.pool.Allocate(recs[i].position_bytes());
    ok = extras[i].positions.valid();
  }
  if (!ok) {  // nothing sealed: every block of the seal goes back
    for (int i = 0; i < nc; ++i) {
      if (extras[i].positions.valid()) L.pool.Free(extras[i].positions, recs[i].position_bytes());
      for (int w = 0; w < 4; ++w) {
        const Format& f = Layer::IsKWord(w) ? kf : vf;
        if (recs[i].ref(w).valid()) L.FreeWord(&recs[i], w, f, D);
      }
    }
    return MakeError("KvStore::Seal: out of memory");
  }
  int sealed = 0;
  for (int i = 0; i < nc; ++i) {
    const int T = recs[i].T();
    if (recs[i].explicit_pos()) {
      WritePositions(recs[i].narrow_pos(), s.res_pos.data() + sealed, T,
                     L.pool.Data(extras[i].positions));
    }
    if (Stream::HasExtra(recs[i])) s.AddExtra(extras[i]);
    const ResidualView rv = ViewResidual(s);
    for (int t = 0; t < T; ++t) {
      rv.Row(sealed + t, true, D, kbuf.data() + static_cast<size_t>(t) * D);
      rv.Row(sealed + t, false, D, vbuf.data() + static_cast<size_t>(t) * D);
    }
    s.chunks.push_back(recs[i]);  // inline metadata is written into the stored record
    ChunkRec& sc = s.chunks.back();
    quant::QuantizeChunk(kf, kbuf.data(), T, D, L.Codes(sc, true), L.Meta(sc, true, D));
    quant::QuantizeChunk(vf, vbuf.data(), T, D, L.Codes(sc, false), L.Meta(sc, false, D));
    s.kept_in_chunks += T;
    sealed += T;
  }
  s.res_pos.erase(s.res_pos.begin(), s.res_pos.begin() + sealed);
  s.res_k.erase(s.res_k.begin(), s.res_k.begin() + static_cast<size_t>(sealed) * res_units_);
  s.res_v.erase(s.res_v.begin(), s.res_v.begin() + static_cast<size_t>(sealed) * res_units_);
  ShrinkResidual(s);
  return Status::Ok();
}

// ---- format changes ----------------------------------------------------------

Status KvStore::SetChunkFormat(int layer, int head, int c, const Format& kf, const Format& vf) {
  HQEKV_RETURN_IF_ERROR(CheckLayerHead(layer, head, "SetChunkFormat"));
  Layer& L = *layers_[layer];
  const int h0 = head == kAllHeads ? 0 : head;
  const int h1 = head == kAllHeads ? cfg_.n_kv_heads : head + 1;
  for (int h = h0; h < h1; ++h) {
    const auto& chunks = L.streams[h].chunks;
    if (c < 0 || c >= static_cast<int>(chunks.size())) {
      return MakeError("KvStore::SetChunkFormat: " + At(layer, h) + ": chunk " + std::to_string(c) +
                       " out of range [0, " + std::to_string(chunks.size()) + ")");
    }
    if (!chunks[c].live()) {
      return MakeError("KvStore::SetChunkFormat: " + At(layer, h) + ": chunk " + std::to_string(c) +
                       " is evicted");
    }
    for (const Format* f : {&kf, &vf}) {
      Status st = quant::Validate(*f, chunks[c].T(), cfg_.head_dim);
      if (!st.ok()) {
        return MakeError("KvStore::SetChunkFormat: format " + quant::FormatName(*f) +
                         " cannot hold chunk " + std::to_string(c) + " of " + At(layer, h) + ": " +
                         st.message());
      }
    }
  }
  for (int h = h0; h < h1; ++h) {
    Stream& s = L.streams[h];
    HQEKV_RETURN_IF_ERROR(ConvertOne(L, s, s.chunks[c], true, kf));
    HQEKV_RETURN_IF_ERROR(ConvertOne(L, s, s.chunks[c], false, vf));
  }
  return Status::Ok();
}

Status KvStore::ConvertOne(Layer& L, const Stream& s, ChunkRec& c, bool is_k, const Format& f) {
  const Format old = L.Fmt(c.fmt(is_k));
  if (SameFormat(old, f)) return Status::Ok();
  const int fi = L.FormatIndex(f);
  if (fi < 0) {
    return MakeError("KvStore::SetChunkFormat: more than " + std::to_string(Layer::kMaxFormats) +
                     " distinct formats in one layer");
  }
  const int T = c.T(), D = cfg_.head_dim;
  const uint64_t kept = s.Kept(c);
  std::vector<float> x(static_cast<size_t>(T) * D);
  quant::DequantizeChunk(old, L.Codes(c, is_k), L.Meta(c, is_k, D), T, D, x.data());
  // Evicted slots take the value of the nearest kept slot, so that they do
  // not stretch the range of the groups they share with kept tokens.
  for (int t = 0; t < T; ++t) {
    if ((kept >> t) & 1u) continue;
    int src = -1;
    for (int dist = 1; dist < T && src < 0; ++dist) {
      if (t - dist >= 0 && ((kept >> (t - dist)) & 1u))
        src = t - dist;
      else if (t + dist < T && ((kept >> (t + dist)) & 1u))
        src = t + dist;
    }
    if (src >= 0)
      std::memcpy(&x[static_cast<size_t>(t) * D], &x[static_cast<size_t>(src) * D],
                  D * sizeof(float));
  }
  // The new plane goes into a copy of the record (its inline metadata too);
  // the other plane's words are carried over unchanged.
  ChunkRec fresh = c;
  fresh.set_fmt(is_k, static_cast<uint32_t>(fi));
  if (!L.AllocPlane(&fresh, is_k, f, D)) return MakeError("KvStore::SetChunkFormat: out of memory");
  quant::QuantizeChunk(f, x.data(), T, D, L.Codes(fresh, is_k), L.Meta(fresh, is_k, D));
  L.FreePlane(&c, is_k, old, D);
  c = fresh;
  return Status::Ok();
}

// ---- eviction ------------------------------------------------------------------

void KvStore::EvictWholeChunk(Layer& L, Stream& s, ChunkRec& c) {
  if (!c.live()) return;  // already a tombstone
  s.kept_in_chunks -= __builtin_popcountll(s.Kept(c));
  FreeChunk(L, s, &c);
}

Status KvStore::EvictChunk(int layer, int head, int c) {
  HQEKV_RETURN_IF_ERROR(CheckLayerHead(layer, head, "EvictChunk"));
  Layer& L = *layers_[layer];
  const int h0 = head == kAllHeads ? 0 : head;
  const int h1 = head == kAllHeads ? cfg_.n_kv_heads : head + 1;
  for (int h = h0; h < h1; ++h) {
    if (c < 0 || c >= static_cast<int>(L.streams[h].chunks.size())) {
      return MakeError("KvStore::EvictChunk: " + At(layer, h) + ": chunk " + std::to_string(c) +
                       " out of range [0, " + std::to_string(L.streams[h].chunks.size()) + ")");
    }
  }
  for (int h = h0; h < h1; ++h) EvictWholeChunk(L, L.streams[h], L.streams[h].chunks[c]);
  return Status::Ok();
}

namespace {
// Where a kept token lives: chunk >= 0 and slot, or chunk == -1 and residual index.
struct TokenLoc {
  int chunk = -1;
  int index = -1;
};
}  // namespace

Status KvStore::EvictTokens(int layer, int head, const int32_t* positions, int n) {
  HQEKV_RETURN_IF_ERROR(CheckLayerHead(layer, head, "EvictTokens"));
  if (n < 0) return MakeError("KvStore::EvictTokens: negative count " + std::to_string(n));
  if (n == 0) return Status::Ok();
  if (!positions) return MakeError("KvStore::EvictTokens: null positions");
  std::vector<int32_t> sorted(positions, positions + n);
  std::sort(sorted.begin(), sorted.end());
  for (int i = 1; i < n; ++i) {
    if (sorted[i] == sorted[i - 1]) {
      return MakeError("KvStore::EvictTokens: position " + std::to_string(sorted[i]) +
                       " listed twice");
    }
  }
  Layer& L = *layers_[layer];
  const int h0 = head == kAllHeads ? 0 : head;
  const int h1 = head == kAllHeads ? cfg_.n_kv_heads : head + 1;
  std::vector<std::vector<TokenLoc>> locs(h1 - h0);
  // Pass 1: locate every position in every head; change nothing on error.
  for (int h = h0; h < h1; ++h) {
    const Stream& s = L.streams[h];
    auto& out = locs[h - h0];
    out.reserve(n);
    for (int32_t p : sorted) {
      TokenLoc loc;
      auto it = std::upper_bound(s.chunks.begin(), s.chunks.end(), p,
                                 [](int32_t x, const ChunkRec& c) { return x < c.pos0; });
      if (it != s.chunks.begin()) {
        const ChunkRec& c = *(it - 1);
        const int ci = static_cast<int>(it - 1 - s.chunks.begin());
        if (!c.live()) {
          // tombstone: nothing kept here (and p lies in no earlier chunk)
        } else if (c.explicit_pos()) {
          const PositionList ps = L.Positions(s, c);
          int lo = 0, hi = c.T();  // the first slot whose position is >= p
          while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (ps[mid] < p) {
              lo = mid + 1;
            } else {
              hi = mid;
            }
          }
          if (lo < c.T() && ps[lo] == p) loc = TokenLoc{ci, lo};
        } else if (p - c.pos0 < c.T()) {
          loc = TokenLoc{ci, p - c.pos0};
        }
        if (loc.chunk >= 0 && !((s.Kept(c) >> loc.index) & 1u)) loc = TokenLoc{};
      }
      if (loc.chunk < 0) {
        auto f = std::lower_bound(s.res_pos.begin(), s.res_pos.end(), p);
        if (f != s.res_pos.end() && *f == p) loc.index = static_cast<int>(f - s.res_pos.begin());
      }
      if (loc.index < 0) {
        return MakeError("KvStore::EvictTokens: " + At(layer, h) + ": position " +
                         std::to_string(p) + " is not a kept token");
      }
      out.push_back(loc);
    }
  }
  // Pass 2: apply.
  for (int h = h0; h < h1; ++h) {
    Stream& s = L.streams[h];
    std::vector<char> drop_res;
    for (const TokenLoc& loc : locs[h - h0]) {
      if (loc.chunk >= 0) {
        ChunkRec& c = s.chunks[loc.chunk];
        s.SetKept(c, s.Kept(c) & ~(uint64_t{1} << loc.index));
        --s.kept_in_chunks;
        if (s.Kept(c) == 0)
          EvictWholeChunk(
              L, s,
              c);  // frees the storage; popcount is 0 now  // frees the storage; popcount is 0 now
      } else {
        if (drop_res.empty()) drop_res.assign(s.res_pos.size(), 0);
        drop_res[loc.index] = 1;
      }
    }
    if (!drop_res.empty()) {
      size_t w = 0;
      for (size_t r = 0; r < drop_res.size(); ++r) {
        if (drop_res[r]) continue;
        if (w != r) {
          s.res_pos[w] = s.res_pos[r];
          const size_t U = res_units_;
          std::memmove(&s.res_k[w * U], &s.res_k[r * U], U * sizeof(f16_t));
          std::memmove(&s.res_v[w * U], &s.res_v[r * U], U * sizeof(f16_t));
        }
        ++w;
      }
      s.res_pos.resize(w);
      s.res_k.resize(w * res_units_);
      s.res_v.resize(w * res_units_);
      ShrinkResidual(s);
    }
  }
  return Status::Ok();
}

// ---- reads ---------------------------------------------------------------------

int KvStore::NumChunks(int layer, int head) const {
  return static_cast<int>(layers_[layer]->streams[head].chunks.size());
}

ChunkView KvStore::View(const Layer& L, const Stream& s, const ChunkRec& c) const {
  const int D = cfg_.head_dim;
  ChunkView v;
  v.T = c.T();
  v.kept = s.Kept(c);
  v.pos0 = c.pos0;
  v.k_fmt = static_cast<int>(c.k_fmt());
  v.v_fmt = static_cast<int>(c.v_fmt());
  v.k_format = L.Fmt(c.k_fmt());
  v.v_format = L.Fmt(c.v_fmt());
  if (c.live()) {
    v.positions = L.Positions(s, c);
    v.k_codes = L.Codes(c, true);
    v.k_meta = L.Meta(c, true, D);
    v.v_codes = L.Codes(c, false);
    v.v_meta = L.Meta(c, false, D);
  }
  return v;
}

ChunkView KvStore::Chunk(int layer, int head, int c) const {
  const Layer& L = *layers_[layer];
  const Stream& s = L.streams[head];
  return View(L, s, s.chunks[c]);
}

int KvStore::NumFormats(int layer) const {
  return static_cast<int>(layers_[layer]->formats.size());
}

const quant::Format& KvStore::LayerFormat(int layer, int i) const {
  return layers_[layer]->Fmt(static_cast<uint32_t>(i));
}

ResidualView KvStore::Residual(int layer, int head) const {
  return ViewResidual(layers_[layer]->streams[head]);
}

ResidualView KvStore::ViewResidual(const Stream& s) const {
  ResidualView r;
  r.n = static_cast<int>(s.res_pos.size());
  r.positions = s.res_pos.data();
  r.format = cfg_.residual_format;
  r.row_bytes = res_units_ * sizeof(f16_t);
  if (r.quantized()) {
    r.k_rows = reinterpret_cast<const uint8_t*>(s.res_k.data());
    r.v_rows = reinterpret_cast<const uint8_t*>(s.res_v.data());
  } else {
    r.k = s.res_k.data();
    r.v = s.res_v.data();
  }
  return r;
}

int64_t KvStore::KeptTokens(int layer, int head) const {
  const Stream& s = layers_[layer]->streams[head];
  return s.kept_in_chunks + static_cast<int64_t>(s.res_pos.size());
}

int64_t KvStore::AppendedTokens(int layer) const { return layers_[layer]->appended; }

void KvStore::KeptPositions(int layer, int head, std::vector<int32_t>* out) const {
  out->clear();
  const Layer& L = *layers_[layer];
  const Stream& s = L.streams[head];
  out->reserve(KeptTokens(layer, head));
  for (const ChunkRec& c : s.chunks) {
    if (!c.live()) continue;
    const ChunkView v = View(L, s, c);
    for (int t = 0; t < v.T; ++t) {
      if (v.Kept(t)) out->push_back(v.Position(t));
    }
  }
  out->insert(out->end(), s.res_pos.begin(), s.res_pos.end());
}

Status KvStore::DequantizeChunk(int layer, int head, int c, float* k, float* v) const {
  HQEKV_RETURN_IF_ERROR(CheckLayerHead(layer, head, "DequantizeChunk"));
  if (head == kAllHeads) return MakeError("KvStore::DequantizeChunk: needs one head");
  if (c < 0 || c >= NumChunks(layer, head)) {
    return MakeError("KvStore::DequantizeChunk: chunk " + std::to_string(c) + " out of range");
  }
  const ChunkView cv = Chunk(layer, head, c);
  if (!cv.live()) {
    return MakeError("KvStore::DequantizeChunk: chunk " + std::to_string(c) + " of " +
                     At(layer, head) + " is evicted");
  }
  quant::DequantizeChunk(cv.k_format, cv.k_codes, cv.k_meta, cv.T, head_dim(), k);
  quant::DequantizeChunk(cv.v_format, cv.v_codes, cv.v_meta, cv.T, head_dim(), v);
  return Status::Ok();
}

void KvStore::DequantizeKept(int layer, int head, float* k, float* v) const {
  const int D = head_dim();
  std::vector<float> kx, vx;
  size_t row = 0;
  for (int c = 0; c < NumChunks(layer, head); ++c) {
    const ChunkView cv = Chunk(layer, head, c);
    if (!cv.live()) continue;
    kx.resize(static_cast<size_t>(cv.T) * D);
    vx.resize(kx.size());
    quant::DequantizeChunk(cv.k_format, cv.k_codes, cv.k_meta, cv.T, D, kx.data());
    quant::DequantizeChunk(cv.v_format, cv.v_codes, cv.v_meta, cv.T, D, vx.data());
    for (int t = 0; t < cv.T; ++t) {
      if (!cv.Kept(t)) continue;
      std::memcpy(k + row * D, &kx[static_cast<size_t>(t) * D], D * sizeof(float));
      std::memcpy(v + row * D, &vx[static_cast<size_t>(t) * D], D * sizeof(float));
      ++row;
    }
  }
  const ResidualView r = Residual(layer, head);
  for (int i = 0; i < r.n; ++i) {
    r.Row(i, true, D, k + (row + i) * D);
    r.Row(i, false, D, v + (row + i) * D);
  }
}

// ---- accounting ------------------------------------------------------------------

int64_t KvStore::PoolSlackBytes(int layer) const {
  const PagePool& p = layers_[layer]->pool;
  return p.held_bytes() - p.requested_bytes();
}

int64_t KvStore::LayerHeldBytes(int layer) const {
  return layers_[layer]->counter + static_cast<int64_t>(sizeof(Layer));
}

const PagePool& KvStore::Pool(int layer) const { return layers_[layer]->pool; }

KvStats KvStore::Stats() const {
  KvStats st;
  const int D = cfg_.head_dim;
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const Layer& L = *layers_[l];
    KvLayerStats ls;
    std::vector<std::string> names;
    for (const Format& f : L.formats) names.push_back(quant::FormatName(f));
    KvBytes& b = ls.bytes;
    for (const Stream& s : L.streams) {
      b.bookkeeping += CapacityBytes(s.chunks) + CapacityBytes(s.res_pos) + CapacityBytes(s.extras);
      b.residual += CapacityBytes(s.res_k) + CapacityBytes(s.res_v);
      for (const ChunkRec& c : s.chunks) {
        if (!c.live()) continue;
        const int T = c.T();
        const Format& kf = L.Fmt(c.k_fmt());
        const Format& vf = L.Fmt(c.v_fmt());
        b.payload += static_cast<int64_t>(quant::CodeBytes(kf, T, D) + quant::CodeBytes(vf, T, D));
        for (const Format* f : {&kf, &vf}) {
          const int64_t meta = static_cast<int64_t>(quant::MetaBytes(*f, T, D));
          b.metadata += meta;
          // Inline metadata is part of the record's bytes (counted above in
          // bookkeeping): it moves to metadata, the total stays exact.
          if (Layer::MetaInline(meta)) b.bookkeeping -= meta;
        }
        b.bookkeeping += static_cast<int64_t>(c.position_bytes());
        const int kept = __builtin_popcountll(s.Kept(c));
        ls.k_tiers[names[c.k_fmt()]] += kept;
        ls.v_tiers[names[c.v_fmt()]] += kept;
      }
      const int64_t res = static_cast<int64_t>(s.res_pos.size());
      if (res) {
        ls.k_tiers["residual"] += res;
        ls.v_tiers["residual"] += res;
      }
      const int64_t kept = s.kept_in_chunks + res;
      ls.kept_tokens += kept;
      if (L.appended > kept) {
        ls.k_tiers["evicted"] += L.appended - kept;
        ls.v_tiers["evicted"] += L.appended - kept;
      }
    }
    b.bookkeeping += PoolSlackBytes(l) + L.pool.table_bytes() + CapacityBytes(L.formats) +
                     CapacityBytes(L.streams) + static_cast<int64_t>(sizeof(Layer));
    st.bytes += b;
    st.kept_elements += ls.kept_tokens * D * 2;
    st.original_elements += L.appended * cfg_.n_kv_heads * D * 2;
    st.layers.push_back(std::move(ls));
  }
  return st;
}

}  // namespace hqekv::cache
