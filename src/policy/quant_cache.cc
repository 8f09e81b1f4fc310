#include "policy/quant_cache.h"

#include <algorithm>

namespace hqekv::policy {

QuantCache::QuantCache(const KvGeometry& g, std::string describe, quant::Format kf,
                       quant::Format vf, int residual_len)
    : StoreBackedCache(g, std::move(describe), 2, false), kf_(kf), vf_(vf), residual_len_(residual_len) {}

Result<std::unique_ptr<KvCache>> QuantCache::Create(const PolicySpec& spec, const KvGeometry& g,
                                                   const CacheContext&) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  const int D = g.head_dim;
  quant::Format kf, vf;
  int residual = 32;
  if (spec.name == "fp8") {
    kf = vf = quant::Fp8E4M3();
  } else if (spec.name == "int8") {
    kf = vf = quant::Int8PerToken();
  } else if (spec.name == "kivi") {
    const int bits = spec.Int("bits");
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
    kf = quant::Uniform(bits, quant::Grouping::kPerChannel);
    vf = quant::Uniform(bits, quant::Grouping::kPerToken, group);
  } else {
    return MakeError("QuantCache: not a quantization policy: '" + spec.name + "'");
  }
  HQEKV_RETURN_IF_ERROR(quant::Validate(kf, 32, D));
  HQEKV_RETURN_IF_ERROR(quant::Validate(vf, 32, D));
  std::unique_ptr<QuantCache> c(new QuantCache(g, spec.Canonical(), kf, vf, residual));
  HQEKV_RETURN_IF_ERROR(c->init_status());
  return std::unique_ptr<KvCache>(std::move(c));
}

Status QuantCache::EndBatch(int n, bool is_prefill) {
  for (int l = 0; l < g_.n_layers; ++l) {
    const int r = store_->ResidualSize(l, 0);
    if (r < residual_len_) continue;
    const int seal = r - r % residual_len_;  // a multiple of 32: whole chunks
    HQEKV_RETURN_IF_ERROR(store_->Seal(l, cache::kAllHeads, seal, kf_, vf_));
  }
  return Status::Ok();
}

}  // namespace hqekv::policy
