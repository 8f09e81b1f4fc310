#include "policy/factory.h"

#include <algorithm>

#include "cache/window_cache.h"
#include "policy/profile.h"

namespace hqekv {
namespace policy {

Result<std::unique_ptr<KvCache>> CreateCache(const PolicySpec& spec, const KvGeometry& g,
                                             const CacheContext& ctx) {
  const PolicyInfo* p = FindPolicy(spec.name);
  if (!p) return MakeError("unknown KV policy '" + spec.name + "'");
  if (!p->create)
    return MakeError("KV policy '" + spec.name + "' is listed but has no implementation");
  // Soft-capped attention (Gemma 2): only the rings apply the cap, so every
  // layer is a ring, global ones as long as the context.
  if (g.attn_softcap > 0) {
    if (spec.name != "fp16" && spec.name != "fp32")
      return MakeError("KV policy '" + spec.name +
                       "': this model soft-caps its attention scores (Gemma 2), which only the "
                       "fp16 and fp32 caches apply so far");
    KvGeometry rings = g;
    rings.layer_window.resize(g.n_layers, 0);
    for (int& w : rings.layer_window) w = w > 0 ? w : g.max_ctx;
    HQEKV_ASSIGN_OR_RETURN(auto all, WindowedKvCache::Create(rings, nullptr, spec.name == "fp32"));
    return std::unique_ptr<KvCache>(std::move(all));
  }
  // Sliding-window layers keep their own fp16 rings; the policy gets the
  // global layers only (cache/window_cache.h).
  if (std::any_of(g.layer_window.begin(), g.layer_window.end(), [](int w) { return w > 0; })) {
    const KvGeometry global = WindowedKvCache::GlobalGeometry(g);
    std::unique_ptr<KvCache> inner;
    if (global.n_layers > 0) {
      HQEKV_ASSIGN_OR_RETURN(inner, p->create(spec, global, ctx));
    }
    HQEKV_ASSIGN_OR_RETURN(auto windowed,
                           WindowedKvCache::Create(g, std::move(inner), spec.name == "fp32"));
    return std::unique_ptr<KvCache>(std::move(windowed));
  }
  return p->create(spec, g, ctx);
}

Status CheckSpecForModel(const PolicySpec& spec, const CacheContext& ctx) {
  if (!spec.Has("profile")) return Status::Ok();
  const int n_layers = ctx.model ? ctx.model->n_layers : 0;
  HQEKV_RETURN_IF_ERROR(LoadSpecProfile(spec, ctx, n_layers));
  return Status::Ok();
}

CacheContext ForModel(std::string name, std::string identity, int n_layers) {
  CacheContext ctx;
  ctx.model = ModelIdentity{std::move(name), std::move(identity), n_layers};
  return ctx;
}

}  // namespace policy

Result<std::unique_ptr<KvCache>> MakeKvCache(const std::string& text, const KvGeometry& g) {
  HQEKV_ASSIGN_OR_RETURN(const policy::PolicySpec spec, policy::ParseSpec(text));
  return policy::CreateCache(spec, g, policy::CacheContext{});
}

}  // namespace hqekv
