#include "policy/hqekv_menu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "core/xoshiro.h"

namespace hqekv::policy {

std::vector<KvChoice> KvFrontier(const std::vector<StreamChoice>& k,
                                 const std::vector<StreamChoice>& v, double wk, double wv) {
  std::vector<KvChoice> all;
  all.reserve(k.size() * v.size());
  for (size_t i = 0; i < k.size(); ++i) {
    for (size_t j = 0; j < v.size(); ++j) {
      all.push_back({static_cast<int>(i), static_cast<int>(j), k[i].bytes + v[j].bytes,
                     wk * k[i].error + wv * v[j].error});
    }
  }
  // Cheapest first; among equal bytes the least damage, then the first K, V.
  std::sort(all.begin(), all.end(), [](const KvChoice& a, const KvChoice& b) {
    return std::tie(a.bytes, a.damage, a.k, a.v) < std::tie(b.bytes, b.damage, b.k, b.v);
  });
  // A pair joins when it has less damage than every cheaper-or-equal pair.
  std::vector<KvChoice> front;
  for (const KvChoice& c : all) {
    if (!front.empty() && c.damage >= front.back().damage) continue;
    front.push_back(c);
  }
  return front;
}

std::optional<KvChoice> BestKvChoice(const std::vector<KvChoice>& frontier, int64_t room) {
  // Damage falls strictly along the frontier: the last pair that fits.
  std::optional<KvChoice> best;
  for (const KvChoice& c : frontier) {
    if (c.bytes <= room) best = c;
  }
  return best;
}

double MeasureStreamError(const quant::Format& f, int T, int D, bool k_like) {
  // Four chunks of a fixed seed: enough to order formats whose errors differ
  // by 1.5x or more (the menu's neighbours differ by 2-4x per bit).
  constexpr int kChunks = 4;
  Xoshiro256 rng(0x6b76u + (k_like ? 1 : 0));
  std::vector<float> x(static_cast<size_t>(T) * D), y(x.size());
  std::vector<uint8_t> codes(quant::CodeBytes(f, T, D)), meta(quant::MetaBytes(f, T, D));
  double err = 0, energy = 0;
  for (int c = 0; c < kChunks; ++c) {
    if (k_like) {
      // Per channel: scale exp(N(0, 1)) (a few channels 10-30x the median),
      // offset ~ its scale (rotary K keeps a per-channel bias).
      std::vector<double> scale(D), offset(D);
      for (int d = 0; d < D; ++d) {
        scale[d] = std::exp(rng.Normal());
        offset[d] = scale[d] * rng.Normal();
      }
      for (int t = 0; t < T; ++t) {
        for (int d = 0; d < D; ++d)
          x[static_cast<size_t>(t) * D + d] =
              static_cast<float>(offset[d] + scale[d] * rng.Normal());
      }
    } else {
      // Per token: scale exp(N(0, 0.5)), no channel structure.
      for (int t = 0; t < T; ++t) {
        const double s = std::exp(0.5 * rng.Normal());
        for (int d = 0; d < D; ++d)
          x[static_cast<size_t>(t) * D + d] = static_cast<float>(s * rng.Normal());
      }
    }
    quant::QuantizeChunk(f, x.data(), T, D, codes.data(), meta.data());
    quant::DequantizeChunk(f, codes.data(), meta.data(), T, D, y.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = static_cast<double>(y[i]) - x[i];
      err += e * e;
      energy += static_cast<double>(x[i]) * x[i];
    }
  }
  return energy > 0 ? err / energy : 0.0;
}

std::vector<quant::Format> MenuFormats(int T, int D, quant::Grouping grouping, int group,
                                       bool hadamard) {
  using quant::Kind;
  // fp16 on top: without it the menu stops at 8-bit K and V (9.1 true bits on
  // refmodel-4l at ctx 2048) and every budget above holds the same cache.
  // fp16 is never rotated (a rotation cannot lower its error).
  std::vector<quant::Format> menu = {quant::F16(),
                                     quant::Uniform(8, grouping, group),
                                     quant::GgmlBlock(Kind::kQ8_0),
                                     quant::Int8PerToken(),
                                     quant::GgmlBlock(Kind::kQ5_1),
                                     quant::GgmlBlock(Kind::kQ5_0),
                                     quant::GgmlBlock(Kind::kQ4_1),
                                     quant::GgmlBlock(Kind::kQ4_0),
                                     quant::Uniform(4, grouping, group),
                                     quant::Uniform3(grouping, group),
                                     quant::Uniform(2, grouping, group)};
  std::vector<quant::Format> out;
  for (quant::Format f : menu) {
    f.hadamard = hadamard && f.kind != Kind::kF16;
    if (quant::Validate(f, T, D).ok()) out.push_back(f);
  }
  return out;
}

std::array<int, 3> PickSlots(const std::vector<double>& bits, double budget) {
  const int n = static_cast<int>(bits.size());
  // The first pair whose full-context cost reaches B less kSlotMargin: a
  // pair just under B is counted as reaching it, since the cache then sits
  // at its very edge and every decode event would have to evict a chunk
  // (no quantized slot below the bulk) to pay for the residual and window
  // growth between events (refmodel-4l, hqekv:bits=5.54: q5_0/q4_0 at 5.537
  // est. bits was the lowest slot, and each event evicted a 32-token chunk;
  // KL 7.8e-3, with a slot below it 4.7e-3).
  int i = 0;
  while (i < n - 1 && bits[i] < budget - kSlotMargin) ++i;
  // One pair more on top: the full-context costs are upper bounds (an open
  // window, the residual's worst point), and a layer at an event often holds
  // less, so B can lie above bits[i] there (measured: hqekv:bits=7.55 on
  // refmodel-4l held 7.33 with every chunk in the pair that reached 7.55).
  // The solver still mixes the two slots around B, whichever they are.
  i = std::min(i + 1, n - 1);
  // At least two pairs below the top slot when the frontier has them.
  i = std::max(i, std::min(2, n - 1));
  return {i, std::max(0, i - 1), std::max(0, i - 2)};
}

std::array<int, 3> PickSlots(const std::vector<double>& bits, double budget, double lo, double hi) {
  const int n = static_cast<int>(bits.size());
  const std::array<int, 3> at_lo = PickSlots(bits, std::min(lo, budget));
  const std::array<int, 3> at_b = PickSlots(bits, budget);
  const std::array<int, 3> at_hi = PickSlots(bits, std::max(hi, budget));
  const int bottom = std::min(at_lo[2], at_b[2]);
  const int top = std::min(n - 1, std::max(at_hi[0], bottom + 2));
  // Fewer than three pairs: the middle repeats the lowest, as PickSlots does.
  const int mid = top - bottom >= 2 ? std::clamp(at_b[1], bottom + 1, top - 1) : bottom;
  return {top, mid, bottom};
}

}  // namespace hqekv::policy
