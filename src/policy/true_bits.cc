#include "policy/true_bits.h"

#include <algorithm>
#include <cstdio>

namespace hqekv::policy {
namespace {

constexpr int64_t kChunkRecordBytes = 24;  // KvStore::ChunkRec (kv_store_records.h)
constexpr int64_t kPageEntryBytes = 24;    // PagePool::Page
constexpr int64_t kHeaderBytes = 1024;     // Layer object, format table, stream headers

int64_t RoundUp(int64_t x, int64_t u) { return (x + u - 1) / u * u; }

}  // namespace

int64_t StreamPlaneBytes(const LayerLayout& l, const quant::Format& f) {
  const int64_t u = static_cast<int64_t>(l.unit_bytes);
  int64_t b = RoundUp(static_cast<int64_t>(quant::CodeBytes(f, l.chunk, l.head_dim)), u);
  const int64_t meta = static_cast<int64_t>(quant::MetaBytes(f, l.chunk, l.head_dim));
  if (meta > 3) b += RoundUp(meta, u);  // <= 3 bytes: inline in the chunk record
  return b * l.n_kv_heads;
}

int64_t ChunkPlaneBytes(const LayerLayout& l, const quant::Format& kf, const quant::Format& vf) {
  return StreamPlaneBytes(l, kf) + StreamPlaneBytes(l, vf);
}

int64_t StoreOverheadBytes(const LayerLayout& l, int64_t live_chunks, int64_t residual_capacity,
                           int64_t plane_bytes) {
  const int64_t H = l.n_kv_heads, D = l.head_dim;
  const int64_t records = H * (kChunkRecordBytes * (live_chunks + live_chunks / 8 + 4));
  const int64_t row = l.residual_row_bytes > 0 ? l.residual_row_bytes : 2 * D;
  const int64_t residual = H * residual_capacity * (2 * row + 4);
  const int64_t page = static_cast<int64_t>(l.page_bytes);
  const int64_t pages = plane_bytes / page + 2;
  const int64_t table = kPageEntryBytes * (pages + pages / 4 + 16);
  return records + residual + page + table + kHeaderBytes;
}

int64_t LiveChunkRecordBytes(const LayerLayout& l) {
  return l.n_kv_heads * kChunkRecordBytes * 9 / 8;
}

double LayerBits(const LayerLayout& l, int64_t bytes, int64_t n) {
  if (n <= 0) return 0;
  return 8.0 * static_cast<double>(bytes) /
         (static_cast<double>(n) * l.n_kv_heads * l.head_dim * 2);
}

int64_t HqekvCostModel::LayerBytes(int64_t n, int64_t nb,
                                   const std::array<int64_t, kNumTiers>& counts) const {
  const int64_t G = layout.chunk;
  int64_t planes = 0, live = 0;
  for (int t = 0; t < kNumTiers; ++t) {
    planes += counts[t] * tier_bytes[t];
    if (t != static_cast<int>(Tier::kEvicted)) live += counts[t];
  }
  const int64_t r = std::max<int64_t>(0, n - nb * G);
  // Per unit: Range(V) 1 byte per compressed kept token + 2 per chunk, K and
  // V tiers 2 bytes per chunk, fp16 window sums over every kept token
  // (room for a chunk more), query positions.
  const int64_t kept = live * G + r;
  const int64_t state = units * (live * G + 4 * live + 2 * (kept + G) + 8 * 64);
  // The residual keeps room for the reserve after the event's seal, or
  // (exact) is counted at its peak.
  const int64_t res =
      layout.residual_exact ? std::max<int64_t>(r, G - 1) : r + layout.residual_reserve;
  return planes + StoreOverheadBytes(layout, live, res, planes) + state;
}

std::array<double, 4> HqekvCostModel::TierBits(int64_t n) const {
  const int64_t nb = n / layout.chunk;
  std::array<double, 4> b{};
  const Tier tiers[4] = {Tier::kHigh, Tier::kMid, Tier::kLow, Tier::kEvicted};
  for (int i = 0; i < 4; ++i) {
    std::array<int64_t, kNumTiers> c{};
    c[0] = std::min<int64_t>(pinned, nb);
    c[static_cast<int>(tiers[i])] += nb - c[0];
    b[i] = LayerBits(layout, LayerBytes(n, nb, c), n);
  }
  return b;
}

BudgetRatios SolveBudgetRatios(const HqekvCostModel& m, double budget, int64_t n) {
  BudgetRatios out;
  const std::array<double, 4> b = m.TierBits(n);  // u4, u2, n1, evicted
  const int64_t compressible = n / m.layout.chunk - std::min<int64_t>(m.pinned, n / m.layout.chunk);
  if (budget >= b[0]) {
    out.ratios = {1, 0, 0, 0};
    out.above = budget > b[0];
    return out;
  }
  if (budget < b[3] || compressible <= 0) {
    out.ratios = {0, 0, 0, 1};
    out.below = budget < b[3];
    return out;
  }
  // The segment [b[i+1], b[i]] that holds the budget; x = share of the better tier.
  int i = 0;
  while (i < 2 && budget < b[i + 1]) ++i;
  const double step = b[i] - b[i + 1];
  const double margin = step / static_cast<double>(compressible);  // one chunk's rounding
  const double x = std::clamp((budget - margin - b[i + 1]) / step, 0.0, 1.0);
  double r[4] = {0, 0, 0, 0};
  r[i] = x;
  r[i + 1] = 1.0 - x;
  out.ratios = {r[0], r[1], r[2], r[3]};
  return out;
}

BudgetCounts SolveBudgetCounts(int64_t nb, int pinned,
                               const std::array<int64_t, kNumTiers>& chunk_bytes, int64_t room,
                               TierMask usable) {
  BudgetCounts out;
  if (nb <= 0) return out;
  const int64_t p = std::min<int64_t>(std::max(pinned, 0), nb);
  const int64_t rest = nb - p;
  out.counts[0] = p;
  room -= p * chunk_bytes[0];
  constexpr int kHigh = static_cast<int>(Tier::kHigh), kEv = static_cast<int>(Tier::kEvicted);
  auto next_usable = [&](int t) {
    while (t < kEv && !TierUsable(usable, t)) ++t;
    return t;
  };
  // Usable tiers from u4 to evicted: the first t whose all-t cost fits is
  // the worse end of the segment [previous usable tier, t].
  const int first = next_usable(kHigh);
  int prev = -1, t = first;
  while (t <= kEv && rest * chunk_bytes[t] > room) {
    prev = t;
    t = t == kEv ? kEv + 1 : next_usable(t + 1);
  }
  if (t > kEv) {
    out.counts[kEv] = rest;
    out.below = true;
    return out;
  }
  if (t == first) {
    out.counts[t] = rest;
    const int w = t == kEv ? kEv : next_usable(t + 1);
    out.above =
        rest > 0 && t != kEv && room - rest * chunk_bytes[t] >= chunk_bytes[t] - chunk_bytes[w];
    return out;
  }
  // k chunks in prev, rest - k in t: rest * b[t] + k * (b[prev] - b[t]) <= room.
  const int64_t step = chunk_bytes[prev] - chunk_bytes[t];
  const int64_t k = step > 0 ? std::min(rest, (room - rest * chunk_bytes[t]) / step) : rest;
  out.counts[prev] = k;
  out.counts[t] = rest - k;
  return out;
}

std::string AchievableRange(double lo, double hi, int64_t n) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "[%.3f, %.3f] true bits per element at %lld tokens", lo, hi,
                static_cast<long long>(n));
  return buf;
}

}  // namespace hqekv::policy
