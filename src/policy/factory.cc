#include "policy/factory.h"

#include "cache/plain_cache.h"

namespace hqekv {

Result<std::unique_ptr<KvCache>> MakeKvCache(const std::string& spec, const KvGeometry& g) {
  PlainPrecision p;
  if (spec == "fp16") {
    p = PlainPrecision::kF16;
  } else if (spec == "fp32") {
    p = PlainPrecision::kF32;
  } else {
    return MakeError("unknown KV policy '" + spec + "' (known: fp16, fp32)");
  }
  auto c = PlainKvCache::Create(g, p);
  if (!c.ok()) return c.error();
  return std::unique_ptr<KvCache>(std::move(c).value());
}

}  // namespace hqekv
