// Mixed-precision paged KV store for one sequence: the storage every
// compressing policy (policy/) builds on. It owns the representation and the
// byte accounting; the policy decides what to seal, downgrade and evict.
//
// Model: L layers × H_kv KV heads × head_dim D. Every (layer, KV head) is an
// independent "stream" of tokens in increasing original position:
//
//   [chunk 0][chunk 1]...[chunk C-1][residual]
//
// - The residual holds the newest tokens in fp16 ([n][D] for K and for V),
//   in the order appended. Append() always lands there (every head).
// - Seal() moves the N oldest residual tokens into chunks of up to G tokens
//   (G = config.chunk, default 32; the last chunk of a seal may be shorter),
//   quantized with the K format and V format the policy names (any
//   quant::Format valid for T × D). K and V of a chunk have separate formats.
// - A chunk's slots keep a "kept" bitmask: EvictTokens() clears bits (K and V
//   of a token always go together), EvictChunk() clears them all. A chunk with
//   no kept token releases its storage at once and stays as a tombstone until
//   Compact(), so chunk indices are stable between Compact() calls.
// - SetChunkFormat() re-quantizes a chunk from its current reconstruction
//   (fp16 -> lower quantizes the fp16 values); evicted slots of a partially
//   kept chunk are overwritten with a copy of the nearest kept slot first, so
//   they do not widen the min/max of per-channel groups.
// - Compact() drops tombstones and repacks partially evicted chunks whose K
//   and V are both raw (f16/f32): their kept rows are moved into full chunks
//   (see CompactOne in kv_store.cc for the amortized rule), so token-level
//   eviction (H2O, SnapKV, StreamingLLM) really frees memory. Quantized
//   chunks with holes keep their holes (their codes share scales across
//   tokens) until they are fully evicted.
// - Original positions are preserved: a chunk stores its first position and,
//   only when its positions are not consecutive, an explicit list (in the
//   stream's side table): uint16 offsets from the first position when the
//   chunk spans at most 65536 positions, else int32 positions.
//
// Walk order of a stream = chunks in order, kept slots in slot order, then the
// residual; it is ascending by original position. Attention weights and
// KeptPositions() are indexed in this order.
//
// Accounting (Stats()): every byte the store allocates for a layer is counted
// in exactly one KvBytes bucket, including the capacity of growing arrays and
// the unused space of the layer's page pool:
//   payload     = codes of every live chunk (K + V; evicted slots of a
//                 partially kept chunk are still held, hence counted)
//   metadata    = scales / minima / means / stds of every live chunk
//   bookkeeping = chunk records (24 bytes: first position, kept bitmask of
//                 slots 0..31, four 27-bit block refs carrying T, formats
//                 and flags; see kv_store_records.h), the streams' side
//                 tables (explicit position lists, kept bits of slots
//                 32..63), residual positions, the
//                 page pool's page table, pool slack (page bytes not given to
//                 any block: partially used pages, cached empty pages, block
//                 rounding), per-layer object headers
//   residual    = fp16 K and V of the residual (capacity, not size)
// LayerHeldBytes() counts the same bytes independently, by instrumenting every
// allocation; tests assert the two agree.
//
// Threading: mutations of one layer must not run concurrently with anything
// else on that layer; different layers may be mutated in parallel (one pool
// per layer). Reads (views, attention) may run concurrently with each other.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "cache/page_pool.h"
#include "core/half.h"
#include "core/status.h"
#include "quant/format.h"

namespace hqekv::cache {

struct KvStoreConfig {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // D
  int chunk = 32;    // G: tokens per chunk, 1..64
  // Page size of the per-layer arenas; 0 = automatic: one fp16 K chunk
  // rounded up to a power of two, clamped to [1 KiB, 256 KiB]
  // (8 KiB for G = 32, D = 128; 4 KiB for D = 64).
  size_t page_bytes = 0;
  int max_cached_pages = 2;  // empty pages each layer keeps for reuse
  // Spare residual capacity, in tokens per head, kept after tokens leave the
  // residual (sealed or evicted) and used as the minimum growth step of
  // Append; -1 = G. G suits policies that seal every G tokens (no
  // reallocation per decode step). 0 keeps the residual arrays at their exact
  // size, also while they grow (a copy of the residual per Append): for
  // policies whose budget is smaller than G fp16 tokens per head, e.g.
  // eviction caches of small heads, the reserve (or a 1/8 growth step) would
  // be a large part of the bytes they hold.
  int residual_reserve = -1;
  // How residual tokens are held: fp16 (the default), or a per-token format
  // (q8_0, q5_1, q5_0, q4_1, q4_0, iq4_nl, int8; optionally rotated) that
  // quantizes each token when it is appended, as llama.cpp's cache does. A
  // row is that format's codes then metadata for one token (D values), e.g.
  // 68 + 4 bytes for q8_0 at D = 64 against 128 for fp16; Seal re-quantizes
  // the chunk from the rows' reconstruction.
  quant::Format residual_format = quant::F16();
};

// True when f can hold a store's residual rows at head_dim D (see
// KvStoreConfig::residual_format).
bool ResidualFormatOk(const quant::Format& f, int D);
// ResidualFormatOk as a Status whose message names the format, D and what
// is accepted; callers prefix where it came from (a config, a spec key).
Status CheckResidualFormat(const quant::Format& f, int D);
// Bytes of one residual row (one token of one head, K or V) in f.
size_t ResidualRowBytes(const quant::Format& f, int D);

struct ChunkExtra;  // kv_store_records.h

// Pass as `head` to apply an operation to every KV head of the layer.
inline constexpr int kAllHeads = -1;

// Read-only view of one chunk of one (layer, KV head). Pointers stay valid
// until the next mutation of that layer.
// The explicit positions of a chunk: int32[T] (`wide`) or, when the chunk
// spans at most 65536 positions, uint16 offsets from pos0 (`offsets`, half
// the bytes); neither = consecutive positions pos0 + t.
struct PositionList {
  int32_t pos0 = 0;
  const int32_t* wide = nullptr;
  const uint16_t* offsets = nullptr;

  bool explicit_list() const { return wide || offsets; }
  int32_t operator[](int t) const {
    return wide ? wide[t] : offsets ? pos0 + static_cast<int32_t>(offsets[t]) : pos0 + t;
  }
  // Bytes the list holds for T slots.
  size_t bytes(int T) const {
    return wide ? 4 * static_cast<size_t>(T) : offsets ? 2 * static_cast<size_t>(T) : 0;
  }
};

// Bytes of an explicit list of T positions spanning `span` (last - first):
// uint16 offsets up to a span of 65535, else int32. The one rule the store
// writes lists by and a policy plans their bytes by.
inline constexpr size_t ExplicitListBytes(int T, int64_t span) {
  return static_cast<size_t>(T) * (span <= 65535 ? 2 : 4);
}

struct ChunkView {
  int T = 0;               // slots (tokens sealed into the chunk)
  uint64_t kept = 0;       // bit t set = slot t kept; 0 = tombstone
  int32_t pos0 = 0;        // original position of slot 0
  PositionList positions;  // explicit positions, or none (pos0 + t)
  quant::Format k_format, v_format;
  // Indices of k_format / v_format in the layer's format table
  // (KvStore::LayerFormat): what per-format tables (attn/kernel_set.h) key on.
  int k_fmt = 0, v_fmt = 0;
  const uint8_t* k_codes =
      nullptr;                      // quant::CodeBytes(k_format, T, D) bytes (nullptr if tombstone)
  const uint8_t* k_meta = nullptr;  // quant::MetaBytes(k_format, T, D) bytes
  const uint8_t* v_codes = nullptr;
  const uint8_t* v_meta = nullptr;

  bool live() const { return kept != 0; }
  bool Kept(int t) const { return (kept >> t) & 1u; }
  int32_t Position(int t) const { return positions[t]; }
  int KeptCount() const {
    // Every slot kept is the common case, and a popcount is a libgcc call in
    // the baseline-x86-64 library.
    const uint64_t all = T >= 64 ? ~uint64_t{0} : (uint64_t{1} << T) - 1;
    return kept == all ? T : __builtin_popcountll(kept);
  }
};

// The residual of one (layer, KV head): n tokens, oldest first. fp16 rows
// ([n][D] at k / v) or, with a quantized residual format, rows of row_bytes
// (codes, then metadata) at k_rows / v_rows (k / v are then null).
struct ResidualView {
  int n = 0;
  const int32_t* positions = nullptr;  // [n]
  const f16_t* k = nullptr;            // [n][D], fp16 residual only
  const f16_t* v = nullptr;            // [n][D], fp16 residual only
  quant::Format format;                // F16 or the store's residual format
  size_t row_bytes = 0;                // one row (one token, K or V)
  const uint8_t* k_rows = nullptr;     // [n][row_bytes]
  const uint8_t* v_rows = nullptr;

  bool quantized() const { return format.kind != quant::Kind::kF16; }
  // Reconstruction of row i of K (is_k) or V: out[0..D).
  void Row(int i, bool is_k, int D, float* out) const;
};

class KvStore {
 public:
  // Checks the configuration (positive sizes, 1 <= chunk <= 64).
  static Result<std::unique_ptr<KvStore>> Create(const KvStoreConfig& config);
  // The automatic page size (config.page_bytes = 0) for G-token chunks of D.
  static size_t AutoPageBytes(int chunk, int head_dim);
  ~KvStore();

  const KvStoreConfig& config() const { return cfg_; }
  int n_layers() const { return cfg_.n_layers; }
  int n_kv_heads() const { return cfg_.n_kv_heads; }
  int head_dim() const { return cfg_.head_dim; }
  int chunk() const { return cfg_.chunk; }
  // f16_t elements of one residual row (D for fp16, row bytes / 2 else).
  size_t ResidualRowUnits() const { return res_units_; }

  // Forget everything (keeps the configuration); frees all storage.
  void Reset();

  // ---- mutations -------------------------------------------------------
  // Appends n tokens to the residual of every KV head of `layer`.
  // k, v: [n][n_kv_heads][D] fp32 (K RoPE-rotated); pos: [n], strictly
  // increasing and greater than every position appended to this layer.
  Status Append(int layer, const float* k, const float* v, const int32_t* pos, int n);

  // Moves the n oldest residual tokens of (layer, head) into ceil(n / G) new
  // chunks (all of G tokens except possibly the last), K quantized with kf
  // and V with vf. 0 <= n <= ResidualSize; head may be kAllHeads (then n must
  // be <= every head's residual). Formats are checked with quant::Validate
  // for each chunk's T × D. The blocks of a multi-chunk seal are placed word
  // by word (every K codes block, then K metadata, V codes, V metadata), so
  // each plane of the stream lies in consecutive pool units. Out of memory:
  // an error, and nothing of that head is sealed.
  Status Seal(int layer, int head, int n, const quant::Format& kf, const quant::Format& vf);

  // Re-quantizes live chunk c to (kf, vf) from its current reconstruction.
  // K and V are converted independently, only when their format changes.
  // Any change is allowed (policies enforce downgrade-only themselves).
  // head may be kAllHeads (chunk index c in every head). Tombstones: error.
  Status SetChunkFormat(int layer, int head, int c, const quant::Format& kf,
                        const quant::Format& vf);

  // Evicts every kept token of chunk c (K and V). head may be kAllHeads.
  // Evicting a tombstone is a no-op.
  Status EvictChunk(int layer, int head, int c);

  // Evicts the tokens with the given original positions (chunks or residual)
  // from (layer, head); head may be kAllHeads. Every position must be kept in
  // every addressed head, else nothing changes and an error names the first
  // missing one. Duplicates are an error too.
  Status EvictTokens(int layer, int head, const int32_t* positions, int n);

  // Drops tombstones and repacks partially evicted raw (f16/f32) chunks; see
  // the file comment. head may be kAllHeads. Invalidates chunk indices.
  // Returns the layer's cached empty pages to the system (the end of a
  // compression event).
  Status Compact(int layer, int head);
  // Moves every block of the layer to fresh pages, largest first, whatever
  // the slack (Compact does so only past a threshold): the pool's slack drops
  // to the unused part of its last page. For a policy holding a byte budget,
  // whose downgrades free blocks but no page. Invalidates nothing.
  void RepackLayer(int layer);

  // ---- reads -------------------------------------------------------------
  int NumChunks(int layer, int head) const;           // tombstones included
  ChunkView Chunk(int layer, int head, int c) const;  // 0 <= c < NumChunks
  ResidualView Residual(int layer, int head) const;
  // The layer's format table: every format a chunk of the layer has used,
  // indexed by ChunkView::k_fmt / v_fmt (entries are only appended).
  int NumFormats(int layer) const;
  const quant::Format& LayerFormat(int layer, int i) const;  // 0 <= i < NumFormats
  int ResidualSize(int layer, int head) const { return Residual(layer, head).n; }
  int64_t KeptTokens(int layer, int head) const;  // chunks + residual
  int64_t AppendedTokens(int layer) const;        // every token ever appended
  // Positions of the kept tokens in walk order (ascending). out is resized.
  void KeptPositions(int layer, int head, std::vector<int32_t>* out) const;
  // Reconstruction of chunk c: k, v: [T][D] fp32 (evicted slots included, as
  // stored). Tombstones: error.
  Status DequantizeChunk(int layer, int head, int c, float* k, float* v) const;
  // Reconstruction of every kept token in walk order: k, v: [KeptTokens][D].
  void DequantizeKept(int layer, int head, float* k, float* v) const;

  // ---- accounting ----------------------------------------------------------
  // Per-layer and total bytes (see the file comment), kept / original element
  // counts, and tier histograms: k_tiers / v_tiers count kept (head, token)
  // cells by quant::FormatName of their format, "residual" for residual
  // tokens, and "evicted" for appended tokens no longer kept.
  KvStats Stats() const;
  // Pool slack of one layer (already inside its bookkeeping).
  int64_t PoolSlackBytes(int layer) const;
  // Bytes the layer really holds, counted by instrumenting every allocation
  // (pages, arrays) independently of Stats(); equals Stats().layers[l].bytes.total().
  int64_t LayerHeldBytes(int layer) const;
  const PagePool& Pool(int layer) const;

  // ---- state (kv_store_state.cc) ---------------------------------------------
  // The store as held: its configuration, then per layer the page pool
  // (PagePool::SaveState), the format table, every stream's chunk records
  // and fp16 residual, and the counts; every array with its capacity.
  void SaveState(StateWriter& w) const;
  // A store of `config` from what SaveState wrote (the configuration must be
  // the same). Every block reference, format, count and position order is
  // checked: a bad input is an error naming the layer, never a crash. The
  // loaded store holds the same bytes (LayerHeldBytes, Stats) and continues
  // bit-identically (same page placement of later blocks).
  static Result<std::unique_ptr<KvStore>> LoadState(const KvStoreConfig& config, StateReader& r);

 private:
  struct Layer;
  struct Stream;
  struct ChunkRec;
  explicit KvStore(const KvStoreConfig& cfg);
  Status CheckLayerHead(int layer, int head, const char* op) const;
  Status SealOne(Layer& L, Stream& s, int n, const quant::Format& kf, const quant::Format& vf);
  Status ConvertOne(Layer& L, const Stream& s, ChunkRec& c, bool is_k, const quant::Format& f);
  void EvictWholeChunk(Layer& L, Stream& s, ChunkRec& c);
  bool AllocChunk(Layer& L, const quant::Format& kf, const quant::Format& vf, ChunkRec* c,
                  uint64_t kept, ChunkExtra* extra);
  void FreeChunk(Layer& L, Stream& s, ChunkRec* c);
  Status CompactOne(Layer& L, Stream& s);
  void RepackSpan(Layer& L, Stream& s, const std::vector<size_t>& span,
                  CountedVector<ChunkRec>& out);
  void ShrinkResidual(Stream& s) const;
  ResidualView ViewResidual(const Stream& s) const;
  // Moves every live block of the layer to fresh, tightly filled pages.
  void RepackPool(Layer& L);
  ChunkView View(const Layer& L, const Stream& s, const ChunkRec& c) const;
  Status LoadLayer(int l, StateReader& r);

  KvStoreConfig cfg_;
  size_t res_units_ = 0;  // ResidualRowUnits
  std::vector<std::unique_ptr<Layer>> layers_;
};

// True when a and b describe the same representation.
bool SameFormat(const quant::Format& a, const quant::Format& b);

}  // namespace hqekv::cache
