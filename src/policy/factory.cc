#include "policy/factory.h"

#include "cache/plain_cache.h"
#include "policy/evict_cache.h"
#include "policy/hqekv_cache.h"
#include "policy/quant_cache.h"
#include "policy/spec.h"

namespace hqekv {

Result<std::unique_ptr<KvCache>> MakeKvCache(const std::string& text, const KvGeometry& g) {
  auto parsed = policy::ParseSpec(text);
  if (!parsed.ok()) return parsed.error();
  const policy::PolicySpec& spec = *parsed;
  const std::string& name = spec.name;
  if (name == "fp16" || name == "fp32") {
    auto c = PlainKvCache::Create(g, name == "fp16" ? PlainPrecision::kF16 : PlainPrecision::kF32);
    if (!c.ok()) return c.error();
    return std::unique_ptr<KvCache>(std::move(c).value());
  }
  if (name == "fp8" || name == "int8" || name == "kivi") return policy::QuantCache::Create(spec, g);
  if (name == "streaming" || name == "h2o" || name == "snapkv" || name == "pyramid") {
    return policy::EvictCache::Create(spec, g);
  }
  if (name == "hqekv") return policy::HqekvCache::Create(spec, g);
  return MakeError("KV policy '" + name + "' is listed but has no implementation");
}

}  // namespace hqekv
