#include "policy/quant_cache.h"

#include <algorithm>
#include <bit>
#include <cstdio>

#include "policy/true_bits.h"

namespace hqekv::policy {

namespace {

// Planes of one chunk (every KV head) as the page pool places them: a block
// of c units is aligned to the largest power of two <= c, so blocks of one
// size that is not a power of two (q5_0's 6-unit metadata at D = 64) leave
// the alignment gap between them; ChunkPlaneBytes without that gap for the
// power-of-two blocks of every other format.
int64_t PlacedPlaneBytes(const LayerLayout& l, const quant::Format& kf, const quant::Format& vf) {
  const int64_t u = static_cast<int64_t>(l.unit_bytes);
  int64_t b = 0;
  for (const quant::Format* f : {&kf, &vf}) {
    for (size_t bytes :
         {quant::CodeBytes(*f, l.chunk, l.head_dim), quant::MetaBytes(*f, l.chunk, l.head_dim)}) {
      if (bytes <= 3) continue;  // inline in the chunk record (metadata <= 3 bytes) or nothing
      const int64_t c = (static_cast<int64_t>(bytes) + u - 1) / u;
      int64_t a = 1;
      while (2 * a <= c) a *= 2;
      b += (c + a - 1) / a * a * u;
    }
  }
  return b * l.n_kv_heads;
}

}  // namespace

int64_t QuantLayerBytes(const KvGeometry& g, const quant::Format& kf, const quant::Format& vf,
                        int residual, int64_t n, bool exact_residual) {
  LayerLayout l;
  l.n_kv_heads = g.n_kv_heads;
  l.head_dim = g.head_dim;
  l.page_bytes = cache::KvStore::AutoPageBytes(32, g.head_dim);
  l.unit_bytes = cache::PagePool::UnitFor(l.page_bytes);
  const int64_t waiting = std::min<int64_t>(n, residual - 1);
  const int64_t chunks = (n - waiting) / 32;
  const int64_t planes = chunks * PlacedPlaneBytes(l, kf, vf);
  // Capacity: the reserve (32) after a seal, growing to R - 1 tokens (exact:
  // the waiting tokens, at most R - 1).
  return planes + StoreOverheadBytes(
                      l, chunks, exact_residual ? waiting : std::max<int64_t>(waiting, 32), planes);
}

namespace {

// Bytes of one KIVI layer after n tokens at code width `bits`.
int64_t KiviLayerBytes(const KvGeometry& g, int bits, int group, int residual, int64_t n) {
  return QuantLayerBytes(g, quant::Uniform(bits, quant::Grouping::kPerChannel),
                         quant::Uniform(bits, quant::Grouping::kPerToken, group), residual, n,
                         /*exact_residual=*/true);
}

}  // namespace

Result<int> KiviBitsForBudget(const PolicySpec& spec, const KvGeometry& g, int group,
                              int residual) {
  const double budget = spec.Num("bits");
  const int64_t n = g.max_ctx;
  const double b4 =
      LayerBits(LayerLayout{g.n_kv_heads, g.head_dim}, KiviLayerBytes(g, 4, group, residual, n), n);
  const double b2 =
      LayerBits(LayerLayout{g.n_kv_heads, g.head_dim}, KiviLayerBytes(g, 2, group, residual, n), n);
  if (budget >= b4) return 4;
  if (budget >= b2) return 2;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "budget %s true bits per element is below KIVI's cheapest layout: at %lld tokens "
                "(residual %d) 2-bit codes hold %.3f and 4-bit codes %.3f true bits per element; "
                "give bits >= %.3f, a shorter residual=, or nominal_bits=2|4",
                spec.Text("bits").c_str(), static_cast<long long>(n), residual, b2, b4, b2);
  return MakeError("KV policy '" + spec.Canonical() + "': " + buf);
}

QuantCache::QuantCache(const KvGeometry& g, std::string describe, quant::Format kf,
                       quant::Format vf, int residual_len, bool exact_residual)
    : StoreBackedCache(g, std::move(describe), 2, false,
                       [&] {
                         // bits=B: the residual at its exact size (a 32-token fp16 reserve is
                         // 2.5 bits per element after a 200-token prompt at head_dim 64).
                         StoreTuning t;
                         if (exact_residual) t.residual_reserve = 0;
                         return t;
                       }()),
      kf_(kf),
      vf_(vf),
      residual_len_(residual_len) {}

Result<std::unique_ptr<KvCache>> QuantCache::Make(const KvGeometry& g, std::string describe,
                                                  const quant::Format& kf, const quant::Format& vf,
                                                  int residual_len, double budget_bits) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  HQEKV_RETURN_IF_ERROR(quant::Validate(kf, 32, g.head_dim));
  HQEKV_RETURN_IF_ERROR(quant::Validate(vf, 32, g.head_dim));
  std::unique_ptr<QuantCache> c(
      new QuantCache(g, std::move(describe), kf, vf, residual_len, budget_bits > 0));
  HQEKV_RETURN_IF_ERROR(c->init_status());
  c->budget_bits_ = budget_bits;
  return std::unique_ptr<KvCache>(std::move(c));
}

Result<std::unique_ptr<KvCache>> QuantCache::Create(const PolicySpec& spec, const KvGeometry& g,
                                                    const CacheContext&) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  const int D = g.head_dim;
  quant::Format kf, vf;
  int residual = 32;
  double budget = 0;
  if (spec.name == "fp8") {
    kf = vf = spec.Text("format") == "e5m2" ? quant::Fp8E5M2() : quant::Fp8E4M3();
  } else if (spec.name == "int8") {
    kf = vf = quant::Int8PerToken();
  } else if (spec.name == "kivi") {
    int bits = spec.Int("nominal_bits");
    // V groups of `group` channels, clamped to head_dim (the bundled model has
    // D = 8, smaller than KIVI's 32).
    const int group = std::min(spec.Int("group"), D);
    if (D % group != 0) {
      return MakeError("KV policy '" + spec.Canonical() + "': group " + std::to_string(group) +
                       " does not divide head_dim " + std::to_string(D));
    }
    residual = spec.Int("residual");
    if (residual <= 0 || residual % 32 != 0) {
      return MakeError("KV policy '" + spec.Canonical() + "': residual " +
                       std::to_string(residual) + " must be a positive multiple of 32 (the chunk)");
    }
    if (spec.Given("bits")) {
      // True bits: the widest code whose cache fits B at the full context.
      HQEKV_ASSIGN_OR_RETURN(bits, KiviBitsForBudget(spec, g, group, residual));
      budget = spec.Num("bits");
    }
    kf = quant::Uniform(bits, quant::Grouping::kPerChannel);
    vf = quant::Uniform(bits, quant::Grouping::kPerToken, group);
  } else {
    return MakeError("QuantCache: not a quantization policy: '" + spec.name + "'");
  }
  return Make(g, spec.Canonical(), kf, vf, residual, budget);
}

bool QuantCache::RepackDue(int before, int after, int stagger) {
  // Decode-time seals (a chunk per KV head every residual_len tokens) place
  // the heads of a layer in turn: one head's chunks then lie 8 heads' blocks
  // apart: a decode-grown int8 cache of 31744 tokens took 15.1-18.3 ms per
  // step, 6.1-7.6 with the repacks below (RepackLayer: every plane of a
  // stream in consecutive units; docs/history/performance-log.md, "stream-major
  // block placement"). The layer is repacked whenever the chunks per head cross a
  // multiple of max(16, bit_floor(chunks) / 8): at most 1/8 of a long cache
  // (or 16 chunks) is in decode order, and the copy of the layer comes every
  // >= 512 tokens (every 2048 at 32K: ~0.1% of the bytes the steps read in
  // between). The repack holds a second copy of the layer's blocks while it
  // runs. The rule reads only the chunk counts, so a loaded cache repacks
  // where the saved one would have. A prefill (before = 0) is in order.
  // `stagger` (0..15 chunks, the layer index mod 16) moves each layer's
  // crossings, so that the layers do not all repack in the same step (one
  // 64 MiB int8 layer at 32K is ~10-20 ms of copying; 32 layers at once
  // would stall that step for a large fraction of a second).
  if (before <= 0 || after <= before) return false;
  const int step = std::max(16, static_cast<int>(std::bit_floor(static_cast<unsigned>(after))) / 8);
  return (after + stagger) / step != (before + stagger) / step;
}

Status QuantCache::EndBatch(int n, bool is_prefill) {
  for (int l = 0; l < g_.n_layers; ++l) {
    const int r = store_->ResidualSize(l, 0);
    if (r < residual_len_) continue;
    const int seal = r - r % residual_len_;  // a multiple of 32: whole chunks
    const int before = store_->NumChunks(l, 0);
    HQEKV_RETURN_IF_ERROR(store_->Seal(l, cache::kAllHeads, seal, kf_, vf_));
    if (RepackDue(before, store_->NumChunks(l, 0), l % 16)) store_->RepackLayer(l);
  }
  if (budget_bits_ > 0) {
    // bits=B: the waiting fp16 tokens cost 16 bits per element; at lengths
    // shorter than the cache's full context (where KiviBitsForBudget chose
    // the width) R - 1 of them take a layer above B (kivi:bits=4 held 4.42
    // true bits 100 tokens into a decode after a 1536-token prompt). While
    // a layer holds more than B its whole waiting chunks are sealed now.
    const LayerLayout layout{g_.n_kv_heads, g_.head_dim};
    for (int l = 0; l < g_.n_layers; ++l) {
      const int r = store_->ResidualSize(l, 0);
      if (r < 32) continue;
      if (LayerBits(layout, LayerAllocatedBytes(l), store_->AppendedTokens(l)) <= budget_bits_)
        continue;
      const int before = store_->NumChunks(l, 0);
      HQEKV_RETURN_IF_ERROR(store_->Seal(l, cache::kAllHeads, r - r % 32, kf_, vf_));
      if (RepackDue(before, store_->NumChunks(l, 0), l % 16)) store_->RepackLayer(l);
    }
    // Still over B (fewer than 32 tokens wait in fp16: nothing to seal): the
    // sequence is too short for B; BudgetNote says so.
    for (int l = 0; l < g_.n_layers; ++l) {
      const int64_t n_l = store_->AppendedTokens(l);
      const double held = LayerBits(layout, LayerAllocatedBytes(l), n_l);
      if (held > budget_bits_ + 1e-9 && held > over_bits_) {
        over_bits_ = held;
        over_tokens_ = n_l;
      }
    }
  }
  return Status::Ok();
}

std::string QuantCache::BudgetNote() const {
  if (over_bits_ <= 0) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "bits=%g is below what the fp16 residual allows at this length: a layer held %.3f "
                "true bits per element at %lld tokens (up to %d tokens wait in fp16)",
                budget_bits_, over_bits_, static_cast<long long>(over_tokens_), residual_len_ - 1);
  return buf;
}

}  // namespace hqekv::policy
