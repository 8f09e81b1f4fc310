#include "cache/kv_report.h"

#include <cinttypes>
#include <cstdio>
#include <map>

namespace hqekv {
namespace {

std::string Histogram(const std::map<std::string, int64_t>& tiers) {
  std::string s;
  for (const auto& [name, count] : tiers) {
    if (!s.empty()) s += ' ';
    s += name + "=" + std::to_string(count);
  }
  return s.empty() ? "-" : s;
}

std::string BytesLine(const KvBytes& b) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "%" PRId64 " B (payload %" PRId64 ", metadata %" PRId64 ", bookkeeping %" PRId64
                ", residual %" PRId64 ")",
                b.total(), b.payload, b.metadata, b.bookkeeping, b.residual);
  return buf;
}

}  // namespace

std::string BitsBreakdown(const KvStats& stats) {
  const double e = stats.original_elements > 0 ? static_cast<double>(stats.original_elements) : 1.0;
  auto bits = [e](int64_t b) { return 8.0 * static_cast<double>(b) / e; };
  char buf[192];
  std::snprintf(
      buf, sizeof buf, "payload %.3f + metadata %.3f + bookkeeping %.3f + residual %.3f = %.3f",
      bits(stats.bytes.payload), bits(stats.bytes.metadata), bits(stats.bytes.bookkeeping),
      bits(stats.bytes.residual), bits(stats.bytes.total()));
  return buf;
}

std::string MemorySummary(const KvStats& stats) {
  const double bits = stats.bits_per_original();
  const double mib = static_cast<double>(stats.bytes.total()) / (1024.0 * 1024.0);
  char size[32];
  if (mib >= 0.1) {
    std::snprintf(size, sizeof size, "%.1f MiB", mib);
  } else {
    std::snprintf(size, sizeof size, "%.1f KiB", static_cast<double>(stats.bytes.total()) / 1024.0);
  }
  // An uncompressed cache is the reference itself: its page rounding and
  // positions make it a little over 16 (32) bits per element, which is not
  // "larger than fp16".
  bool uncompressed = stats.kept_elements > 0;
  for (const KvLayerStats& l : stats.layers) {
    for (const auto* tiers : {&l.k_tiers, &l.v_tiers}) {
      for (const auto& [tier, cells] : *tiers) {
        if (cells > 0 && tier != "fp16" && tier != "fp32") uncompressed = false;
      }
    }
  }
  char buf[160];
  if (bits <= 0) {
    std::snprintf(buf, sizeof buf, "KV %s", size);
  } else if (uncompressed) {
    std::snprintf(buf, sizeof buf, "KV %s, uncompressed, %.2f bits/element", size, bits);
  } else if (bits <= 16.0) {
    std::snprintf(buf, sizeof buf, "KV %s, %.1fx smaller than fp16, %.2f bits/element", size,
                  16.0 / bits, bits);
  } else {
    std::snprintf(buf, sizeof buf, "KV %s, %.1fx the bytes of fp16, %.2f bits/element", size,
                  bits / 16.0, bits);
  }
  return buf;
}

std::string FormatKvReport(const KvStats& stats) {
  std::string out = "KV report (cells = KV head x token)\n";
  for (size_t l = 0; l < stats.layers.size(); ++l) {
    const KvLayerStats& ls = stats.layers[l];
    out += "  layer " + std::to_string(l) + ": kept " + std::to_string(ls.kept_tokens) + " | K " +
           Histogram(ls.k_tiers) + " | V " + Histogram(ls.v_tiers) + " | " + BytesLine(ls.bytes) +
           "\n";
  }
  char buf[128];
  std::snprintf(buf, sizeof buf, " | %.3f true bits/element, %.3f bits/original element\n",
                stats.true_bits(), stats.bits_per_original());
  out += "  total: " + BytesLine(stats.bytes) + buf;
  out += "  bits/original element: " + BitsBreakdown(stats) + "\n";
  return out;
}

}  // namespace hqekv
