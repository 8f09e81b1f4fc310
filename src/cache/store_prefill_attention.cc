#include "cache/store_prefill_attention.h"

#include <algorithm>
#include <vector>

#include "cache/prefill_attention.h"
#include "core/parallel.h"
#include "attn/flash_attention.h"

namespace hqekv::cache {
namespace {

// Upper bound on the fp32 K + V rows decoded at once (bytes): heads are
// processed in batches below it (at least one head per batch).
constexpr int64_t kMaxDecodedBytes = int64_t{64} << 20;
// Tokens per tile handed to the kernel (any size works: the rows are contiguous).
constexpr int kTileTokens = 32;

// One KV head decoded: kept tokens in walk order, fp32 [tokens][D] each.
struct DecodedHead {
  std::vector<float> k, v;
  std::vector<int32_t> positions;
  std::vector<const void*> k_tiles, v_tiles;
};

void Decode(const KvStore& store, int layer, int g, DecodedHead* d) {
  const int D = store.head_dim();
  store.KeptPositions(layer, g, &d->positions);
  const size_t tokens = d->positions.size();
  // At least one row, so every tile pointer is valid even for an empty head
  // (the kernel then reads nothing: every visible count is 0).
  d->k.resize(std::max<size_t>(tokens, 1) * D);
  d->v.resize(d->k.size());
  store.DequantizeKept(layer, g, d->k.data(), d->v.data());
  const size_t tiles = std::max<size_t>((tokens + kTileTokens - 1) / kTileTokens, 1);
  d->k_tiles.resize(tiles);
  d->v_tiles.resize(tiles);
  for (size_t t = 0; t < tiles; ++t) {
    d->k_tiles[t] = d->k.data() + t * kTileTokens * D;
    d->v_tiles[t] = d->v.data() + t * kTileTokens * D;
  }
}

// The attention geometry of `store` read by n_q_heads query heads.
KvGeometry GeometryOf(const KvStore& store, int n_q_heads) {
  KvGeometry g;
  g.n_layers = store.n_layers();
  g.n_q_heads = n_q_heads;
  g.n_kv_heads = store.n_kv_heads();
  g.head_dim = store.head_dim();
  return g;
}

}  // namespace

int StorePrefillQueries(const KvStore& store, int n_q_heads, int n, const AttentionSink* sink,
                        const StoreAttentionOptions& options) {
  if (!options.tiled_prefill || options.softcap > 0) return 0;
  const int tiled = (sink && *sink) ? std::clamp(options.first_sink_query, 0, n) : n;
  return UsePrefillAttention(GeometryOf(store, n_q_heads), tiled) ? tiled : 0;
}

void StorePrefillAttention(const KvStore& store, int layer, int n_q_heads, const float* q,
                           const int32_t* q_pos, int n, float* out,
                           const AttentionColumnSink* columns, int first_summed) {
  const int H = store.n_kv_heads(), D = store.head_dim();
  const KvGeometry geo = GeometryOf(store, n_q_heads);
  int64_t max_tokens = 1;
  for (int g = 0; g < H; ++g) max_tokens = std::max(max_tokens, store.KeptTokens(layer, g));
  const int64_t head_bytes = 2 * max_tokens * D * static_cast<int64_t>(sizeof(float));
  const int batch = static_cast<int>(std::clamp<int64_t>(kMaxDecodedBytes / head_bytes, 1, H));
  std::vector<DecodedHead> heads(batch);
  std::vector<attn::KvTiles> kv;
  std::vector<const int32_t*> positions;
  const bool summing = columns && *columns;
  std::vector<std::vector<float>> sums(summing ? batch : 0);
  HeadColumnSums cols;
  cols.first_query = std::clamp(first_summed, 0, n);
  for (int h0 = 0; h0 < H; h0 += batch) {
    const int nh = std::min(batch, H - h0);
    auto decode = [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) Decode(store, layer, h0 + static_cast<int>(i), &heads[i]);
    };
    if (nh > 1 && static_cast<int64_t>(nh) * head_bytes >= (int64_t{1} << 18)) {
      ParallelFor(nh, decode);
    } else {
      decode(0, nh);
    }
    kv.assign(nh, {});
    positions.assign(nh, nullptr);
    for (int i = 0; i < nh; ++i) {
      const DecodedHead& d = heads[i];
      kv[i].type = attn::KvRowType::kF32;
      kv[i].D = D;
      kv[i].tile_tokens = kTileTokens;
      kv[i].tokens = static_cast<int64_t>(d.positions.size());
      kv[i].k = d.k_tiles.data();
      kv[i].v = d.v_tiles.data();
      positions[i] = d.positions.data();
    }
    if (!summing) {
      PrefillAttentionHeads(geo, h0, kv, positions, q, q_pos, n, out);
      continue;
    }
    cols.sums.assign(nh, nullptr);
    for (int i = 0; i < nh; ++i) {
      sums[i].assign(std::max<size_t>(heads[i].positions.size(), 1), 0.0f);
      cols.sums[i] = sums[i].data();
    }
    PrefillAttentionHeads(geo, h0, kv, positions, q, q_pos, n, out, &cols);
    for (int i = 0; i < nh; ++i) {
      AttentionColumns c;
      c.kv_head = h0 + i;
      c.n_kept = static_cast<int>(heads[i].positions.size());
      c.queries = n - cols.first_query;
      c.sums = sums[i].data();
      c.positions = heads[i].positions.data();
      (*columns)(c);
    }
  }
}

}  // namespace hqekv::cache
