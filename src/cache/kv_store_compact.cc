// KvStore compaction (cache/kv_store.h): dropping evicted slots from a
// stream's chunks, re-sealing the survivors in their own formats, and
// repacking a layer's page pool. The rest of the store: cache/kv_store.cc.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cache/kv_store.h"
#include "cache/kv_store_records.h"

namespace hqekv::cache {

using quant::Format;

// ---- compaction ------------------------------------------------------------------

Status KvStore::Compact(int layer, int head) {
  HQEKV_RETURN_IF_ERROR(CheckLayerHead(layer, head, "Compact"));
  Layer& L = *layers_[layer];
  const int h0 = head == kAllHeads ? 0 : head;
  const int h1 = head == kAllHeads ? cfg_.n_kv_heads : head + 1;
  for (int h = h0; h < h1; ++h) HQEKV_RETURN_IF_ERROR(CompactOne(L, L.streams[h]));
  // The end of a compression event: pages cached for reuse during it (fp16
  // chunks re-quantized to smaller formats) go back to the system.
  L.pool.ReleaseCached();
  // Format changes free blocks of one size and allocate smaller ones: the
  // holes spread over many pages, none empties, and the slack grows with
  // every event (0.3 bit per element after 64 decode steps of HqeKV at 3.2
  // nominal bits). Past a threshold the layer's blocks move to fresh pages.
  const int64_t slack = L.pool.held_bytes() - L.pool.requested_bytes();
  if (slack > 2 * static_cast<int64_t>(L.pool.page_bytes()) &&
      slack > L.pool.requested_bytes() / 32) {
    RepackPool(L);
  }
  if (L.pool.SparseTable()) {
    std::vector<uint32_t> remap;
    L.pool.CompactTable(&remap);
    // Pages move whole: units (and a plane's metadata unit) stay.
    auto fix = [&remap](BlockRef b) { return b.valid() ? BlockRef{remap[b.page()], b.unit()} : b; };
    for (Stream& s : L.streams) {
      for (ChunkRec& c : s.chunks) {
        if (!c.live()) continue;
        for (int w = 0; w < 4; ++w) {
          size_t bytes = 0;
          if (L.WordIsBlock(c, w, cfg_.head_dim, &bytes)) c.set_ref(w, fix(c.ref(w)));
        }
      }
      for (ChunkExtra& e : s.extras) e.positions = fix(e.positions);
    }
  }
  return Status::Ok();
}

void KvStore::RepackLayer(int layer) { RepackPool(*layers_[layer]); }

void KvStore::RepackPool(Layer& L) {
  const int D = cfg_.head_dim;
  struct Move {
    ChunkRec* chunk;  // a chunk's word, or (nullptr) an extra's position list
    int word;
    ChunkExtra* extra;
    size_t bytes;
  };
  std::vector<Move> moves;
  for (Stream& s : L.streams) {
    for (int w = 0; w < 4; ++w) {
      for (ChunkRec& c : s.chunks) {
        if (!c.live()) continue;
        size_t bytes = 0;
        if (L.WordIsBlock(c, w, D, &bytes)) moves.push_back({&c, w, nullptr, bytes});
      }
    }
    for (ChunkRec& c : s.chunks) {
      if (!c.live()) continue;
      if (c.explicit_pos()) {
        ChunkExtra* e = s.FindExtra(c.pos0);
        if (e && e->positions.valid()) moves.push_back({nullptr, 0, e, c.position_bytes()});
      }
    }
  }
  // Largest first: every run stays aligned and the pages fill in order.
  // Within a size the blocks keep the order gathered above, stream by stream
  // and word by word (every K codes block of head 0, its K metadata, its V
  // codes, ...): each plane of a stream lands in consecutive units, as a
  // multi-chunk seal places it (a repacked decode-grown kivi-2 store at 32K:
  // 5.1-5.8 ms per step, 6.0-6.9 in chunk-by-chunk order; docs/performance.md
  // stream-major block placement).
  std::stable_sort(moves.begin(), moves.end(),
                   [](const Move& a, const Move& b) { return a.bytes > b.bytes; });
  PagePool fresh(L.pool.page_bytes(), cfg_.max_cached_pages, &L.counter);
  std::vector<BlockRef> to(moves.size());
  for (size_t i = 0; i < moves.size(); ++i) {
    to[i] = fresh.Allocate(moves[i].bytes);
    if (!to[i].valid()) return;  // out of memory: keep the old layout (fresh frees itself)
  }
  for (size_t i = 0; i < moves.size(); ++i) {
    const Move& m = moves[i];
    const BlockRef from = m.chunk ? m.chunk->ref(m.word) : m.extra->positions;
    std::memcpy(fresh.Data(to[i]), L.pool.Data(from), m.bytes);
    if (m.chunk) {
      m.chunk->set_ref(m.word, to[i]);
    } else {
      m.extra->positions = to[i];
    }
  }
  L.pool.Swap(fresh);  // the old pages go with `fresh`
}

// Moves the kept rows of the live lossless chunks span[0..] (same formats,
// consecutive) into fresh chunks of G tokens (the last may be shorter),
// appended to out; the old chunks are freed. On allocation failure the old
// chunks are kept unchanged.
void KvStore::RepackSpan(Layer& L, Stream& s, const std::vector<size_t>& span,
                         CountedVector<ChunkRec>& out) {
  const int D = cfg_.head_dim, G = cfg_.chunk;
  const ChunkRec& first = s.chunks[span.front()];
  const Format& kf = L.Fmt(first.k_fmt());
  const Format& vf = L.Fmt(first.v_fmt());
  std::vector<float> kx, vx, krows, vrows;
  std::vector<int32_t> prow;
  for (size_t x : span) {
    const ChunkRec& d = s.chunks[x];
    const int T = d.T();
    const uint64_t kept = s.Kept(d);
    kx.resize(static_cast<size_t>(T) * D);
    vx.resize(kx.size());
    // Lossless formats: dequantize / quantize round-trips bit-exactly.
    quant::DequantizeChunk(kf, L.Codes(d, true), L.Meta(d, true, D), T, D, kx.data());
    quant::DequantizeChunk(vf, L.Codes(d, false), L.Meta(d, false, D), T, D, vx.data());
    const PositionList ps = L.Positions(s, d);
    for (int t = 0; t < T; ++t) {
      if (!((kept >> t) & 1u)) continue;
      krows.insert(krows.end(), kx.begin() + static_cast<size_t>(t) * D,
                   kx.begin() + static_cast<size_t>(t + 1) * D);
      vrows.insert(vrows.end(), vx.begin() + static_cast<size_t>(t) * D,
                   vx.begin() + static_cast<size_t>(t + 1) * D);
      prow.push_back(ps[t]);
    }
  }
  const int total = static_cast<int>(prow.size());
  std::vector<ChunkRec> fresh;
  std::vector<ChunkExtra> fresh_extra;  // added once the old chunks' entries are gone
  bool oom = false;
  for (int start = 0; start < total; start += G) {
    const int T = std::min(G, total - start);
    bool contiguous = true;
    for (int t = 1; t < T; ++t) contiguous = contiguous && prow[start + t] == prow[start] + t;
    ChunkRec n;
    n.pos0 = prow[start];
    n.set_T(T);
    n.set_fmt(true, first.k_fmt());
    n.set_fmt(false, first.v_fmt());
    n.set_explicit_pos(!contiguous);
    n.set_narrow_pos(!contiguous && NarrowSpan(&prow[start], T));
    ChunkExtra extra;
    if (!AllocChunk(L, kf, vf, &n, T == 64 ? ~uint64_t{0} : ((uint64_t{1} << T) - 1), &extra)) {
      oom = true;
      break;
    }
    // Lossless formats have no metadata: nothing is written into the record.
    quant::QuantizeChunk(kf, krows.data() + static_cast<size_t>(start) * D, T, D, L.Codes(n, true),
                         L.Meta(n, true, D));
    quant::QuantizeChunk(vf, vrows.data() + static_cast<size_t>(start) * D, T, D, L.Codes(n, false),
                         L.Meta(n, false, D));
    if (!contiguous) WritePositions(n.narrow_pos(), &prow[start], T, L.pool.Data(extra.positions));
    fresh.push_back(n);
    fresh_extra.push_back(extra);
  }
  if (oom) {  // keep the old chunks, drop the partial rebuild
    for (size_t i = 0; i < fresh.size(); ++i) {
      ChunkRec& n = fresh[i];
      L.FreePlane(&n, true, kf, D);
      L.FreePlane(&n, false, vf, D);
      if (fresh_extra[i].positions.valid())
        L.pool.Free(fresh_extra[i].positions, n.position_bytes());
    }
    for (size_t x : span) out.push_back(s.chunks[x]);
    return;
  }
  for (size_t x : span) {
    ChunkRec& d = s.chunks[x];
    s.kept_in_chunks += __builtin_popcountll(s.Kept(d));  // moved, not evicted
    EvictWholeChunk(L, s, d);
  }
  for (size_t i = 0; i < fresh.size(); ++i) {
    if (Stream::HasExtra(fresh[i])) s.AddExtra(fresh_extra[i]);
  }
  out.insert(out.end(), fresh.begin(), fresh.end());
}

// Repacking policy for one run of consecutive live lossless chunks with the
// same formats. "Ragged" chunks have holes or fewer than G slots. Normally
// only the maximal groups of adjacent ragged chunks that contain a hole are
// repacked (cost proportional to the evicted region, e.g. StreamingLLM's
// oldest chunk); when ragged chunks exceed max(4, run / 8) the whole run is
// repacked into full chunks, which bounds the number of short chunks (and of
// pool size classes) at an amortized cost of O(G·D) copies per eviction.
Status KvStore::CompactOne(Layer& L, Stream& s) {
  const int G = cfg_.chunk;
  CountedVector<ChunkRec> out(s.chunks.get_allocator());
  out.reserve(s.chunks.size());
  auto holey = [&](const ChunkRec& c) {
    const uint64_t full = c.T() == 64 ? ~uint64_t{0} : ((uint64_t{1} << c.T()) - 1);
    return s.Kept(c) != full;
  };
  auto ragged = [&](const ChunkRec& c) { return holey(c) || c.T() != G; };
  std::vector<size_t> run, span;
  size_t i = 0;
  while (i < s.chunks.size()) {
    const ChunkRec& c = s.chunks[i];
    if (!c.live()) {
      ++i;
      continue;
    }
    if (!IsLossless(L.Fmt(c.k_fmt())) || !IsLossless(L.Fmt(c.v_fmt()))) {
      out.push_back(c);
      ++i;
      continue;
    }
    // Maximal run of live lossless chunks with c's formats (tombstones skipped).
    run.clear();
    size_t j = i;
    for (; j < s.chunks.size(); ++j) {
      const ChunkRec& d = s.chunks[j];
      if (!d.live()) continue;
      if (d.k_fmt() != c.k_fmt() || d.v_fmt() != c.v_fmt()) break;
      run.push_back(j);
    }
    size_t n_ragged = 0, n_holey = 0;
    for (size_t x : run) {
      n_ragged += ragged(s.chunks[x]);
      n_holey += holey(s.chunks[x]);
    }
    if (n_holey == 0) {
      for (size_t x : run) out.push_back(s.chunks[x]);
    } else if (n_ragged > std::max<size_t>(4, run.size() / 8)) {
      RepackSpan(L, s, run, out);
    } else {
      for (size_t a = 0; a < run.size();) {
        if (!ragged(s.chunks[run[a]])) {
          out.push_back(s.chunks[run[a++]]);
          continue;
        }
        span.clear();
        bool has_hole = false;
        while (a < run.size() && ragged(s.chunks[run[a]])) {
          has_hole = has_hole || holey(s.chunks[run[a]]);
          span.push_back(run[a++]);
        }
        if (has_hole) {
          RepackSpan(L, s, span, out);
        } else {
          for (size_t x : span) out.push_back(s.chunks[x]);
        }
      }
    }
    i = j;
  }
  if (out.capacity() > out.size() + out.size() / 4 + 4) out.shrink_to_fit();
  s.chunks.swap(out);
  // The side table holds no spare entries after an event: they are rare, and
  // an eviction cache at its minimum (sinks + newest: one explicit chunk per
  // head) would otherwise hold more in spare entries than in its record.
  if (s.extras.capacity() > s.extras.size()) s.extras.shrink_to_fit();
  return Status::Ok();
}

}  // namespace hqekv::cache
